#include "tensorhub/serve/model_manager.h"


#include <algorithm>
#include <filesystem>
#include <iostream>

#include "serving_config.pb.h"
#include "text_proto.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub::serve {

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

struct ModelManager::Model {
  std::string name;
  std::optional<ModelConfig> files;
  std::optional<HubModelConfig> hub_source;
  std::unique_ptr<Hub> hub;  // kept open between polls
  std::map<std::int64_t, VersionStatus> states;
  std::map<std::int64_t, std::shared_ptr<const Servable>> loaded;
};

namespace {

void log(const std::string& line) { std::cerr << "[serve " << format_time(now_micros()) << "] " << line << std::endl; }

// Version directories under a base path: names that are whole non-negative numbers
// ("123" or TF Serving's zero-padded "00000123"), by version.
std::map<std::int64_t, std::filesystem::path> list_versions(const std::string& base) {
  std::map<std::int64_t, std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    if (!entry.is_directory()) continue;
    const std::string n = entry.path().filename().string();
    if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    out[std::stoll(n)] = entry.path();
  }
  if (ec) throw Unavailable("cannot list model base path " + base + ": " + ec.message());
  return out;
}

std::set<std::int64_t> wanted_versions(const VersionPolicy& p, const std::set<std::int64_t>& present) {
  std::set<std::int64_t> out;
  switch (p.kind) {
    case VersionPolicy::kAll: return present;
    case VersionPolicy::kSpecific:
      for (auto v : p.versions)
        if (present.count(v)) out.insert(v);
      return out;
    case VersionPolicy::kLatest: {
      int n = 0;
      for (auto it = present.rbegin(); it != present.rend() && n < p.latest; ++it, ++n) out.insert(*it);
      return out;
    }
  }
  return out;
}

}  // namespace

ModelManager::ModelManager() = default;
ModelManager::~ModelManager() { stop_polling(); }

void ModelManager::add_model(const ModelConfig& config) {
  if (config.name.empty()) throw InvalidArgument("a served model needs a name (--model_name)");
  if (config.base_path.empty()) throw InvalidArgument("model " + config.name + " needs a base_path (--model_base_path)");
  std::unique_lock lock(mutex_);
  if (models_.count(config.name)) throw InvalidArgument("model " + config.name + " is configured twice");
  auto m = std::make_unique<Model>();
  m->name = config.name;
  m->files = config;
  models_[config.name] = std::move(m);
}

void ModelManager::add_hub_model(const HubModelConfig& config) {
  if (config.name.empty()) throw InvalidArgument("a served model needs a name (--model_name)");
  std::unique_lock lock(mutex_);
  if (models_.count(config.name)) throw InvalidArgument("model " + config.name + " is configured twice");
  auto m = std::make_unique<Model>();
  m->name = config.name;
  m->hub_source = config;
  models_[config.name] = std::move(m);
}

void ModelManager::poll() {
  std::vector<Model*> models;
  {
    std::shared_lock lock(mutex_);
    for (auto& [name, m] : models_) models.push_back(m.get());
  }
  for (Model* m : models) {
    try {
      poll_model(*m);
    } catch (const std::exception& e) {
      log("model " + m->name + ": " + e.what() + " (will retry)");
      if (m->hub_source) m->hub.reset();  // reconnect next time
    }
  }
}

void ModelManager::poll_model(Model& m) {
  // 1. Which versions exist and which the policy wants.
  std::set<std::int64_t> present;
  std::function<std::shared_ptr<const Servable>(std::int64_t)> load;
  VersionPolicy policy;
  if (m.files) {
    const auto dirs = list_versions(m.files->base_path);
    for (const auto& [v, dir] : dirs) present.insert(v);
    policy = m.files->policy;
    load = [dirs](std::int64_t v) { return load_servable(dirs.at(v)); };
  } else {
    const auto& src = *m.hub_source;
    if (!m.hub) m.hub = std::make_unique<Hub>(src.hub_uri, src.project);
    Json filter = src.filter;
    filter["model_name"] = src.model_name;
    SortSpec sort = src.sort.empty() ? SortSpec{{"time", -1}} : src.sort;
    const auto docs = m.hub->find_models(filter, sort, 1);
    if (!docs.empty()) present.insert(docs[0].id);
    Hub* hub = m.hub.get();
    load = [hub, docs](std::int64_t v) {
      const auto record = hub->load_model(docs.at(0));
      return make_model_servable(record.architecture, record.weights, "hub model " + std::to_string(v));
    };
  }
  const std::set<std::int64_t> wanted = wanted_versions(policy, present);

  // 2. Load wanted versions not loaded yet (outside the lock: loading can take seconds).
  for (std::int64_t v : wanted) {
    {
      std::shared_lock lock(mutex_);
      auto it = m.states.find(v);
      if (it != m.states.end() && (it->second.state == ServableState::kAvailable || it->second.state == ServableState::kEnd))
        continue;  // loaded, or failed (a failed version is not retried until it changes)
    }
    {
      std::unique_lock lock(mutex_);
      m.states[v] = {v, ServableState::kLoading, ""};
    }
    try {
      auto servable = load(v);
      std::unique_lock lock(mutex_);
      m.loaded[v] = std::move(servable);
      m.states[v] = {v, ServableState::kAvailable, ""};
      log("model " + m.name + " version " + std::to_string(v) + " is AVAILABLE");
    } catch (const std::exception& e) {
      std::unique_lock lock(mutex_);
      m.states[v] = {v, ServableState::kEnd, e.what()};
      log("model " + m.name + " version " + std::to_string(v) + " failed to load: " + e.what());
    }
  }

  // 3. Unload versions no longer wanted, but only once a wanted one is AVAILABLE.
  std::unique_lock lock(mutex_);
  bool any_available = false;
  for (std::int64_t v : wanted)
    if (m.loaded.count(v)) any_available = true;
  if (!any_available) return;
  for (auto it = m.loaded.begin(); it != m.loaded.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    m.states[it->first] = {it->first, ServableState::kEnd, ""};
    log("model " + m.name + " version " + std::to_string(it->first) + " unloaded");
    it = m.loaded.erase(it);  // in-flight requests keep their shared_ptr until they finish
  }
}

void ModelManager::start_polling(double seconds) {
  poll();
  if (seconds <= 0) return;
  poller_ = std::thread([this, seconds] {
    std::unique_lock lock(stop_mutex_);
    while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stop_; })) {
      lock.unlock();
      poll();
      lock.lock();
    }
  });
}

void ModelManager::stop_polling() {
  {
    std::lock_guard lock(stop_mutex_);
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

std::int64_t ModelManager::resolve_version(const std::string& name, std::optional<std::int64_t> version,
                                           const std::optional<std::string>& label) const {
  std::shared_lock lock(mutex_);
  const Model& m = find(name);
  if (label) {
    if (!m.files || !m.files->labels.count(*label))
      throw NotFound("Unrecognized servable version label: " + *label);
    return m.files->labels.at(*label);
  }
  if (version) return *version;
  if (m.loaded.empty()) throw Unavailable("Servable not found for request: Latest(" + name + "): no version is loaded yet");
  return m.loaded.rbegin()->first;
}

std::shared_ptr<const Servable> ModelManager::get(const std::string& name, std::optional<std::int64_t> version,
                                                  const std::optional<std::string>& label) const {
  const std::int64_t v = resolve_version(name, version, label);
  std::shared_lock lock(mutex_);
  const Model& m = find(name);
  auto it = m.loaded.find(v);
  if (it != m.loaded.end()) return it->second;
  auto st = m.states.find(v);
  if (st != m.states.end() && st->second.state == ServableState::kLoading)
    throw Unavailable("Servable " + name + " version " + std::to_string(v) + " is still loading");
  throw NotFound("Servable not found for request: Specific(" + name + ", " + std::to_string(v) + ")");
}

std::vector<VersionStatus> ModelManager::status(const std::string& name, std::optional<std::int64_t> version,
                                                const std::optional<std::string>& label) const {
  std::optional<std::int64_t> v = version;
  if (label) v = resolve_version(name, version, label);
  std::shared_lock lock(mutex_);
  const Model& m = find(name);
  std::vector<VersionStatus> out;
  for (auto it = m.states.rbegin(); it != m.states.rend(); ++it)
    if (!v || it->first == *v) out.push_back(it->second);
  if (v && out.empty())
    throw NotFound("Could not find version " + std::to_string(*v) + " of model " + name);
  return out;
}

std::vector<std::string> ModelManager::model_names() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

std::vector<ModelConfig> parse_model_config_file(const std::string& text) {
  serving::ModelServerConfig proto;
  parse_text_proto(text, &proto, "--model_config_file");
  std::vector<ModelConfig> out;
  for (const auto& c : proto.model_config_list().config()) {
    ModelConfig m;
    m.name = c.name();
    m.base_path = c.base_path();
    if (!c.model_platform().empty() && c.model_platform() != "tensorflow" && c.model_platform() != "tensorhub")
      throw InvalidArgument("model " + c.name() + ": model_platform \"" + c.model_platform() +
                            "\" is not supported; use \"tensorflow\" (any of our model formats)");
    const auto& p = c.model_version_policy();
    if (p.has_all()) {
      m.policy.kind = VersionPolicy::kAll;
    } else if (p.has_specific()) {
      m.policy.kind = VersionPolicy::kSpecific;
      m.policy.versions.insert(p.specific().versions().begin(), p.specific().versions().end());
    } else if (p.has_latest()) {
      m.policy.latest = std::max<int>(1, static_cast<int>(p.latest().num_versions()));
    }
    for (const auto& [label, version] : c.version_labels()) m.labels[label] = version;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tensorhub::serve
