#include "tensorhub/serve/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/message_allocator.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
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
};

Target target_of(bool has_spec, const tfs::ModelSpec& spec) {
  if (!has_spec) throw InvalidArgument("Missing ModelSpec: the request's model_spec must name the model");
  Target t;
  t.model = spec.name();
  if (spec.has_version()) t.version = spec.version().value();
  if (spec.version_choice_case() == tfs::ModelSpec::kVersionLabel) t.label = spec.version_label();
  t.signature = spec.signature_name();
  return t;
}

std::string set_text(const std::set<std::string>& names) {
  std::string out = "{";
  for (const auto& n : names) out += (out.size() > 1 ? "," : "") + n;
  return out + "}";
}

template <typename Map>
std::set<std::string> keys(const Map& map) {
  std::set<std::string> out;
  for (const auto& [k, v] : map) out.insert(k);
  return out;
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

// One example's features: the example's own, then the context's for names it lacks
// (TF Serving's ExampleListWithContext merges the context into each example).
const tensorflow::Feature* find_feature(const tensorflow::Example& example, const tensorflow::Example* context,
                                        const std::string& name) {
  const auto& own = example.features().feature();
  if (auto it = own.find(name); it != own.end()) return &it->second;
  if (context) {
    const auto& shared = context->features().feature();
    if (auto it = shared.find(name); it != shared.end()) return &it->second;
  }
  return nullptr;
}

// The examples of a Classify/Regress input. Throws InvalidArgument for an empty input.
struct Examples {
  const google::protobuf::RepeatedPtrField<tensorflow::Example>* list = nullptr;
  const tensorflow::Example* context = nullptr;
};

Examples examples_of(const tfs::Input& input) {
  Examples e;
  if (input.has_example_list()) e.list = &input.example_list().examples();
  else if (input.has_example_list_with_context()) {
    e.list = &input.example_list_with_context().examples();
    if (input.example_list_with_context().has_context()) e.context = &input.example_list_with_context().context();
  }
  if (!e.list || e.list->empty()) throw InvalidArgument("Input is empty: input.example_list holds no example");
  return e;
}

// The model's input for `spec` from the examples, as tf.io.parse_example reads FixedLenFeatures:
// float features concatenated into one row per example (a missing one takes its default, or
// is an error), or a single bytes feature handed to the model's decoding step.
Tensor rows_from_examples(const Servable& servable, const ExampleSignature& spec, const Examples& examples) {
  const auto batch = static_cast<std::int64_t>(examples.list->size());
  const bool bytes = spec.features.size() == 1 && spec.features[0].bytes;
  std::int64_t width = 0;
  for (const auto& f : spec.features) width += f.size;
  std::vector<float> values;
  BytesTensor strings{{batch}, {}};
  for (std::int64_t i = 0; i < batch; ++i) {
    for (const auto& want : spec.features) {
      const std::string where = "input.examples[" + std::to_string(i) + "], feature " + want.name;
      const auto* f = find_feature((*examples.list)[static_cast<int>(i)], examples.context, want.name);
      if (!f || f->kind_case() == tensorflow::Feature::KIND_NOT_SET) {
        if (want.default_value.empty())
          throw InvalidArgument("Name: <unknown>, Feature: " + want.name + " (data type: " +
                                (want.bytes ? "string" : "float") + ") is required but could not be found (" +
                                where + ")");
        values.insert(values.end(), want.default_value.begin(), want.default_value.end());
        continue;
      }
      const bool is_bytes = f->has_bytes_list();
      if (is_bytes != want.bytes || f->has_int64_list())
        throw InvalidArgument("Name: <unknown>, Key: " + want.name + ", Index: " + std::to_string(i) +
                              ".  Data types don't match. Data type: " +
                              (f->has_int64_list() ? "int64" : is_bytes ? "string" : "float") +
                              " but expected type: " + (want.bytes ? "string" : "float") + " (" + where + ")");
      const int n = is_bytes ? f->bytes_list().value_size() : f->float_list().value_size();
      if (n != want.size)
        throw InvalidArgument("Name: <unknown>, Key: " + want.name + ", Index: " + std::to_string(i) +
                              ".  Number of " + (is_bytes ? "bytes" : "float") + " values != expected.  Values size: " +
                              std::to_string(n) + " but output shape: [" + std::to_string(want.size) + "] (" + where + ")");
      if (is_bytes) strings.values.push_back(f->bytes_list().value(0));
      else values.insert(values.end(), f->float_list().value().begin(), f->float_list().value().end());
    }
  }
  if (bytes) return servable.decode_string_input(kDefaultSignature, spec.input, strings);
  return Tensor::from<float>(DType::kF32, {batch, width}, values);
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

  // The status of a call that ended with `error` (none: OK); records its metrics.
  grpc::Status finish_call(const std::string& model, const std::string& api, Clock::time_point start,
                           std::exception_ptr error) {
    auto [status, code] = status_of(error);
    options.metrics->record(model, api, code, std::chrono::duration<double>(Clock::now() - start).count(), "GRPC");
    return status;
  }

  // Runs `body`, turning an exception into TF Serving's status, and records metrics.
  template <typename F>
  grpc::Status guarded(const std::string& model_name, const std::string& api, F body) {
    const auto start = Clock::now();
    const std::string model = metrics_model(model_name);
    std::exception_ptr error;
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    return finish_call(model, api, start, error);
  }

  // The servable and resolved version of `t`.
  std::pair<std::shared_ptr<const Servable>, std::int64_t> servable_of(const Target& t) const {
    const std::int64_t v = manager.resolve_version(t.model, t.version, t.label);
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
  NamedTensors prepare_predict(const tfs::PredictRequest& request, PredictCall& call) const {
    call.target = target_of(request.has_model_spec(), request.model_spec());
    std::tie(call.servable, call.version) = servable_of(call.target);
    call.signature = call.target.signature.empty() ? kDefaultSignature : call.target.signature;
    const auto& sigs = call.servable->signatures();
    const auto sig_it = sigs.find(call.signature);
    if (sig_it == sigs.end())
      throw FailedPrecondition("Serving signature key \"" + call.signature + "\" not found (model_spec.signature_name)");
    const Signature& sig = sig_it->second;

    // Inputs: each alias known to the signature, every signature input given.
    NamedTensors inputs;
    for (const auto& [alias, proto] : request.inputs()) {
      const auto info_it = sig.inputs.find(alias);
      if (info_it == sig.inputs.end())
        throw InvalidArgument("input tensor alias not found in signature: " + alias +
                              ". Inputs expected to be in the set " + set_text(keys(sig.inputs)) + ".");
      const std::string field = "inputs[\"" + alias + "\"]";
      ProtoTensor decoded = tensor_from_proto(proto, field);
      const int want = tf_data_type(info_it->second), got = proto.dtype();
      if (want != got)
        throw InvalidArgument(field + ": expects arg to be " +
                              tensorflow::DataType_Name(static_cast<tensorflow::DataType>(want)) + " but " +
                              tensorflow::DataType_Name(static_cast<tensorflow::DataType>(got)) + " is provided");
      inputs[alias] = decoded.is_string ? call.servable->decode_string_input(call.signature, alias, decoded.strings)
                                        : std::move(decoded.tensor);
    }
    if (inputs.size() != sig.inputs.size()) {
      std::set<std::string> missing;
      for (const auto& [name, info] : sig.inputs)
        if (!inputs.count(name)) missing.insert(name);
      throw InvalidArgument("input size does not match signature: " + std::to_string(inputs.size()) +
                            "!=" + std::to_string(sig.inputs.size()) + " len(" + set_text(keys(inputs)) +
                            ") != len(" + set_text(keys(sig.inputs)) + "). Missing but required: " +
                            set_text(missing) + ".");
    }

    // Outputs: output_filter, else every output of the signature.
    for (const auto& alias : request.output_filter()) {
      if (!sig.outputs.count(alias))
        throw InvalidArgument("output tensor alias not found in signature: " + alias +
                              " Outputs expected to be in the set " + set_text(keys(sig.outputs)) +
                              " (output_filter).");
      if (!call.wanted.insert(alias).second)
        throw InvalidArgument("duplicate output tensor alias: " + alias + " (output_filter)");
    }
    if (call.wanted.empty()) call.wanted = keys(sig.outputs);
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
    try {
      auto call = std::make_shared<PredictCall>();
      NamedTensors inputs = prepare_predict(*request, *call);
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
        reactor->Finish(finish_call(model, "Predict", start, error));
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
      reactor->Finish(finish_call(model, "Predict", start, std::current_exception()));
    }
    return reactor;
  }

  // Classify and Regress: the examples become rows of the model's input, run as a predict of
  // serving_default (so they batch with predicts, as over REST). Returns the signature's output
  // and fills `spec`.
  Tensor run_examples(grpc::ServerContext* context, const Target& t, const tfs::Input& input, bool classify,
                      tfs::ModelSpec* spec, const ExampleSignature*& used) {
    const auto [servable, version] = servable_of(t);
    const Signature& sig = example_signature(*servable, t.signature, classify, "model_spec.signature_name");
    const Examples examples = examples_of(input);
    NamedTensors inputs;
    inputs[sig.examples.input] = rows_from_examples(*servable, sig.examples, examples);
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
    return guarded(request->model_spec().name(), "Regress", [&] {
      const Target t = target_of(request->has_model_spec(), request->model_spec());
      const ExampleSignature* spec = nullptr;
      const Tensor y = run_examples(context, t, request->input(), false, response->mutable_model_spec(), spec);
      const std::int64_t batch = request->input().has_example_list()
                                     ? request->input().example_list().examples_size()
                                     : request->input().example_list_with_context().examples_size();
      // TF Serving's regressor: one float per example ([batch] or [batch, 1]).
      if (y.dtype != DType::kF32) throw InvalidArgument("Expected output Tensor of DT_FLOAT.  Got: " + dtype_name(y.dtype));
      if (y.numel() != batch || y.shape.empty() || y.shape.size() > 2)
        throw InvalidArgument("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got " +
                              shape_to_string(y.shape, ","));
      auto* result = response->mutable_result();
      for (std::int64_t i = 0; i < batch; ++i) result->add_regressions()->set_value(y.as<float>()[i]);
    });
  }

  grpc::Status Classify(grpc::ServerContext* context, const tfs::ClassificationRequest* request,
                        tfs::ClassificationResponse* response) override {
    return guarded(request->model_spec().name(), "Classify", [&] {
      const Target t = target_of(request->has_model_spec(), request->model_spec());
      const ExampleSignature* spec = nullptr;
      const Tensor scores = run_examples(context, t, request->input(), true, response->mutable_model_spec(), spec);
      // TF Serving's classifier: scores [batch, classes] (or [batch]: one class), labels from
      // the signature's classes, else "".
      if (scores.dtype != DType::kF32 || scores.shape.empty() || scores.shape.size() > 2)
        throw InvalidArgument("Expected scores Tensor of DT_FLOAT and shape [batch_size, num_classes], got " +
                              dtype_name(scores.dtype) + " " + shape_to_string(scores.shape, ","));
      const std::int64_t batch = scores.shape[0];
      const std::int64_t classes = scores.shape.size() == 2 ? scores.shape[1] : 1;
      if (!spec->classes.empty() && static_cast<std::int64_t>(spec->classes.size()) != classes)
        throw Internal("the signature names " + std::to_string(spec->classes.size()) + " classes but the model gives " +
                       std::to_string(classes) + " scores");
      auto* result = response->mutable_result();
      for (std::int64_t i = 0; i < batch; ++i) {
        auto* c = result->add_classifications();
        for (std::int64_t j = 0; j < classes; ++j) {
          auto* cls = c->add_classes();
          cls->set_label(spec->classes.empty() ? "" : spec->classes[j]);
          cls->set_score(scores.as<float>()[i * classes + j]);
        }
      }
    });
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
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0)
    throw Unavailable("cannot listen for gRPC on " + address + " (in use? choose another --port, or 0 to turn gRPC off)");
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
