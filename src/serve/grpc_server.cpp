#include "tensorhub/serve/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/text_format.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/message_allocator.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/thread_pool.h"
#include "tensorhub/serve/tensor_proto.h"
#include "tensorhub/serve/status_codes.h"
#include "proto_requests.h"

namespace tensorhub {
namespace {

namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

// What a ModelSpec asks for.
struct Target {
  std::string model;
  std::optional<std::int64_t> version;
  std::optional<std::string> label;
  std::string signature;  // empty: serving_default
  std::string routing_key;  // the call's x-request-id metadata: its side of a weighted split
};

// The call's "x-request-id" metadata ("" without), as REST's X-Request-Id header: it keeps a
// client on one side of a weighted split (ModelManager::resolve_version).
std::string request_id(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("x-request-id");
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

Target target_of(bool has_spec, const tfs::ModelSpec& spec) {
  if (!has_spec) throw InvalidArgument("Missing ModelSpec: the request's model_spec must name the model");
  Target t;
  t.model = spec.name();
  if (spec.has_version()) t.version = spec.version().value();
  if (spec.version_choice_case() == tfs::ModelSpec::kVersionLabel) t.label = spec.version_label();
  t.signature = spec.signature_name();
  return t;
}

// The deadline of a call as a steady_clock time (max when the client set none).
Clock::time_point deadline_of(const grpc::ServerContextBase& context) {
  const auto d = context.deadline();
  if (d >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(d - std::chrono::system_clock::now());
}

void fill_spec(tfs::ModelSpec* spec, const std::string& model, std::int64_t version, const std::string& signature) {
  spec->set_name(model);
  spec->mutable_version()->set_value(version);
  spec->set_signature_name(signature);
}

void fill_tensor_info(const TensorInfo& info, tensorflow::TensorInfo* out) {
  out->set_name(info.name);
  out->set_dtype(static_cast<tensorflow::DataType>(tf_data_type(info)));
  auto* shape = out->mutable_tensor_shape();
  if (info.unknown_rank) {
    shape->set_unknown_rank(true);
    return;
  }
  for (auto d : info.shape) shape->add_dim()->set_size(d);
}

tfs::ModelVersionStatus::State state_proto(ServableState state) {
  switch (state) {
    case ServableState::kStart: return tfs::ModelVersionStatus::START;
    case ServableState::kLoading: return tfs::ModelVersionStatus::LOADING;
    case ServableState::kAvailable: return tfs::ModelVersionStatus::AVAILABLE;
    case ServableState::kUnloading: return tfs::ModelVersionStatus::UNLOADING;
    case ServableState::kEnd: return tfs::ModelVersionStatus::END;
  }
  return tfs::ModelVersionStatus::UNKNOWN;
}

// The status TF Serving answers for `error` (OK for none), and the name of its code.
std::pair<grpc::Status, std::string> status_of(std::exception_ptr error) {
  if (!error) return {grpc::Status::OK, "OK"};
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {grpc::Status(static_cast<grpc::StatusCode>(grpc_code(e.kind())), e.message()), std::string(grpc_code_name(e.kind()))};
  } catch (const std::exception& e) {
    return {grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()), "INTERNAL"};
  } catch (...) {
    return {grpc::Status(grpc::StatusCode::INTERNAL, "internal error"), "INTERNAL"};
  }
}

// Predict's request and response on a protobuf Arena of their own, which starts in a buffer
// inside the holder: parsing a request (its inputs map, 784 floats) and building the answer
// make no heap allocation of their own, and the whole call is freed at once.
class ArenaPredictAllocator final : public grpc::MessageAllocator<tfs::PredictRequest, tfs::PredictResponse> {
 public:
  grpc::MessageHolder<tfs::PredictRequest, tfs::PredictResponse>* AllocateMessages() override { return new Holder; }

 private:
  class Holder final : public grpc::MessageHolder<tfs::PredictRequest, tfs::PredictResponse> {
   public:
    Holder() : arena_(options(buffer_, sizeof buffer_)) {
      set_request(google::protobuf::Arena::CreateMessage<tfs::PredictRequest>(&arena_));
      set_response(google::protobuf::Arena::CreateMessage<tfs::PredictResponse>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions options(char* buffer, std::size_t size) {
      google::protobuf::ArenaOptions o;
      o.initial_block = buffer;
      o.initial_block_size = size;
      return o;
    }
    // Declared before arena_, which starts in it. Room for an MLP request of 784 floats.
    alignas(std::max_align_t) char buffer_[8192];
    google::protobuf::Arena arena_;
  };
};

// A Predict between its request's checks and its answer.
struct PredictCall {
  Target target;
  std::shared_ptr<const Servable> servable;
  std::int64_t version = 0;
  std::string signature;
  std::set<std::string> wanted;  // the outputs to answer
  Clock::time_point deadline;
};

// gRPC's own log (gpr_log, gRPC 1.51): a server's start holds its lines back (GrpcLogCapture),
// every other line goes to stderr as gRPC writes it, with its severity, file and line.
Mutex g_grpc_log_mutex;
bool g_grpc_log_capturing TENSORHUB_GUARDED_BY(g_grpc_log_mutex) = false;
std::vector<std::string> g_grpc_log_held TENSORHUB_GUARDED_BY(g_grpc_log_mutex);

void write_grpc_line(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

void grpc_log(gpr_log_func_args* args) {
  const char severity = args->severity == GPR_LOG_SEVERITY_ERROR ? 'E' : args->severity == GPR_LOG_SEVERITY_INFO ? 'I' : 'D';
  std::string line = std::string("gRPC ") + severity + " " + (args->file ? args->file : "?") + ":" +
                     std::to_string(args->line) + "] " + (args->message ? args->message : "");
  {
    MutexLock lock(g_grpc_log_mutex);
    if (g_grpc_log_capturing) {
      g_grpc_log_held.push_back(std::move(line));
      return;
    }
  }
  write_grpc_line(line);
}

// While alive, gRPC's log lines are held; when it ends they are written if keep(true) was
// called (the start went well: nothing of gRPC's is lost), else dropped (our error says it).
class GrpcLogCapture {
 public:
  GrpcLogCapture() {
    static std::once_flag installed;
    std::call_once(installed, [] { gpr_set_log_function(grpc_log); });
    MutexLock lock(g_grpc_log_mutex);
    g_grpc_log_capturing = true;
    g_grpc_log_held.clear();
  }
  GrpcLogCapture(const GrpcLogCapture&) = delete;
  GrpcLogCapture& operator=(const GrpcLogCapture&) = delete;
  ~GrpcLogCapture() {
    std::vector<std::string> held;
    {
      MutexLock lock(g_grpc_log_mutex);
      g_grpc_log_capturing = false;
      held.swap(g_grpc_log_held);
    }
    if (keep_)
      for (const auto& line : held) write_grpc_line(line);
  }
  void keep(bool keep) { keep_ = keep; }

 private:
  bool keep_ = false;
};

// Why `host`:`port` cannot be bound, found by binding it ourselves (": Address already in
// use"), for a numeric host; "" when it binds now or the host is a name.
std::string bind_failure(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  const std::string h = host.empty() ? "0.0.0.0" : host;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof *v6;
  } else {
    return "";
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as gRPC binds: TIME_WAIT is no conflict
  const int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  const int err = errno;
  close(fd);
  return rc == 0 ? "" : std::string(": ") + std::strerror(err);
}

}  // namespace

std::vector<ModelConfig> model_configs_from_proto(const tfs::ModelServerConfig& config) {
  if (config.has_custom_model_config())
    throw InvalidArgument("config.custom_model_config is not supported; send config.model_config_list");
  if (!config.has_model_config_list())
    throw InvalidArgument("config.model_config_list is missing; send the models to serve in it");
  // The text format is --model_config_file's: one parser, one set of rules for both.
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  return parse_model_config_file(text);
}

// Predict is served with gRPC's callback API: its handler checks the request and hands the
// work to the Batcher (batching) or to a pool of one thread per core, whose thread answers the
// call; gRPC's threads never block on a model or a batch. The other methods are synchronous.
struct GrpcServer::Impl final : tfs::PredictionService::WithCallbackMethod_Predict<tfs::PredictionService::Service>,
                                tfs::ModelService::Service {
  ModelManager& manager;
  GrpcServerOptions options;
  ArenaPredictAllocator allocator;   // Predict's messages; declared before server: outlives its calls
  // Unbatched Predicts, one worker per core as the models' replicas, so that gRPC's own threads
  // never wait on a model. Declared before server: outlives its calls (its destructor runs every
  // queued Predict, which answers its call, before joining).
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<grpc::Server> server;
  Mutex reload_mutex;  // one reload at a time: held around options.reload_config
  std::once_flag stopped;

  Impl(ModelManager& m, GrpcServerOptions o) : manager(m), options(std::move(o)) {
    if (!options.metrics) options.metrics = std::make_shared<ServingMetrics>();
    if (!options.batcher) pool = std::make_unique<ThreadPool>(0);  // 0: one worker per core
    SetMessageAllocatorFor_Predict(&allocator);
  }

  // The model label of a call's metrics: only served models get their own series, since any
  // name a client sends would otherwise add one.
  std::string metrics_model(const std::string& name) const { return manager.has_model(name) ? name : ""; }

  // The status of a call that ended with `error` (none: OK); records its metrics, under
  // `version` where the call was resolved to one (0: it was not).
  grpc::Status finish_call(const std::string& model, const std::string& api, Clock::time_point start,
                           std::exception_ptr error, std::int64_t version = 0) {
    auto [status, code] = status_of(error);
    options.metrics->record(model, api, code, std::chrono::duration<double>(Clock::now() - start).count(), "GRPC",
                            version);
    return status;
  }

  // Runs `body`, turning an exception into TF Serving's status, and records metrics (under the
  // version `*answered` names once `body` returned or threw; none without `answered`).
  template <typename F>
  grpc::Status guarded(const std::string& model_name, const std::string& api, F body,
                       const std::int64_t* answered = nullptr) {
    const auto start = Clock::now();
    const std::string model = metrics_model(model_name);
    std::exception_ptr error;
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    return finish_call(model, api, start, error, answered ? *answered : 0);
  }

  // The servable and resolved version of `t`.
  std::pair<std::shared_ptr<const Servable>, std::int64_t> servable_of(const Target& t) const {
    const std::int64_t v = manager.resolve_version(t.model, t.version, t.label, t.routing_key);
    return {manager.get(t.model, v), v};
  }

  NamedTensors run(const std::shared_ptr<const Servable>& servable, const std::string& signature, NamedTensors inputs,
                   Clock::time_point deadline) const {
    NamedTensors outputs = options.batcher ? options.batcher->predict(servable, signature, std::move(inputs), deadline)
                                           : servable->predict(signature, inputs);
    if (Clock::now() > deadline) throw DeadlineExceeded("Deadline exceeded: the call's deadline passed during its predict");
    return outputs;
  }

  // Checks a Predict request against its model's signature (TF Serving's messages and codes)
  // and fills `call`; returns the inputs to run.
  NamedTensors prepare_predict(const tfs::PredictRequest& request, const grpc::ServerContextBase& context,
                               PredictCall& call) const {
    call.target = target_of(request.has_model_spec(), request.model_spec());
    call.target.routing_key = request_id(context);
    std::tie(call.servable, call.version) = servable_of(call.target);
    call.signature = call.target.signature.empty() ? kDefaultSignature : call.target.signature;
    const Signature& sig = detail::predict_signature(*call.servable, call.signature);
    NamedTensors inputs = detail::predict_inputs(*call.servable, call.signature, sig, request);
    call.wanted = detail::predict_outputs(sig, request);
    return inputs;
  }

  // The response of `call` from the model's outputs.
  static void write_predict(const PredictCall& call, const NamedTensors& outputs, tfs::PredictResponse* response) {
    if (Clock::now() > call.deadline) throw DeadlineExceeded("Deadline exceeded: the call's deadline passed during its predict");
    auto& out = *response->mutable_outputs();
    for (const auto& name : call.wanted) {
      const auto it = outputs.find(name);
      if (it == outputs.end())
        throw Internal("the model gave no output " + name + " of its signature " + call.signature);
      tensor_to_proto(it->second, &out[name]);
    }
    fill_spec(response->mutable_model_spec(), call.target.model, call.version, call.signature);
  }

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context, const tfs::PredictRequest* request,
                                    tfs::PredictResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const auto start = Clock::now();
    const std::string model = metrics_model(request->model_spec().name());
    auto call = std::make_shared<PredictCall>();  // its version: 0 until resolved
    try {
      NamedTensors inputs = prepare_predict(*request, *context, *call);
      call->deadline = deadline_of(*context);
      // Answers the call, on the thread that ran the model.
      auto done = [this, reactor, response, call, start, model](NamedTensors outputs, std::exception_ptr error) {
        if (!error) {
          try {
            write_predict(*call, outputs, response);
          } catch (...) {
            error = std::current_exception();
          }
        }
        reactor->Finish(finish_call(model, "Predict", start, error, call->version));
      };
      if (options.batcher) {
        options.batcher->submit(call->servable, call->signature, std::move(inputs), call->deadline, std::move(done));
      } else {
        // Nobody waits for the task: it catches everything and answers the call itself.
        pool->submit([call, inputs = std::move(inputs), done = std::move(done)]() mutable {
          NamedTensors outputs;
          std::exception_ptr error;
          try {
            if (Clock::now() > call->deadline) throw DeadlineExceeded("Deadline exceeded before the predict ran");
            outputs = call->servable->predict(call->signature, inputs);
          } catch (...) {
            error = std::current_exception();
          }
          done(std::move(outputs), error);
        });
      }
    } catch (...) {
      reactor->Finish(finish_call(model, "Predict", start, std::current_exception(), call->version));
    }
    return reactor;
  }

  // Classify and Regress: the examples become rows of the model's input, run as a predict of
  // serving_default (so they batch with predicts, as over REST). Returns the signature's output
  // and fills `spec`.
  Tensor run_examples(grpc::ServerContext* context, const Target& t, const tfs::Input& input, bool classify,
                      tfs::ModelSpec* spec, const ExampleSignature*& used, std::int64_t& answered) {
    const auto [servable, version] = servable_of(t);
    answered = version;
    const Signature& sig = example_signature(*servable, t.signature, classify, "model_spec.signature_name");
    NamedTensors inputs;
    inputs[sig.examples.input] = detail::rows_from_input(*servable, sig.examples, input);
    NamedTensors outputs = run(servable, kDefaultSignature, std::move(inputs), deadline_of(*context));
    const auto y = outputs.find(sig.examples.output);
    if (y == outputs.end()) throw Internal("the model gave no output " + sig.examples.output);
    std::string name = t.signature;
    for (const auto& [key, s] : servable->signatures())
      if (&s == &sig) name = key;
    fill_spec(spec, t.model, version, name);
    used = &sig.examples;
    return std::move(y->second);
  }

  grpc::Status Regress(grpc::ServerContext* context, const tfs::RegressionRequest* request,
                       tfs::RegressionResponse* response) override {
    std::int64_t answered = 0;
    return guarded(request->model_spec().name(), "Regress", [&] {
      Target t = target_of(request->has_model_spec(), request->model_spec());
      t.routing_key = request_id(*context);
      const ExampleSignature* spec = nullptr;
      const Tensor y = run_examples(context, t, request->input(), false, response->mutable_model_spec(), spec, answered);
      detail::fill_regression(y, detail::example_count(request->input()), response->mutable_result());
    }, &answered);
  }

  grpc::Status Classify(grpc::ServerContext* context, const tfs::ClassificationRequest* request,
                        tfs::ClassificationResponse* response) override {
    std::int64_t answered = 0;
    return guarded(request->model_spec().name(), "Classify", [&] {
      Target t = target_of(request->has_model_spec(), request->model_spec());
      t.routing_key = request_id(*context);
      const ExampleSignature* spec = nullptr;
      const Tensor scores = run_examples(context, t, request->input(), true, response->mutable_model_spec(), spec, answered);
      detail::fill_classification(scores, *spec, response->mutable_result());
    }, &answered);
  }

  grpc::Status GetModelMetadata(grpc::ServerContext*, const tfs::GetModelMetadataRequest* request,
                                tfs::GetModelMetadataResponse* response) override {
    return guarded(request->model_spec().name(), "GetModelMetadata", [&] {
      const Target t = target_of(request->has_model_spec(), request->model_spec());
      if (request->metadata_field_size() == 0)
        throw InvalidArgument("GetModelMetadataRequest must specify at least one metadata_field");
      for (const auto& f : request->metadata_field())
        if (f != "signature_def")
          throw InvalidArgument("Metadata field " + f + " is not supported (metadata_field); ask for signature_def");
      const auto [servable, version] = servable_of(t);
      tfs::SignatureDefMap defs;
      for (const auto& [name, sig] : servable->signatures()) {
        auto& def = (*defs.mutable_signature_def())[name];
        def.set_method_name(sig.method_name);
        for (const auto& [k, info] : sig.inputs) fill_tensor_info(info, &(*def.mutable_inputs())[k]);
        for (const auto& [k, info] : sig.outputs) fill_tensor_info(info, &(*def.mutable_outputs())[k]);
      }
      (*response->mutable_metadata())["signature_def"].PackFrom(defs);
      auto* spec = response->mutable_model_spec();
      spec->set_name(t.model);
      spec->mutable_version()->set_value(version);
    });
  }

  grpc::Status GetModelStatus(grpc::ServerContext*, const tfs::GetModelStatusRequest* request,
                              tfs::GetModelStatusResponse* response) override {
    return guarded(request->model_spec().name(), "GetModelStatus", [&] {
      const Target t = target_of(request->has_model_spec(), request->model_spec());
      for (const auto& s : manager.status(t.model, t.version, t.label)) {
        auto* out = response->add_model_version_status();
        out->set_version(s.version);
        out->set_state(state_proto(s.state));
        // TF Serving's ToStatusProto: the load error's own code (UNKNOWN for a library's exception).
        out->mutable_status()->set_error_code(
            s.error.empty()  ? tensorflow::error::OK
            : s.error_kind ? static_cast<tensorflow::error::Code>(grpc_code(*s.error_kind))
                           : tensorflow::error::UNKNOWN);
        out->mutable_status()->set_error_message(s.error);
      }
    });
  }

  grpc::Status HandleReloadConfigRequest(grpc::ServerContext*, const tfs::ReloadConfigRequest* request,
                                         tfs::ReloadConfigResponse* response) override {
    auto status = guarded("", "HandleReloadConfigRequest", [&] {
      if (!options.reload_config)
        throw FailedPrecondition("this server was not started from a model config; it cannot reload one");
      const auto configs = model_configs_from_proto(request->config());
      MutexLock lock(reload_mutex);
      options.reload_config(configs);
    });
    response->mutable_status()->set_error_code(static_cast<tensorflow::error::Code>(status.error_code()));
    response->mutable_status()->set_error_message(status.error_message());
    return status;
  }
};

GrpcServer::GrpcServer(ModelManager& manager, GrpcServerOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

GrpcServer::~GrpcServer() { stop(); }

int GrpcServer::start() {
  auto& o = impl_->options;
  const std::string address = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" +
                              std::to_string(o.port);
  // grpc++ takes its locks through absl::Mutex, which Debian's abseil builds with deadlock
  // detection on (a graph of lock orders kept at every lock and unlock): about a tenth of a
  // Predict's CPU time. It is a debugging aid; TF Serving's release builds run without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::size_t>(o.max_message_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(INT_MAX);
  // A second server on the same port would silently share its connections (SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(static_cast<tfs::PredictionService::Service*>(impl_.get()));
  builder.RegisterService(static_cast<tfs::ModelService::Service*>(impl_.get()));
  {
    // gRPC logs a failed bind itself (a line of chttp2_server.cc with its error tree) before
    // BuildAndStart returns null: held back, so that the user reads our one message below.
    GrpcLogCapture capture;
    impl_->server = builder.BuildAndStart();
    capture.keep(impl_->server && port != 0);
  }
  if (!impl_->server || port == 0)
    throw Unavailable("cannot listen for gRPC on " + address + bind_failure(o.host, o.port) +
                      ": choose another --port, or --port 0 to turn gRPC off");
  return port;
}

void GrpcServer::stop(int grace_ms) {
  if (!impl_->server) return;
  std::call_once(impl_->stopped, [&] {
    // New calls are refused; in-flight ones finish, or are cancelled once the grace is over.
    if (grace_ms < 0) impl_->server->Shutdown();
    else impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
    impl_->server->Wait();
  });
}

}  // namespace tensorhub
