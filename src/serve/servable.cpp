#include "tensorhub/serve/servable.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/torchscript_part.h"
#include "fair_slots.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/serving_signature.h"

namespace tensorhub {

// Defined in torchscript_servable.cpp (the only translation unit with torch/jit headers), as
// is the bytes overload of servable.h.
std::shared_ptr<Servable> load_torchscript_servable(const std::filesystem::path& file);

namespace {

// A model in our format (model.json + weights). A Model serves one thread at a time, so the
// servable keeps one replica per core, handed out first come first served (FairSlots):
// requests (or batches) run in parallel on different replicas, each with one intra-op thread.
class ModelServable final : public Servable {
 public:
  ModelServable(const Json& architecture, const NamedTensors& weights, std::string source)
      : model_(Model::from_parts(architecture, weights)),
        slots_(std::max(1u, std::thread::hardware_concurrency())),
        source_(std::move(source)) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    replicas_.push_back(std::make_unique<Replica>(model_));
    for (unsigned i = 1; i < n; ++i)
      replicas_.push_back(std::make_unique<Replica>(Model::from_parts(architecture, weights)));
    const Json& config = model_.config();
    const ServingSignatureSpec spec = parse_serving_signature(config);  // shared with tensorhub-serve-lite
    input_name_ = spec.input;
    output_name_ = spec.output;
    string_input_ = spec.string_input;
    decode_scale_ = spec.decode_scale;
    input_shape_ = config.contains("input_shape") ? config.at("input_shape").get<std::vector<std::int64_t>>()
                                                  : config.at("layers").at(0).at("shape").get<std::vector<std::int64_t>>();
    // The output shape per example: run one zero example (cheap, and exact for any layers).
    Tensor zero;
    zero.dtype = DType::kF32;
    zero.shape = {1};
    zero.shape.insert(zero.shape.end(), input_shape_.begin(), input_shape_.end());
    zero.data.resize(static_cast<std::size_t>(zero.numel()) * sizeof(float));
    const Tensor y = model_.predict(zero);
    Signature sig;
    TensorInfo in{input_name_ + ":0", DType::kF32, {-1}};
    if (string_input_) in.is_string = true;  // one string per example: shape [-1]
    else in.shape.insert(in.shape.end(), input_shape_.begin(), input_shape_.end());
    TensorInfo out{output_name_ + ":0", DType::kF32, {-1}};
    out.shape.insert(out.shape.end(), y.shape.begin() + 1, y.shape.end());
    sig.inputs[input_name_] = in;
    sig.outputs[output_name_] = out;
    signatures_[kDefaultSignature] = sig;
    elementwise_ = std::equal(y.shape.begin() + 1, y.shape.end(), input_shape_.begin(), input_shape_.end());
    read_example_signatures(config, std::vector<std::int64_t>(y.shape.begin() + 1, y.shape.end()));
  }

  const std::map<std::string, Signature>& signatures() const override { return signatures_; }
  std::string source() const override { return source_; }

  // "raw_uint8": each string is prod(input_shape) bytes, byte i -> float byte * scale.
  Tensor decode_string_input(const std::string& signature, const std::string& input,
                             const BytesTensor& values) const override {
    if (!signatures_.count(signature)) throw NotFound("signature " + signature + " not found");
    if (!string_input_ || input != input_name_) return Servable::decode_string_input(signature, input, values);
    if (values.shape.size() != 1)
      throw InvalidArgument("input " + input_name_ + " takes one string per example (shape [batch]), got shape " +
                            shape_to_string(values.shape));
    std::int64_t per_example = 1;
    for (auto d : input_shape_) per_example *= d;
    Tensor x;
    x.dtype = DType::kF32;
    x.shape = {values.shape[0]};
    x.shape.insert(x.shape.end(), input_shape_.begin(), input_shape_.end());
    x.data.resize(static_cast<std::size_t>(x.numel()) * sizeof(float));
    float* out = x.as<float>();
    for (std::size_t i = 0; i < values.values.size(); ++i) {
      const std::string& s = values.values[i];
      if (static_cast<std::int64_t>(s.size()) != per_example)
        throw InvalidArgument("input " + input_name_ + ": example " + std::to_string(i) + " has " +
                              std::to_string(s.size()) + " bytes but \"decode\": \"raw_uint8\" of shape " +
                              shape_to_string(input_shape_) + " needs " + std::to_string(per_example));
      for (std::int64_t j = 0; j < per_example; ++j)
        *out++ = static_cast<float>(static_cast<double>(static_cast<unsigned char>(s[j])) * decode_scale_);
    }
    return x;
  }

  NamedTensors predict(const std::string& signature, const NamedTensors& inputs) const override {
    if (!signatures_.count(signature)) throw NotFound("signature " + signature + " not found");
    const auto it = inputs.find(input_name_);
    if (it == inputs.end() || inputs.size() != 1) throw InvalidArgument("expected exactly one input: " + input_name_);
    if (it->second.dtype != DType::kF32)
      throw InvalidArgument("input " + input_name_ + " must be float32, got " + dtype_name(it->second.dtype));
    const Tensor& given = it->second;
    if (given.shape.empty()) throw InvalidArgument("input " + input_name_ + " needs a batch dimension");
    // Accept any nesting with the right number of values per example: a 28x28 list for a
    // model that takes 784 floats, as Keras's Flatten-less models are often fed.
    std::int64_t per_example = 1, want = 1;
    for (std::size_t d = 1; d < given.shape.size(); ++d) per_example *= given.shape[d];
    for (auto d : input_shape_) want *= d;
    if (per_example != want) {
      std::vector<std::int64_t> got(given.shape.begin() + 1, given.shape.end());
      throw InvalidArgument("input " + input_name_ + ": each instance has shape " + shape_to_string(got) + " (" +
                            std::to_string(per_example) + " values) but the model takes " +
                            shape_to_string(input_shape_) + " (" + std::to_string(want) + " values)");
    }
    // Reshaped to [batch, input_shape...]; copied only when the nesting differs.
    std::vector<std::int64_t> shape = {given.shape[0]};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    Tensor reshaped;
    if (shape != given.shape) {
      reshaped = given;
      reshaped.shape = shape;
    }
    const Tensor& x = shape == given.shape ? given : reshaped;
    // A free replica if there is one, else the next freed, first come first served.
    const auto lease = slots_.acquire();
    Tensor y = replicas_[lease.index()]->model.predict(x);
    // A model whose output has its input's shape (half_plus_two, any elementwise model) answers
    // in the request's nesting, as TensorFlow's graph would: [[1], [2]] -> [[2.5], [3.0]], the
    // size-1 dimension kept as TF Serving keeps it.
    if (shape != given.shape && elementwise_) y.shape = given.shape;
    return {{output_name_, std::move(y)}};
  }

 private:
  // model.json's "signatures": classify and regress signatures over the model (TF's
  // classification and regression SignatureDefs, which read serialized tf.Examples).
  void read_example_signatures(const Json& config, const std::vector<std::int64_t>& output_shape) {
    const Json all = config.value("signatures", Json::object());
    if (!all.is_object()) throw InvalidArgument("model.json \"signatures\" must be an object of name -> signature");
    std::int64_t per_example_in = 1, per_example_out = 1;
    for (auto d : input_shape_) per_example_in *= d;
    for (auto d : output_shape) per_example_out *= d;
    for (const auto& [name, def] : all.items()) {
      const std::string where = "model.json signatures." + name + ": ";
      if (name == kDefaultSignature)
        throw InvalidArgument(where + "serving_default is the predict signature, named by \"signature\"");
      const std::string method = def.value("method_name", std::string());
      if (method != kClassifyMethodName && method != kRegressMethodName)
        throw InvalidArgument(where + "method_name must be " + kClassifyMethodName + " or " + kRegressMethodName +
                              ", got \"" + method + "\"");
      Signature sig;
      sig.method_name = method;
      sig.examples.input = input_name_;
      sig.examples.output = output_name_;
      std::int64_t width = 0;
      for (const Json& f : def.value("features", Json::array())) {
        ExampleFeature feature;
        feature.name = f.at("name").get<std::string>();
        const std::string dtype = f.value("dtype", std::string("float"));
        if (dtype != "float" && dtype != "string")
          throw InvalidArgument(where + "feature " + feature.name + ": dtype must be float or string, got " + dtype);
        if (dtype == "string") {
          if (!string_input_ || f.contains("default") || f.contains("size") || def.at("features").size() != 1)
            throw InvalidArgument(where + "a string feature must be the signature's only one, without size or "
                                  "default, on a model whose input is DT_STRING (\"decode\")");
          feature.bytes = true;
          sig.examples.features.push_back(std::move(feature));
          continue;
        }
        feature.size = f.value("size", std::int64_t{1});
        if (f.contains("default"))
          feature.default_value = f.at("default").is_array() ? f.at("default").get<std::vector<float>>()
                                                              : std::vector<float>{f.at("default").get<float>()};
        if (feature.size < 1 || (!feature.default_value.empty() &&
                                 static_cast<std::int64_t>(feature.default_value.size()) != feature.size))
          throw InvalidArgument(where + "feature " + feature.name + " needs a positive size and a default of that size");
        width += feature.size;
        sig.examples.features.push_back(std::move(feature));
      }
      if (width != per_example_in && !(sig.examples.features.size() == 1 && sig.examples.features[0].bytes))
        throw InvalidArgument(where + "its features give " + std::to_string(width) + " floats per example, but the "
                              "model's input " + shape_to_string(input_shape_) + " takes " + std::to_string(per_example_in));
      sig.examples.classes = def.value("classes", std::vector<std::string>{});
      if (method == kRegressMethodName && per_example_out != 1)
        throw InvalidArgument(where + "a regression needs one output value per example; the model gives " +
                              std::to_string(per_example_out));
      if (!sig.examples.classes.empty() && static_cast<std::int64_t>(sig.examples.classes.size()) != per_example_out)
        throw InvalidArgument(where + std::to_string(sig.examples.classes.size()) + " classes for " +
                              std::to_string(per_example_out) + " scores per example");
      // As TF's SignatureDefs show them: serialized tf.Examples in, scores or values out.
      sig.inputs["inputs"] = TensorInfo{"tf_example:0", DType::kF32, {-1}, false, true};
      if (method == kRegressMethodName) {
        sig.outputs["outputs"] = TensorInfo{output_name_ + ":0", DType::kF32, {-1, 1}};
      } else {
        sig.outputs["scores"] = TensorInfo{output_name_ + ":0", DType::kF32, {-1, per_example_out}};
        if (!sig.examples.classes.empty())
          sig.outputs["classes"] = TensorInfo{"classes:0", DType::kF32, {-1, per_example_out}, false, true};
      }
      signatures_[name] = std::move(sig);
    }
  }


  struct Replica {
    explicit Replica(Model m) : model(std::move(m)) {}
    Model model;
  };
  Model model_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  mutable detail::FairSlots slots_;  // which replicas are free; a replica serves one caller at a time
  std::string source_;
  std::string input_name_, output_name_;
  std::vector<std::int64_t> input_shape_;
  bool string_input_ = false;  ///< the input is DT_STRING, decoded by "raw_uint8"
  bool elementwise_ = false;   ///< the output of an example has its input's shape
  double decode_scale_ = 1.0;
  std::map<std::string, Signature> signatures_;
};

}  // namespace

Tensor Servable::decode_string_input(const std::string& signature, const std::string& input,
                                     const BytesTensor&) const {
  throw InvalidArgument("input " + input + " of signature " + signature + " takes no strings: this model " +
                        "declares no DT_STRING input");
}

std::string tf_dtype_name(const TensorInfo& info) { return info.is_string ? "DT_STRING" : tf_dtype_name(info.dtype); }

std::string tf_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "DT_FLOAT";
    case DType::kF64: return "DT_DOUBLE";
    case DType::kI64: return "DT_INT64";
    case DType::kI32: return "DT_INT32";
    case DType::kU8: return "DT_UINT8";
    case DType::kI8: return "DT_INT8";
    case DType::kBool: return "DT_BOOL";
  }
  return "DT_INVALID";
}

namespace {

// Throws FailedPrecondition saying how to make `source`, of the Python package's `format`,
// servable; returns for any other format.
void check_not_python_only(const std::string& format, const Json& architecture, const std::string& source) {
  if (format == "pytorch_state_dict")
    throw FailedPrecondition(
        source + " is a PyTorch state_dict (module " + architecture.value("module", std::string("?")) +
        ") without TorchScript, which cannot be served: a state_dict holds weights, not the Python code of the " +
        "module. Save it again from Python with TensorHub.save_model(module, name, example_input=x) (x: one " +
        "batch of inputs) so that it is traced, or make the module torch.jit.script-able; or save a model.pt " +
        "written by torch.jit.save with `tensorhub model save --model-name NAME --path model.pt`");
  if (format == "named_tensors")
    throw FailedPrecondition(source + " holds named tensors (saved from a dict), no network, so it cannot be "
                                      "served: save a torch.nn.Module or a model directory instead");
  if (format == kTorchScriptFormat)
    throw DataLoss(source + " is a TorchScript model without its " + kTorchScriptPart + " part");
}

}  // namespace

std::shared_ptr<Servable> make_model_servable(const Json& architecture, const NamedTensors& weights,
                                              const std::string& source) {
  check_not_python_only(model_format(architecture), architecture, source);
  return std::make_shared<ModelServable>(architecture, weights, source);
}

std::shared_ptr<Servable> load_servable(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "model.json")) {
    const auto bytes = read_file_bytes(dir / "model.json");
    Json arch = Json::parse(reinterpret_cast<const char*>(bytes.data()),
                            reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
    if (arch.is_discarded()) throw DataLoss((dir / "model.json").string() + " is not valid JSON");
    // A PyTorch model fetched from the hub (`tensorhub model fetch`): model.json names the
    // module, model.pt runs it.
    if (!model_format(arch).empty() && std::filesystem::exists(dir / kTorchScriptPart))
      return load_torchscript_servable(dir / kTorchScriptPart);
    const auto weights_file = dir / "weights.safetensors";
    if (std::filesystem::exists(weights_file)) return make_model_servable(arch, read_safetensors(weights_file), dir.string());
    try {
      return make_model_servable(arch, {}, dir.string());  // a model without weights needs no file
    } catch (const Error& e) {
      // Without the file every weight is missing: name the file, not its first tensor.
      if (e.message().find("missing tensor") == std::string::npos) throw;
      throw NotFound(weights_file.string() + " is missing: model.json's layers need their weights next to it");
    }
  }
  if (std::filesystem::exists(dir / "model.pt")) return load_torchscript_servable(dir / "model.pt");
  throw NotFound("no model in " + dir.string() + ": expected model.json (+ weights.safetensors) or model.pt");
}

const Signature& example_signature(const Servable& servable, const std::string& name, bool classify,
                                   const std::string& name_field) {
  const std::string want = classify ? kClassifyMethodName : kRegressMethodName;
  const auto& sigs = servable.signatures();
  const Signature* sig = nullptr;
  if (name.empty()) {
    sig = &sigs.at(kDefaultSignature);
    const Signature* only = nullptr;
    int of_method = 0;
    for (const auto& [key, s] : sigs)
      if (s.method_name == want) only = &s, ++of_method;
    if (sig->method_name != want && of_method == 1) sig = only;
  } else {
    const auto it = sigs.find(name);
    if (it == sigs.end())
      throw InvalidArgument("No signature was found with the name: " + name +
                            (name_field.empty() ? "" : " (" + name_field + ")"));
    sig = &it->second;
  }
  if (sig->method_name != want)
    throw InvalidArgument(std::string("Expected ") + (classify ? "classification" : "regression") +
                          " signature method_name to be " + want + ". Was: " + sig->method_name);
  return *sig;
}

}  // namespace tensorhub
