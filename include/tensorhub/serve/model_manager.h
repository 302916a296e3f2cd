// ModelManager: which versions of which models are loaded, and the sources they come from,
// after TensorFlow Serving's AspiredVersionsManager (tensorflow_serving/core/).
//
// Sources: a base path with one numbered directory per version (<base_path>/<version>/), or
// a hub query ("the best model named mlp by test_accuracy"), whose document id is the
// version. poll() scans every source: versions the policy wants are loaded (LOADING ->
// AVAILABLE, or END with the error), and versions it no longer wants are unloaded only once
// a wanted version is AVAILABLE, so a model never stops serving during an update.
//
// Thread safety: get() and status() may be called from any thread while poll() runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/serve/servable.h"
#include "tensorhub/store/document.h"

namespace tensorhub::serve {

/// TF Serving's ServableState::ManagerState names.
enum class ServableState { kStart, kLoading, kAvailable, kUnloading, kEnd };
std::string to_string(ServableState state);

/// model_version_policy of TF Serving's ModelConfig: latest N (default 1), all, or specific.
struct VersionPolicy {
  enum Kind { kLatest, kAll, kSpecific } kind = kLatest;
  int latest = 1;
  std::set<std::int64_t> versions;  ///< for kSpecific
};

/// One model served from a file system base path.
struct ModelConfig {
  std::string name;
  std::string base_path;
  VersionPolicy policy;
  std::map<std::string, std::int64_t> labels;  ///< version_labels, e.g. {"stable": 1}
};

/// One model served from a hub query: the first model document named `model_name`
/// matching `filter` in `sort` order; its id is the version.
struct HubModelConfig {
  std::string name;         ///< the served name
  std::string hub_uri;
  std::string project = "default";
  std::string model_name;   ///< the hub's model_name
  Json filter = Json::object();
  SortSpec sort;
};

/// One version's state, as GET /v1/models/{name} reports it.
struct VersionStatus {
  std::int64_t version = 0;
  ServableState state = ServableState::kStart;
  std::string error;  ///< empty when OK
};

class ModelManager {
 public:
  ModelManager();
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  /// Adds a source. Throws InvalidArgument for an empty or duplicate name.
  void add_model(const ModelConfig& config);
  void add_hub_model(const HubModelConfig& config);

  /// Scans every source once and loads/unloads versions. Load errors are recorded in the
  /// version's status, never thrown; an unreadable base path is logged and retried.
  void poll();
  /// Polls every `seconds` in a background thread (0: never again after the first poll).
  void start_polling(double seconds);
  void stop_polling();

  /// The AVAILABLE servable for `name` (newest version unless `version` or `label` is
  /// given). Throws NotFound for an unknown model, version or label, Unavailable while the
  /// wanted version is not loaded yet.
  std::shared_ptr<const Servable> get(const std::string& name, std::optional<std::int64_t> version = {},
                                      const std::optional<std::string>& label = {}) const;
  /// The version the request resolves to (same rules and errors as get()).
  std::int64_t resolve_version(const std::string& name, std::optional<std::int64_t> version,
                               const std::optional<std::string>& label) const;
  /// States of the model's versions (one version when `version` or `label` is given).
  /// Throws NotFound as get() does.
  std::vector<VersionStatus> status(const std::string& name, std::optional<std::int64_t> version = {},
                                    const std::optional<std::string>& label = {}) const;
  std::vector<std::string> model_names() const;

 private:
  struct Model;
  void poll_model(Model& model);
  const Model& find(const std::string& name) const;

  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<Model>> models_;
  std::thread poller_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

/// Parses TF Serving's --model_config_file (text-format ModelServerConfig with a
/// model_config_list of config { name base_path model_platform model_version_policy
/// version_labels }). Throws InvalidArgument naming the line for a syntax error.
std::vector<ModelConfig> parse_model_config_file(const std::string& text);

}  // namespace tensorhub::serve
