// RestServer: TensorFlow Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest)
// over cpp-httplib, plus Prometheus metrics at /monitoring/prometheus/metrics (every API's
// requests, gRPC's too when the servers share a ServingMetrics).
//
//   GET  /v1/models/{name}[/versions/{v}|/labels/{l}]            model status
//   GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata   signature_def
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict    predictions
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:classify   [label, score] pairs per example
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:regress    one value per example
// :classify and :regress take tf.Examples in JSON and run a classify or regress signature
// (servable.h); a body without signature_name runs serving_default, or, when that is a
// predict signature, the model's only signature of the method (TF Serving would refuse).
// Errors are {"error": "..."} with TF Serving's HTTP codes (its http_server.cc mapping of
// gRPC codes: 400 invalid argument or failed precondition, also for a /v1/ path that routes
// nowhere; 404 unknown model or version; 413 body too large; 503 not loaded yet or
// overloaded; 504 deadline exceeded: a request, including its wait in the batch queue, took
// longer than --rest_api_timeout_in_ms).
//
// Thread safety: run() blocks serving requests on a thread pool; stop() may be called from
// any thread (or a signal-watching thread) and lets in-flight requests finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tensorhub/serve/batcher.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/model_manager.h"

namespace tensorhub {

struct ServerOptions {
  std::string host = "127.0.0.1";  ///< bind address; "0.0.0.0" to serve other machines
  int port = 8501;                 ///< --rest_api_port; 0 picks a free port
  int num_threads = 0;             ///< --rest_api_num_threads; 0: max(64, 8 x cores)
  std::size_t max_body_bytes = std::size_t{64} << 20;  ///< larger bodies get 413
  std::optional<BatchingParameters> batching;          ///< --enable_batching (ignored with `batcher`)
  /// A batcher shared with the gRPC server, so that both APIs' requests batch together;
  /// null: one of the server's own when `batching` is set, else requests run unbatched.
  std::shared_ptr<Batcher> batcher;
  /// Metrics shared with the gRPC server, served at /monitoring/prometheus/metrics with each
  /// request's entrypoint label (REST, GRPC); null: the server keeps its own.
  std::shared_ptr<ServingMetrics> metrics;
  /// --rest_api_timeout_in_ms (TF Serving's flag and default): a predict request not answered
  /// within this many milliseconds of its arrival gets 504 DEADLINE_EXCEEDED; 0: no deadline.
  std::int64_t rest_api_timeout_in_ms = 30000;
};

/// The predict signature `name` of `servable` (kDefaultSignature when empty), as the REST API
/// looks it up. Throws InvalidArgument with TF Serving's message for an unknown name, and for a
/// classify or regress signature (naming the endpoint, :classify or :regress, that runs it).
const Signature& predict_signature(const Servable& servable, const std::string& name);

/// Runs a predict on `inputs` (batch first) of `signature`: the servable's predict, or a
/// batcher's, with a deadline. Returns the outputs by name.
using PredictRunner = std::function<NamedTensors(const std::string& signature, NamedTensors inputs)>;

/// Answers a REST predict body for `servable` as POST /v1/models/<name>:predict does: parses it
/// (parse_predict_request, json_tensor.h) against predict_signature, turns DT_STRING inputs into
/// tensors with the model's decoding step (Servable::decode_string_input), runs `run` and
/// returns the response body in the request's format (row or columnar). Throws InvalidArgument
/// as parse_predict_request and predict_signature do, and what `run` throws. Used by RestServer
/// and by the dashboard's try-a-model endpoint (ui/try_api.h).
std::string answer_predict(const Servable& servable, std::string_view body, const PredictRunner& run);

class RestServer {
 public:
  /// `manager` must outlive the server.
  RestServer(ModelManager& manager, ServerOptions options);
  ~RestServer();
  RestServer(const RestServer&) = delete;
  RestServer& operator=(const RestServer&) = delete;

  /// Binds the listening socket; returns the port (useful with port 0). Throws Unavailable
  /// if the address is taken or cannot be bound.
  int bind();
  /// Serves until stop(); returns at once when stop() came first. REQUIRES: bind() succeeded.
  void run();
  /// Stops accepting connections; in-flight requests complete first. Works whenever it is
  /// called: before run() (run() then returns at once), while run() is starting, or during
  /// it. Only the first call acts.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorhub
