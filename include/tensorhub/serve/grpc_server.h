// GrpcServer: TensorFlow Serving's gRPC API (tensorflow.serving.PredictionService: Predict,
// Classify, Regress, GetModelMetadata; tensorflow.serving.ModelService: GetModelStatus,
// HandleReloadConfigRequest), with the package, service, message and field names of TF Serving's
// .proto files (proto/tensorflow_serving/), so that clients generated from TF Serving's own
// protos work unchanged. It serves the ModelManager, Batcher and ServingMetrics the REST server
// shares.
//
// Errors are the gRPC status codes TF Serving returns (ErrorKind -> grpc_code(), status_codes.h),
// with messages that name the request field at fault.
//
// Predict uses gRPC's callback API: gRPC's threads check the request and hand it to the shared
// Batcher (batching) or to a pool of one thread per core (no batching), whose thread runs the
// model and answers; they never wait on a model or a batch. The other methods are synchronous.
//
// Thread safety: start() once; stop() from any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/serve/batcher.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/model_config.h"
#include "tensorhub/serve/model_manager.h"

namespace tensorflow::serving {
class ModelServerConfig;
}

namespace tensorhub {

struct GrpcServerOptions {
  std::string host = "127.0.0.1";  ///< bind address (the REST server's --rest_api_host)
  int port = 8500;                 ///< --port (TF Serving's flag and default); 0 picks a free port
  /// Largest request accepted, bytes (--max_body_mb): larger ones get RESOURCE_EXHAUSTED.
  std::size_t max_message_bytes = std::size_t{64} << 20;
  /// Shared with the REST server; null: requests run unbatched.
  std::shared_ptr<Batcher> batcher;
  /// Shared with the REST server; null: the server keeps its own.
  std::shared_ptr<ServingMetrics> metrics;
  /// HandleReloadConfigRequest's action: applies a model_config_list (the caller builds the
  /// sources and calls ModelManager::replace_models). Throws an Error to refuse it. Null: the
  /// method answers FAILED_PRECONDITION.
  std::function<void(const std::vector<ModelConfig>&)> reload_config;
};

class GrpcServer {
 public:
  /// `manager` must outlive the server.
  GrpcServer(ModelManager& manager, GrpcServerOptions options);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  /// Binds host:port and starts serving on gRPC's threads. Returns the port (the chosen one
  /// when port is 0). Throws Unavailable naming the address when it cannot be bound.
  int start();
  /// Stops accepting calls and waits for calls in flight to finish, for at most `grace_ms`
  /// (then they are cancelled; --shutdown_grace_s), or for as long as they take when negative.
  /// Idempotent (the first call's grace holds).
  void stop(int grace_ms = -1);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The ModelConfigs of a HandleReloadConfigRequest's config, by the rules of
/// --model_config_file (parse_model_config_file reads the config's text format). Throws
/// InvalidArgument for a custom_model_config, a config with no model_config_list, or what
/// parse_model_config_file refuses.
std::vector<ModelConfig> model_configs_from_proto(const tensorflow::serving::ModelServerConfig& config);

}  // namespace tensorhub
