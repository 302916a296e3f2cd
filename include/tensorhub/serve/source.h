// Source: where a served model's versions come from, after TF Serving's Source
// (tensorflow_serving/core/source.h): a file system base path (file_system_source.h) or a hub
// query (hub_source.h). A source only lists versions and how to load them; the manager
// (model_manager.h) polls it, applies the version policy, loads, serves and unloads.
//
// Thread safety: list_versions() and warmup_requests() are called from the manager's polling
// thread only, one call at a time; describe() and empty_message() may be called from any thread at any time (they read
// only what the constructor set).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/serve/loader.h"
#include "tensorhub/serve/warmup.h"

namespace tensorhub {

class Source {
 public:
  virtual ~Source() = default;

  /// The versions that exist now, each with its loader (not called yet). An empty map is a
  /// healthy source with nothing to serve (empty_message() says what was looked for). Throws
  /// Error when the source cannot be read (a missing base path, a database that refuses
  /// connections); the manager retries with backoff.
  virtual std::map<std::int64_t, Loader> list_versions() = 0;

  /// What this source reads, for logs and errors: "base path /models/mlp", "hub query
  /// model_name=mlp ... of sqlite:///hub.db". Holds no password.
  virtual std::string describe() const = 0;

  /// Why the last list_versions() was empty, said to a user who expected a model: "base
  /// path /models/mlp holds no version directory (<base>/<number>/)".
  virtual std::string empty_message() const = 0;

  /// The warmup requests of `version` of the last list_versions() (warmup.h: a version
  /// directory's assets.extra/tf_serving_warmup_requests, a hub model's part of that name), or
  /// nothing when it has none (the default). Called on the polling thread after the version's
  /// loader returned; the manager replays them before the version is AVAILABLE. Throws Error
  /// when they cannot be read (the load then fails and is retried).
  virtual std::optional<WarmupRequests> warmup_requests(std::int64_t version) { return std::nullopt; }

  /// Version labels that follow the source (a hub model's aliases, which move), from the last
  /// list_versions(): each label names one of the versions it listed. Nothing (the default)
  /// keeps the labels the model was added with (a config file's version_labels). The manager
  /// moves a label only once the version it now names is AVAILABLE, keeping the old version
  /// loaded and labelled until then.
  virtual std::optional<std::map<std::string, std::int64_t>> listed_labels() { return std::nullopt; }

  /// How requests that name no version or label are shared between labels: (label, weight)
  /// pairs, weights positive (their sum is 100%). Empty (the default): the newest AVAILABLE
  /// version answers, as TF Serving. Fixed for the source's life; read from any thread.
  virtual std::vector<std::pair<std::string, double>> traffic_split() const { return {}; }
};

}  // namespace tensorhub
