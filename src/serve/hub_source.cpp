#include "tensorhub/serve/hub_source.h"

#include "tensorhub/serve/warmup.h"

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

}  // namespace

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
  std::map<std::int64_t, Loader> out;
  listed_.reset();
  try {
    if (!hub_) open();
    const auto docs = hub_->find_models(query_.filter, query_.sort, 1);
    if (docs.empty()) return out;
    out[docs[0].id] = [hub = hub_, doc = docs[0]] { return load_hub_model(*hub, doc); };
    listed_ = docs[0];
  } catch (...) {
    hub_.reset();  // reconnect on the next call
    throw;
  }
  return out;
}

std::optional<WarmupRequests> HubSource::warmup_requests(std::int64_t version) {
  if (!listed_ || listed_->id != version || !hub_ || !listed_->parts.count(kWarmupPart)) return std::nullopt;
  WarmupRequests r;
  r.model_path = "hub model " + std::to_string(version);
  r.where = r.model_path + " part " + kWarmupPart;
  r.bytes = hub_->load_model_part(*listed_, kWarmupPart);
  return r;
}

std::string HubSource::describe() const {
  return "hub query " + query_.filter.dump() + " sorted by " + sort_text(query_.sort) + " in project " +
         query_.project + " of " + mask_passwords(query_.hub_uri);
}

std::string HubSource::empty_message() const {
  return describe() + " matched no model: check --hub_model, --hub_filter, --project and --hub " +
         "(tensorhub model list shows the models there)";
}

}  // namespace tensorhub
