// RestServer: TensorFlow Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest)
// on the event-driven HttpServer (core/http_server.h), plus Prometheus metrics at
// /monitoring/prometheus/metrics (every API's requests, gRPC's too when the servers share a
// ServingMetrics).
//
//   GET  /v1/models/{name}[/versions/{v}|/labels/{l}]            model status
//   GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata   signature_def
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict    predictions
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:classify   [label, score] pairs per example
//   POST /v1/models/{name}[/versions/{v}|/labels/{l}]:regress    one value per example
// Routes are TF Serving's (tensorflow_serving/model_servers/http_rest_api_util.cc): matched
// case-insensitively (/V1/Models/m:PREDICT is a predict), the name and the label are any
// characters but '/' and ':', percent-decoded after matching, the version is decimal digits.
// :classify and :regress take tf.Examples in JSON and run a classify or regress signature
// (servable.h); a body without signature_name runs serving_default, or, when that is a
// predict signature, the model's only signature of the method (TF Serving would refuse).
// Errors are {"error": "..."} with TF Serving's HTTP codes (its http_server.cc mapping of
// gRPC codes: 400 invalid argument or failed precondition, also for a /v1/ path that routes
// nowhere; 404 unknown model or version, or a model whose versions all failed to load; 413
// body too large; 503 not loaded yet or overloaded; 504 deadline exceeded: a request,
// including its waits for a worker and in the batch queue, took longer than
// --rest_api_timeout_in_ms). The model status names a failed load's kind in error_code
// (NOT_FOUND, INVALID_ARGUMENT, ...), as TF Serving's ToStatusProto does.
//
// Threads: HTTP is the engine's one event loop; model status and metrics (memory only) are
// answered on it; predict, classify, regress and metadata run on a pool of num_threads
// workers (--rest_api_num_threads), a batched request waiting for its batch on one of them.
// A slow or idle connection costs a socket, never a worker.
//
// Thread safety: run() blocks serving until stop(); stop() may be called from any thread (or
// a signal-watching thread) and lets in-flight requests finish within its grace period.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tensorhub/core/http_server.h"
#include "tensorhub/serve/batcher.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/model_manager.h"

namespace tensorhub {

struct ServerOptions {
  std::string host = "127.0.0.1";  ///< bind address; "0.0.0.0" to serve other machines
  int port = 8501;                 ///< --rest_api_port; 0 picks a free port
  /// --rest_api_num_threads: workers running predict, classify, regress and metadata (a
  /// batched request holds one while it waits for its batch); 0: max(64, 8 x cores).
  /// Connections take none: the engine's event loop holds them.
  int num_threads = 0;
  std::size_t max_body_bytes = std::size_t{64} << 20;  ///< larger bodies get 413 (--max_body_mb)
  /// The engine's per-connection deadlines and caps (core/http_flags.h's apply() sets them from
  /// --http_* and --max_body_mb). Its host, port, flag names, max_body_bytes and 413 text are
  /// taken from the fields above.
  HttpServer::Options http;
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
  /// --routing_key_field: a top-level member of predict, classify and regress bodies (e.g.
  /// "user_id") whose value keeps a client on one side of a weighted split
  /// (ModelManager::resolve_version), before the X-Request-Id header; "" (the default): the
  /// header alone. Requests without the member fall back to the header, then to chance.
  std::string routing_key_field;
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

  /// Binds and listens (a backlog the kernel queues clients in before run() accepts them);
  /// returns the port (useful with port 0). Throws Unavailable naming host:port, why (in use,
  /// not an address of this machine) and the flag to change.
  int bind();
  /// Serves until stop() and its grace period are over; returns at once when stop() came
  /// first. REQUIRES: bind() succeeded.
  void run();
  /// Stops accepting connections, closes idle and slow ones at once, lets requests in flight
  /// finish for at most `grace_ms` (--shutdown_grace_s); requests still queued for a worker
  /// when the grace is over are dropped unrun. Returns at once; run() returns when done.
  /// Works whenever it is called (before run(): run() then returns at once). Only the first
  /// call acts.
  void stop(int grace_ms = 10000);
  /// The engine's counts (connections, timeouts, refusals).
  HttpServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorhub
