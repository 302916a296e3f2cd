// ModelManager: which versions of which models are loaded, after TensorFlow Serving's
// AspiredVersionsManager (tensorflow_serving/core/). Each served model has a Source
// (source.h: a base path, a hub query) that lists its versions; poll() asks every source,
// loads the versions the model's VersionPolicy wants (LOADING -> AVAILABLE, or END with the
// error), and unloads versions no longer wanted only once a wanted version is AVAILABLE, so a
// model never stops serving during an update; when the policy wants none of the versions the
// source lists (all removed, a hub model deleted with no other matching the query), the loaded
// ones are unloaded at once, as TF Serving's AvailabilityPreservingPolicy does. Loading
// includes the version's warmup (warmup.h: its requests replayed while it is LOADING; a failed
// warmup is a failed load).
//
// Failures are retried, not fatal, and logged once per change rather than once per poll:
//  - a version that fails to load (a directory created empty and filled later, as `cp -r`
//    deploys) stays END with its error and is loaded again on the next poll, then with
//    exponential backoff while it keeps failing;
//  - a source that cannot be read (a missing base path, a database down) is asked again
//    with exponential backoff; its loaded versions keep serving meanwhile.
//
// Thread safety: get(), status() and the other const methods may be called from any thread
// while poll() runs. poll() itself is called by one thread at a time (start_polling's thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/servable.h"
#include "tensorhub/serve/servable_state.h"
#include "tensorhub/serve/source.h"
#include "tensorhub/serve/version_policy.h"

namespace tensorhub {

/// How the manager retries and where it logs. Defaults suit `tensorhub serve`.
struct ManagerOptions {
  /// First wait before asking a broken source again, or loading a failed version again;
  /// doubled after each further failure up to retry_max_seconds. `tensorhub serve` sets it
  /// to --file_system_poll_wait_seconds, so the first retry is the next poll.
  double retry_initial_seconds = 1;
  double retry_max_seconds = 30;
  /// One line per state change (a version AVAILABLE or failing, a source broken or back).
  /// Default: "[serve <UTC time>] <line>" on stderr.
  std::function<void(const std::string&)> log;
  /// The clock backoff is measured on (tests pass a fake one). Default: steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> now;
  /// Replay each version's warmup requests before it is AVAILABLE (warmup.h); TF Serving's
  /// --enable_model_warmup, default true.
  bool enable_warmup = true;
};

/// A model that has nothing to serve because its source cannot be read.
struct SourceProblem {
  std::string model;   ///< the served name
  std::string source;  ///< Source::describe()
  std::string error;   ///< what the source threw
};

/// One served model, as add_model takes it (for replace_models).
struct ServedModel {
  std::string name;
  std::unique_ptr<Source> source;
  VersionPolicy policy;
  std::map<std::string, std::int64_t> labels;
};

class ModelManager {
 public:
  explicit ModelManager(ManagerOptions options = {});
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  /// Serves the versions `source` lists that `policy` wants, under `name`; `labels` name
  /// versions (version_labels, e.g. {"stable": 1}). Nothing is loaded before the next poll().
  /// Throws InvalidArgument for an empty or duplicate name or a null source.
  void add_model(const std::string& name, std::unique_ptr<Source> source, VersionPolicy policy = {},
                 std::map<std::string, std::int64_t> labels = {});

  /// Swaps the served models for `models`, as TF Serving's HandleReloadConfigRequest does:
  /// models not listed are removed (requests already holding their servables finish), new
  /// ones are added, and kept ones take the new source, policy and labels while their loaded
  /// versions keep serving, so no request fails during the swap. Then polls once: when it
  /// returns, new models and versions are AVAILABLE or have failed (see status()). Throws
  /// InvalidArgument, changing nothing, for an empty or duplicate name or a null source; and
  /// unless `allow_unavailable_labels`, FailedPrecondition (the new config stays) when a
  /// version label then names a version that is not AVAILABLE, naming model, label and version.
  void replace_models(std::vector<ServedModel> models, bool allow_unavailable_labels = false);

  /// Asks every source whose backoff has passed for its versions, and loads and unloads
  /// versions. Errors are logged and recorded in status(), never thrown.
  void poll();
  /// Runs poll() once now, then every `seconds` in a background thread (0: never again).
  /// A source broken at that first poll is not logged: the caller reports broken_sources()
  /// once, as a fatal error when every source is broken, else as a warning.
  void start_polling(double seconds);
  /// Stops the background thread (waits for a poll in progress). Idempotent.
  void stop_polling();

  /// Throws FailedPrecondition, as TF Serving refuses such a config, when a version label
  /// points at a version that is not AVAILABLE: "Request to assign label to version 7 of model
  /// m, which is not currently available for inference (version_labels { key: 'stable' value:
  /// 7 })", one such clause per label. Models whose source is broken are skipped. Call it after
  /// the first poll (start_polling).
  void check_labels() const;

  /// The AVAILABLE servable for `name` (newest loaded version unless `version` or `label` is
  /// given). Throws InvalidArgument for an unknown label ("Unrecognized servable version
  /// label: ..."), NotFound for an unknown model or version, a label whose version is not
  /// loaded (naming the label), or a model whose source lists no version (saying what was
  /// looked for) or whose every listed version failed to load (TF Serving's "Servable not
  /// found for request: Latest(m)", then each version's error); Unavailable while the wanted
  /// version is still loading, or when the source is broken and nothing is loaded (with its
  /// error).
  std::shared_ptr<const Servable> get(const std::string& name, std::optional<std::int64_t> version = {},
                                      const std::optional<std::string>& label = {}) const;
  /// The version the request resolves to (same rules and errors as get()).
  /// A request that names neither a version nor a label, to a model whose source splits
  /// traffic (Source::traffic_split), goes to a label picked by weight: by `routing_key`
  /// (a request id: the same key always picks the same label, its SHA-256 placing it on the
  /// weights' cumulative line) or at random where the key is empty. Labels whose version is
  /// not AVAILABLE are left off that line while any other's is (their share goes to the rest).
  std::int64_t resolve_version(const std::string& name, std::optional<std::int64_t> version,
                               const std::optional<std::string>& label, std::string_view routing_key = {}) const;
  /// States of the model's versions, newest first (one version when `version` or `label` is
  /// given). Throws NotFound as get() does, and, like TF Serving, for a model with no version
  /// at all: the message then says why (the source's empty_message(), or its error).
  std::vector<VersionStatus> status(const std::string& name, std::optional<std::int64_t> version = {},
                                    const std::optional<std::string>& label = {}) const;
  std::vector<std::string> model_names() const;
  /// Whether `name` is a served model (added with add_model).
  bool has_model(const std::string& name) const;
  /// Models whose source failed at its last poll (empty when every source could be read).
  std::vector<SourceProblem> broken_sources() const;

 private:
  struct Model;
  struct Version;
  // A poll works on Model objects outside mutex_ (loading can take seconds): poll_mutex_,
  // held throughout, keeps replace_models from removing them meanwhile.
  void poll_all() TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void poll_model(Model& model) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void list_source(Model& model, std::chrono::steady_clock::time_point now, std::map<std::int64_t, Loader>& listed)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void load_version(Model& model, std::int64_t version, const Loader& loader)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  std::string warm_up(Model& model, std::int64_t version, const Servable& servable)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void keep_labels_available(Model& model, const std::map<std::string, std::int64_t>& listed_labels,
                             std::set<std::int64_t>& wanted) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void unload_unwanted(Model& model, const std::set<std::int64_t>& wanted)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(poll_mutex_) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  // The poller thread's loop: a poll every `seconds` until stop_polling().
  void poll_every(double seconds) TENSORHUB_LOCKS_EXCLUDED(stop_mutex_, poll_mutex_);
  std::chrono::steady_clock::duration backoff(int failures) const;
  const Model& find(const std::string& name) const TENSORHUB_SHARED_LOCKS_REQUIRED(mutex_);
  std::string why_nothing_loaded(const Model& model) const TENSORHUB_SHARED_LOCKS_REQUIRED(mutex_);

  ManagerOptions options_;
  // Guards models_ and every Model's states and servables (Model's members cannot name it:
  // the analysis checks only models_).
  mutable SharedMutex mutex_;
  std::map<std::string, std::unique_ptr<Model>> models_ TENSORHUB_GUARDED_BY(mutex_);
  // Held by a poll and by replace_models: a poll works on Model objects outside mutex_, so
  // no model may be removed while it runs.
  Mutex poll_mutex_;
  // start_polling's first poll: broken sources are the caller's to report.
  bool quiet_sources_ TENSORHUB_GUARDED_BY(poll_mutex_) = false;
  std::thread poller_;
  Mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ TENSORHUB_GUARDED_BY(stop_mutex_) = false;
};

}  // namespace tensorhub
