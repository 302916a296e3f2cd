// tensorhub-serve-lite's model and routes: one model served from a TF Serving base path
// (<base>/<version>/model.json + weights.safetensors, the newest version, picked up by
// polling) through TF Serving's REST API: GET /v1/models/<name>[/versions/<v>][/metadata]
// and POST /v1/models/<name>[/versions/<v>]:predict, with TF Serving's status and metadata
// JSON, error texts and HTTP codes (as `tensorhub serve` answers them).
//
// Thread safety: LiteModel's methods may run on many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tensorhub/core/http_server.h"
#include "tensorhub/core/json.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/lite/network.h"
#include "tensorhub/lite/predict_json.h"

namespace tensorhub {

/// One loaded version of the model.
struct LiteServable {
  std::int64_t version = 0;
  LiteNetwork network;
  LiteSignature signature;
  double predict_ns = 0;  ///< one example's predict, measured at load (the fastest of three runs)
};

/// A model's versions under its base path, TF Serving's "latest" policy: the newest version
/// directory is served; an older one served before is unloaded (END) once a newer one loads.
class LiteModel {
 public:
  /// `log` receives one line per change (a version loaded, unloaded, failing to load).
  LiteModel(std::string name, std::filesystem::path base_path, std::function<void(const std::string&)> log);

  /// Scans the base path and loads its newest version if it is not the one served. A version
  /// that fails to load is END with its error in the status, logged once, and tried again at
  /// the next poll. Throws NotFound when the base path is not a readable directory.
  void poll();

  const std::string& name() const { return name_; }
  /// An upper bound, in ns, of the time a predict request of `body_bytes` takes on the served
  /// version: at most one example per two bytes of body (a number and a comma), each costing
  /// predict_ns, plus 10 ns per byte of JSON to parse. 0 when no version is served (the answer
  /// is an error at once). For tensorhub-serve-lite's choice of where a predict runs.
  double predict_cost_ns(std::size_t body_bytes) const;
  /// The served version, or `version` if it is the one loaded. Throws NotFound with TF
  /// Serving's texts ("Servable not found for request: Latest(name)" / "Specific(name, v)").
  std::shared_ptr<const LiteServable> get(std::optional<std::int64_t> version) const;
  /// TF Serving's GetModelStatus answer: {"model_version_status": [...]}, newest first. Throws
  /// NotFound for an unknown version or a model without versions (saying why).
  Json status(std::optional<std::int64_t> version) const;

 private:
  struct VersionState {
    std::string state;  // "LOADING", "AVAILABLE", "END"
    std::string error;
  };
  std::string name_;
  std::filesystem::path base_;
  std::function<void(const std::string&)> log_;
  mutable Mutex mutex_;
  std::shared_ptr<const LiteServable> current_ TENSORHUB_GUARDED_BY(mutex_);
  std::map<std::int64_t, VersionState> versions_ TENSORHUB_GUARDED_BY(mutex_);
  std::string listing_ TENSORHUB_GUARDED_BY(mutex_);  // why there is no version, when there is none
};

/// Answers one REST request for `model` (the routes above; any other path under /v1/ is 400
/// "Malformed request: ...", outside it 404, as TF Serving). Errors are {"error": ...} with
/// TF Serving's HTTP code for the error's kind. :classify and :regress are refused (400).
HttpResponse handle_lite_request(const LiteModel& model, const HttpRequest& request);

}  // namespace tensorhub
