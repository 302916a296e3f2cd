#include "tensorhub/serve/model_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/serve/warmup.h"

namespace tensorhub {

using TimePoint = std::chrono::steady_clock::time_point;

namespace {

// Where a request falls on [0, 1): its routing key's place, or a random one without a key.
double routing_point(std::string_view key) {
  if (key.empty()) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  // The first 8 bytes of the key's SHA-256 as a fraction of 2^64: the same on every build and
  // machine (std::hash is neither), and uniform for any keys.
  const std::string hex = sha256_hex(std::string(key));
  return static_cast<double>(std::stoull(hex.substr(0, 16), nullptr, 16)) * 0x1p-64;
}

// The label `key` places on the cumulative line of the weights of the labels `ready(label)`
// accepts, or of all of them when it accepts none. `traffic` is not empty.
template <typename Ready>
std::string pick_label(const std::vector<std::pair<std::string, double>>& traffic, std::string_view key, Ready ready) {
  double total = 0;
  for (const auto& [label, w] : traffic)
    if (ready(label)) total += w;
  const bool all = total == 0;
  if (all)
    for (const auto& [label, w] : traffic) total += w;
  const double point = routing_point(key) * total;
  double upto = 0;
  const std::string* last = nullptr;
  for (const auto& [label, w] : traffic) {
    if (!all && !ready(label)) continue;
    upto += w;
    last = &label;
    if (point < upto) return label;
  }
  return *last;  // point == total after rounding
}

}  // namespace

std::string to_string(ServableState s) {
  switch (s) {
    case ServableState::kStart: return "START";
    case ServableState::kLoading: return "LOADING";
    case ServableState::kAvailable: return "AVAILABLE";
    case ServableState::kUnloading: return "UNLOADING";
    case ServableState::kEnd: return "END";
  }
  return "UNKNOWN";
}

struct ModelManager::Version {
  VersionStatus status;
  std::shared_ptr<const Servable> servable;  // set while AVAILABLE
  int failures = 0;                           // failed loads in a row
  TimePoint next_attempt{};                   // no load before this after a failure
};

struct ModelManager::Model {
  std::string name;
  std::unique_ptr<Source> source;
  VersionPolicy policy;
  std::map<std::string, std::int64_t> labels;
  std::vector<std::pair<std::string, double>> traffic;  // Source::traffic_split(), weights as given
  std::map<std::int64_t, Version> versions;

  // What the last listing of the source gave: nothing yet, versions, none, or an error.
  enum class Listing { kNotYet, kVersions, kEmpty, kBroken } listing = Listing::kNotYet;
  std::string source_error;  // when kBroken
  int source_failures = 0;   // failed listings in a row
  TimePoint next_listing{};  // no listing before this after a failure

  bool any_available() const {
    return std::any_of(versions.begin(), versions.end(), [](const auto& v) { return v.second.servable != nullptr; });
  }
  // Whether a version is loading for the first time. A failed one being retried is not
  // counted: until it loads, requests keep the answer of its failure.
  bool any_first_load() const {
    return std::any_of(versions.begin(), versions.end(), [](const auto& v) {
      const VersionStatus& s = v.second.status;
      return (s.state == ServableState::kLoading || s.state == ServableState::kStart) && s.error.empty();
    });
  }
};

ModelManager::ModelManager(ManagerOptions options) : options_(std::move(options)) {
  if (!options_.log)
    options_.log = [](const std::string& line) {
      std::cerr << "[serve " << format_time(now_micros()) << "] " << line << std::endl;
    };
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
}

ModelManager::~ModelManager() { stop_polling(); }

void ModelManager::add_model(const std::string& name, std::unique_ptr<Source> source, VersionPolicy policy,
                             std::map<std::string, std::int64_t> labels) {
  if (name.empty()) throw InvalidArgument("a served model needs a name (--model_name)");
  if (!source) throw InvalidArgument("model " + name + " needs a source");
  WriterMutexLock lock(mutex_);
  if (models_.count(name)) throw InvalidArgument("model " + name + " is configured twice");
  auto m = std::make_unique<Model>();
  m->name = name;
  m->source = std::move(source);
  m->policy = std::move(policy);
  m->labels = std::move(labels);
  m->traffic = m->source->traffic_split();
  models_[name] = std::move(m);
}

std::chrono::steady_clock::duration ModelManager::backoff(int failures) const {
  const double seconds = std::min(options_.retry_max_seconds,
                                  std::max(0.0, options_.retry_initial_seconds) * std::pow(2.0, failures - 1));
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

void ModelManager::replace_models(std::vector<ServedModel> models, bool allow_unavailable_labels) {
  std::set<std::string> names;
  for (const auto& m : models) {
    if (m.name.empty()) throw InvalidArgument("a served model needs a name (config { name: ... })");
    if (!m.source) throw InvalidArgument("model " + m.name + " needs a source");
    if (!names.insert(m.name).second) throw InvalidArgument("model " + m.name + " is configured twice");
  }
  MutexLock polling(poll_mutex_);
  {
    WriterMutexLock lock(mutex_);
    for (auto it = models_.begin(); it != models_.end();) {
      if (names.count(it->first)) {
        ++it;
        continue;
      }
      options_.log("model " + it->first + " removed by a config reload");
      it = models_.erase(it);  // servables in flight live on in their requests' shared_ptrs
    }
    for (auto& spec : models) {
      auto& slot = models_[spec.name];
      if (!slot) {
        slot = std::make_unique<Model>();
        slot->name = spec.name;
        options_.log("model " + spec.name + " added by a config reload");
      }
      // A kept model keeps its versions (loaded ones serve on) and reads the new source now.
      slot->source = std::move(spec.source);
      slot->policy = std::move(spec.policy);
      slot->labels = std::move(spec.labels);
      slot->traffic = slot->source->traffic_split();
      slot->source_failures = 0;
      slot->next_listing = {};
      for (auto& [v, ver] : slot->versions) ver.failures = 0, ver.next_attempt = {};
    }
  }
  poll_all();
  // TF Serving refuses, after loading, a config whose label names a version not available.
  if (!allow_unavailable_labels) check_labels();
}

void ModelManager::poll() {
  MutexLock polling(poll_mutex_);
  poll_all();
}

void ModelManager::poll_all() {
  std::vector<Model*> models;
  {
    ReaderMutexLock lock(mutex_);
    for (auto& [name, m] : models_) models.push_back(m.get());
  }
  for (Model* m : models) poll_model(*m);
}

void ModelManager::poll_model(Model& m) {
  const TimePoint now = options_.now();
  if (now < m.next_listing) return;  // a broken source is backing off
  std::map<std::int64_t, Loader> listed;
  list_source(m, now, listed);
  if (m.listing == Model::Listing::kBroken) return;  // keep serving what is loaded
  std::set<std::int64_t> present;
  for (const auto& [v, loader] : listed) present.insert(v);
  std::set<std::int64_t> wanted = aspired_versions(m.policy, present);
  for (std::int64_t v : wanted) load_version(m, v, listed.at(v));
  if (auto labels = m.source->listed_labels()) keep_labels_available(m, *labels, wanted);
  unload_unwanted(m, wanted);
}

// Moves each of the source's labels to the version it now names once that version is
// AVAILABLE; until then the label keeps its old version, which stays loaded (added to
// `wanted`), so a moved alias never answers "not loaded" and a failed load keeps the old
// version serving.
void ModelManager::keep_labels_available(Model& m, const std::map<std::string, std::int64_t>& listed_labels,
                                         std::set<std::int64_t>& wanted) {
  WriterMutexLock lock(mutex_);
  const auto available = [&](std::int64_t v) {
    const auto it = m.versions.find(v);
    return it != m.versions.end() && it->second.servable != nullptr;
  };
  std::map<std::string, std::int64_t> labels;
  for (const auto& [label, v] : listed_labels) {
    const auto old = m.labels.find(label);
    if (!available(v) && old != m.labels.end() && old->second != v && available(old->second)) {
      labels[label] = old->second;
      wanted.insert(old->second);
      continue;
    }
    if (old != m.labels.end() && old->second != v)
      options_.log("model " + m.name + ": label " + label + " moved from version " + std::to_string(old->second) +
                   " to " + std::to_string(v));
    labels[label] = v;
  }
  m.labels = std::move(labels);
}

// Lists the source into `listed`, recording (and logging once per change) whether it gave
// versions, none, or an error.
void ModelManager::list_source(Model& m, TimePoint now, std::map<std::int64_t, Loader>& listed) {
  using Listing = Model::Listing;
  try {
    listed = m.source->list_versions();
  } catch (const std::exception& e) {
    WriterMutexLock lock(mutex_);
    ++m.source_failures;
    m.next_listing = now + backoff(m.source_failures);
    if (m.listing != Listing::kBroken && !quiet_sources_)
      options_.log("warning: model " + m.name + ": cannot read its source, " + m.source->describe() + ": " + e.what() +
                   "; retrying with backoff" + (m.any_available() ? " (its loaded versions keep serving)" : ""));
    m.listing = Listing::kBroken;
    m.source_error = e.what();
    return;
  }
  WriterMutexLock lock(mutex_);
  const Listing now_listing = listed.empty() ? Listing::kEmpty : Listing::kVersions;
  if (m.listing == Listing::kBroken) options_.log("model " + m.name + ": its source can be read again, " + m.source->describe());
  if (now_listing == Listing::kEmpty && m.listing != Listing::kEmpty)
    options_.log("warning: model " + m.name + " has nothing to serve: " + m.source->empty_message() +
                 (m.any_available() ? "; its loaded versions are unloaded, as TF Serving unloads removed versions" : ""));
  m.listing = now_listing;
  m.source_error.clear();
  m.source_failures = 0;
  m.next_listing = {};
}

// Loads one wanted version unless it is AVAILABLE or a failed load is backing off.
void ModelManager::load_version(Model& m, std::int64_t v, const Loader& loader) {
  const TimePoint now = options_.now();
  Version* ver;
  {
    WriterMutexLock lock(mutex_);
    ver = &m.versions[v];  // std::map: the address stays valid
    if (ver->servable || (ver->failures > 0 && now < ver->next_attempt)) return;
    ver->status = {v, ServableState::kLoading, ver->status.error, ver->status.error_kind};
  }
  const std::string what = "model " + m.name + " version " + std::to_string(v);
  try {
    auto servable = loader();  // outside the lock: loading can take seconds
    // TF Serving's warmup: part of the load, so the version stays LOADING until every
    // record is replayed, and a failed warmup fails the load.
    const std::string warmed = warm_up(m, v, *servable);
    WriterMutexLock lock(mutex_);
    ver->servable = std::move(servable);
    ver->status = {v, ServableState::kAvailable, "", std::nullopt};
    const int failed = ver->failures;
    options_.log(what + " is AVAILABLE" + warmed +
                 (failed ? " (after " + std::to_string(failed) + (failed == 1 ? " failed attempt)" : " failed attempts)")
                         : ""));
    ver->failures = 0;
  } catch (const std::exception& e) {
    WriterMutexLock lock(mutex_);
    ++ver->failures;
    ver->next_attempt = now + backoff(ver->failures);
    // Logged once per distinct error, not once per retry.
    if (ver->failures == 1 || ver->status.error != e.what())
      options_.log("warning: " + what + " failed to load: " + e.what() + "; retrying on the next poll, then with backoff");
    const auto* error = dynamic_cast<const Error*>(&e);
    ver->status = {v, ServableState::kEnd, e.what(), error ? std::optional(error->kind()) : std::nullopt};
  }
}

// Replays the warmup requests of version `v` (warmup.h) on `servable`, if its source has any;
// returns what to add to the AVAILABLE line (" after warmup: 3 records in 12 ms"), or "".
std::string ModelManager::warm_up(Model& m, std::int64_t v, const Servable& servable) {
  if (!options_.enable_warmup) return "";
  const auto requests = m.source->warmup_requests(v);
  if (!requests) return "";
  const WarmupResult w = run_warmup(servable, *requests);
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", w.seconds * 1e3);
  return " after warmup: " + std::to_string(w.records) + (w.records == 1 ? " record" : " records") + " of " +
         requests->where + " in " + ms + " ms";
}

// Unloads loaded versions no longer wanted once a wanted one is AVAILABLE, or at once when
// none is wanted (TF Serving's AvailabilityPreservingPolicy: a version directory removed, or a
// hub model deleted, with nothing to take its place, stops being served).
void ModelManager::unload_unwanted(Model& m, const std::set<std::int64_t>& wanted) {
  WriterMutexLock lock(mutex_);
  const bool wanted_available = std::any_of(wanted.begin(), wanted.end(), [&](std::int64_t v) {
    auto it = m.versions.find(v);
    return it != m.versions.end() && it->second.servable;
  });
  if (!wanted_available && !wanted.empty()) return;
  for (auto& [v, ver] : m.versions) {
    if (wanted.count(v) || !ver.servable) continue;
    ver.servable.reset();  // in-flight requests keep their shared_ptr until they finish
    ver.status = {v, ServableState::kEnd, "", std::nullopt};
    options_.log("model " + m.name + " version " + std::to_string(v) + " unloaded");
  }
}

void ModelManager::start_polling(double seconds) {
  {
    MutexLock polling(poll_mutex_);
    quiet_sources_ = true;
    poll_all();
    quiet_sources_ = false;
  }
  if (seconds <= 0) return;
  poller_ = std::thread([this, seconds] { poll_every(seconds); });
}

void ModelManager::poll_every(double seconds) {
  const auto period = std::chrono::ceil<TimePoint::duration>(std::chrono::duration<double>(seconds));
  MutexLock lock(stop_mutex_);
  while (!stop_) {
    // Sleeps a period, or less if stop_polling() comes first.
    const TimePoint deadline = std::chrono::steady_clock::now() + period;
    while (!stop_ && stop_mutex_.wait_until(stop_cv_, deadline) == std::cv_status::no_timeout) {
    }
    if (stop_) return;
    lock.unlock();
    poll();
    lock.lock();
  }
}

void ModelManager::stop_polling() {
  {
    MutexLock lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

const ModelManager::Model& ModelManager::find(const std::string& name) const {
  auto it = models_.find(name);
  if (it == models_.end()) throw NotFound("Servable not found for request: Latest(" + name + ")");
  return *it->second;
}

// Why `m` has no AVAILABLE version, for a 404/503 reply.
std::string ModelManager::why_nothing_loaded(const Model& m) const {
  using Listing = Model::Listing;
  switch (m.listing) {
    case Listing::kNotYet: return "its source has not been read yet";
    case Listing::kBroken:
      return "cannot read its source, " + m.source->describe() + ": " + m.source_error + " (retrying)";
    case Listing::kEmpty: return m.source->empty_message();
    case Listing::kVersions: break;
  }
  std::string out;
  for (auto it = m.versions.rbegin(); it != m.versions.rend(); ++it) {
    const VersionStatus& s = it->second.status;
    out += (out.empty() ? "" : "; ") + std::string("version ") + std::to_string(s.version) + " is " + to_string(s.state) +
           (s.error.empty() ? "" : ": " + s.error);
  }
  return out.empty() ? "the version policy wants none of the versions of " + m.source->describe() : out;
}

std::int64_t ModelManager::resolve_version(const std::string& name, std::optional<std::int64_t> version,
                                           const std::optional<std::string>& label,
                                           std::string_view routing_key) const {
  ReaderMutexLock lock(mutex_);
  const Model& m = find(name);
  std::optional<std::string> split;  // the label a weighted split picks for an unversioned request
  if (!label && !version && !m.traffic.empty()) {
    // Labels whose version cannot answer (not loaded yet, failed, or a label allowed onto a
    // missing version) get no share while others can: their weight goes to those that do.
    split = pick_label(m.traffic, routing_key, [&m](const std::string& l) {
      const auto at = m.labels.find(l);
      if (at == m.labels.end()) return false;
      const auto v = m.versions.find(at->second);
      return v != m.versions.end() && v->second.servable != nullptr;
    });
  }
  if (const std::optional<std::string>& named = label ? label : split) {  // the request's, or the split's
    // TF Serving's ServerCore::GetModelVersionForLabel: an unknown label is the caller's error.
    if (!m.labels.count(*named)) throw InvalidArgument("Unrecognized servable version label: " + *named);
    return m.labels.at(*named);
  }
  if (version) return *version;
  for (auto it = m.versions.rbegin(); it != m.versions.rend(); ++it)
    if (it->second.servable) return it->first;
  const std::string text = "Servable not found for request: Latest(" + name + "): no version is loaded: " +
                           why_nothing_loaded(m);
  // TF Serving answers NOT_FOUND (404) whenever nothing is loaded; 503 is kept for what may
  // soon change: a first load in progress, a source not read yet or unreadable.
  if (m.listing == Model::Listing::kEmpty || (m.listing == Model::Listing::kVersions && !m.any_first_load()))
    throw NotFound(text);
  throw Unavailable(text);
}

std::shared_ptr<const Servable> ModelManager::get(const std::string& name, std::optional<std::int64_t> version,
                                                  const std::optional<std::string>& label) const {
  const std::int64_t v = resolve_version(name, version, label);
  ReaderMutexLock lock(mutex_);
  const Model& m = find(name);
  auto it = m.versions.find(v);
  if (it != m.versions.end() && it->second.servable) return it->second.servable;
  if (it != m.versions.end() && it->second.status.state == ServableState::kLoading)
    throw Unavailable("Servable " + name + " version " + std::to_string(v) + " is still loading");
  std::string text = "Servable not found for request: Specific(" + name + ", " + std::to_string(v) + ")";
  if (label) text += ": label " + *label + " of model " + name + " points at version " + std::to_string(v) + ", which is not loaded";
  if (it != m.versions.end() && !it->second.status.error.empty()) text += ": it failed to load: " + it->second.status.error;
  throw NotFound(text);
}

void ModelManager::check_labels() const {
  ReaderMutexLock lock(mutex_);
  std::string problems;
  for (const auto& [name, m] : models_) {
    // A broken source is reported (and retried) on its own; its labels cannot be judged yet.
    if (m->listing == Model::Listing::kBroken) continue;
    for (const auto& [label, v] : m->labels) {
      const auto it = m->versions.find(v);
      if (it != m->versions.end() && it->second.servable) continue;
      problems += (problems.empty() ? "" : "; ") + std::string("Request to assign label to version ") +
                  std::to_string(v) + " of model " + name + ", which is not currently available for inference " +
                  "(version_labels { key: '" + label + "' value: " + std::to_string(v) + " })";
    }
  }
  if (!problems.empty()) throw FailedPrecondition(problems);
}

std::vector<VersionStatus> ModelManager::status(const std::string& name, std::optional<std::int64_t> version,
                                                const std::optional<std::string>& label) const {
  std::optional<std::int64_t> v = version;
  if (label) v = resolve_version(name, version, label);
  ReaderMutexLock lock(mutex_);
  const Model& m = find(name);
  std::vector<VersionStatus> out;
  for (auto it = m.versions.rbegin(); it != m.versions.rend(); ++it)
    if (!v || it->first == *v) out.push_back(it->second.status);
  if (v && out.empty()) throw NotFound("Could not find version " + std::to_string(*v) + " of model " + name);
  if (out.empty()) {
    // TF Serving answers NotFound for a model without versions; we add why it has none.
    const std::string text = "Could not find any versions of model " + name + ": " + why_nothing_loaded(m);
    if (m.listing == Model::Listing::kBroken) throw Unavailable(text);
    throw NotFound(text);
  }
  return out;
}

std::vector<std::string> ModelManager::model_names() const {
  ReaderMutexLock lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

bool ModelManager::has_model(const std::string& name) const {
  ReaderMutexLock lock(mutex_);
  return models_.count(name) > 0;
}

std::vector<SourceProblem> ModelManager::broken_sources() const {
  ReaderMutexLock lock(mutex_);
  std::vector<SourceProblem> out;
  for (const auto& [name, m] : models_)
    if (m->listing == Model::Listing::kBroken) out.push_back({name, m->source->describe(), m->source_error});
  return out;
}

}  // namespace tensorhub
