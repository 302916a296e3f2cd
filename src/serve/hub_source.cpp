#include "tensorhub/serve/hub_source.h"

#include "tensorhub/serve/warmup.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/torchscript_part.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

std::string sort_text(const SortSpec& sort) {
  std::string out;
  for (const auto& [key, dir] : sort) out += (out.empty() ? "" : ",") + key + ":" + std::to_string(dir);
  return out;
}

// The servable of model document `doc`: its TorchScript module when it has a "model.pt" part
// (a PyTorch model saved from Python, or a model.pt stored by `tensorhub model save`), else
// the layers of its model.json with its weights (make_model_servable, which says how to fix a
// PyTorch state_dict saved without TorchScript).
std::shared_ptr<const Servable> load_hub_model(Hub& hub, const Document& doc) {
  const std::string source = "hub model " + std::to_string(doc.id);
  if (const auto bytes = hub.load_model_part(doc, kTorchScriptPart))
    return load_torchscript_servable(*bytes, source);
  const auto record = hub.load_model(doc);
  return make_model_servable(record.architecture, record.weights, source);
}

std::string format_weight(double w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", w);
  return buf;
}

}  // namespace

std::vector<std::pair<std::string, double>> parse_alias_weights(const std::string& text) {
  std::vector<std::pair<std::string, double>> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    const std::size_t eq = item.find('=');
    const std::string alias = item.substr(0, eq);
    try {
      check_alias_name(alias);
    } catch (const Error& e) {
      throw InvalidArgument("--hub_alias \"" + text + "\": " + e.message());
    }
    double weight = 1;
    if (eq != std::string::npos) {
      const std::string w = item.substr(eq + 1);
      char* end = nullptr;
      weight = std::strtod(w.c_str(), &end);
      if (w.empty() || end != w.c_str() + w.size() || !std::isfinite(weight) || weight <= 0)
        throw InvalidArgument("--hub_alias \"" + text + "\": the weight of " + alias + " is \"" + w +
                              "\"; give a positive number, e.g. champion=90,challenger=10");
    }
    for (const auto& [seen, unused] : out)
      if (seen == alias) throw InvalidArgument("--hub_alias \"" + text + "\": " + alias + " is given twice");
    out.emplace_back(alias, weight);
    begin = comma + 1;
  }
  return out;
}

HubSource::HubSource(HubModelQuery query) : query_(std::move(query)) {
  if (query_.sort.empty()) query_.sort = {{"time", -1}};
  query_.filter["model_name"] = query_.model_name;
}

HubSource::~HubSource() = default;

void HubSource::open() {
  // Serving only reads: a mistyped URI must be an error, not a new, empty hub left behind, and
  // a hub this user may only read serves as any other (OpenMode::kReadOnly).
  hub_ = std::make_shared<Hub>(query_.hub_uri, query_.project, OpenMode::kReadOnly);
}

std::map<std::int64_t, Loader> HubSource::list_versions() {
  listed_.clear();
  labels_.clear();
  try {
    if (!hub_) open();
    return query_.aliases.empty() ? list_query() : list_aliases();
  } catch (...) {
    hub_.reset();  // reconnect on the next call
    throw;
  }
}

std::map<std::int64_t, Loader> HubSource::list_query() {
  std::map<std::int64_t, Loader> out;
  const auto docs = hub_->find_models(query_.filter, query_.sort, 1);
  if (docs.empty()) return out;
  out[docs[0].id] = [hub = hub_, doc = docs[0]] { return load_hub_model(*hub, doc); };
  listed_[docs[0].id] = docs[0];
  return out;
}

// Every alias of the model names a version to serve (so each answers as a label); an alias
// the split needs that does not exist is an error of the source, so that what is loaded keeps
// serving and the log says what to do.
std::map<std::int64_t, Loader> HubSource::list_aliases() {
  std::map<std::int64_t, Loader> out;
  for (const ModelAlias& a : hub_->find_model_aliases(query_.model_name)) labels_[a.alias] = a.model_id;
  std::string missing;
  for (const auto& [alias, weight] : query_.aliases)
    if (!labels_.count(alias)) missing += (missing.empty() ? "" : ", ") + alias;
  if (!missing.empty())
    throw NotFound("model \"" + query_.model_name + "\" has no alias " + missing + " in project \"" + query_.project +
                   "\" (`tensorhub model alias set " + query_.model_name + " ALIAS --id ID` makes one; `tensorhub " +
                   "model alias list " + query_.model_name + "` lists them)");
  for (const auto& [alias, id] : labels_) {
    if (out.count(id)) continue;
    const auto docs = hub_->find_models({{"id", id}}, {}, 1);
    if (docs.empty()) continue;  // deleted between the two reads (forced): the next poll drops its alias
    out[id] = [hub = hub_, doc = docs[0]] { return load_hub_model(*hub, doc); };
    listed_[id] = docs[0];
  }
  for (auto it = labels_.begin(); it != labels_.end();) it = out.count(it->second) ? std::next(it) : labels_.erase(it);
  return out;
}

std::optional<std::map<std::string, std::int64_t>> HubSource::listed_labels() {
  if (query_.aliases.empty()) return std::nullopt;
  return labels_;
}

std::vector<std::pair<std::string, double>> HubSource::traffic_split() const { return query_.aliases; }

std::optional<WarmupRequests> HubSource::warmup_requests(std::int64_t version) {
  const auto it = listed_.find(version);
  if (it == listed_.end() || !hub_ || !it->second.parts.count(kWarmupPart)) return std::nullopt;
  WarmupRequests r;
  r.model_path = "hub model " + std::to_string(version);
  r.where = r.model_path + " part " + kWarmupPart;
  r.bytes = hub_->load_model_part(it->second, kWarmupPart);
  return r;
}

std::string HubSource::describe() const {
  if (!query_.aliases.empty()) {
    std::string aliases;
    for (const auto& [alias, weight] : query_.aliases)
      aliases += (aliases.empty() ? "" : ",") + alias + "=" + format_weight(weight);
    return "hub model " + query_.model_name + " aliases " + aliases + " in project " + query_.project + " of " +
           mask_passwords(query_.hub_uri);
  }
  return "hub query " + query_.filter.dump() + " sorted by " + sort_text(query_.sort) + " in project " +
         query_.project + " of " + mask_passwords(query_.hub_uri);
}

std::string HubSource::empty_message() const {
  if (!query_.aliases.empty()) return describe() + ": the aliases name no model (`tensorhub model alias list`)";
  return describe() + " matched no model: check --hub_model, --hub_filter, --project and --hub " +
         "(tensorhub model list shows the models there)";
}

}  // namespace tensorhub
