#include "proto_requests.h"

#include "tensorflow/core/framework/types.pb.h"
#include "tensorhub/core/error.h"
#include "tensorhub/serve/tensor_proto.h"

namespace tensorhub::detail {
namespace {

namespace tfs = tensorflow::serving;

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

}  // namespace

const Signature& predict_signature(const Servable& servable, const std::string& name) {
  const std::string key = name.empty() ? std::string(kDefaultSignature) : name;
  const auto& sigs = servable.signatures();
  const auto it = sigs.find(key);
  if (it == sigs.end())
    throw FailedPrecondition("Serving signature key \"" + key + "\" not found (model_spec.signature_name)");
  // Its input is serialized tf.Examples, which the model's graph parses in TensorFlow; here
  // Classify and Regress read the examples (rows_from_input), so a Predict is sent there.
  if (it->second.method_name == kClassifyMethodName || it->second.method_name == kRegressMethodName) {
    const bool classify = it->second.method_name == kClassifyMethodName;
    throw InvalidArgument("signature " + key + " (model_spec.signature_name) has method_name " +
                          it->second.method_name + ": it reads tf.Examples; call " +
                          (classify ? "Classify with a ClassificationRequest" : "Regress with a RegressionRequest") +
                          " whose input holds the examples (REST: POST them to :" +
                          (classify ? "classify" : "regress") + ")");
  }
  return it->second;
}

NamedTensors predict_inputs(const Servable& servable, const std::string& signature, const Signature& sig,
                            const tfs::PredictRequest& request) {
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
    inputs[alias] = decoded.is_string ? servable.decode_string_input(signature, alias, decoded.strings)
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
  return inputs;
}

std::set<std::string> predict_outputs(const Signature& sig, const tfs::PredictRequest& request) {
  std::set<std::string> wanted;
  for (const auto& alias : request.output_filter()) {
    if (!sig.outputs.count(alias))
      throw InvalidArgument("output tensor alias not found in signature: " + alias +
                            " Outputs expected to be in the set " + set_text(keys(sig.outputs)) + " (output_filter).");
    if (!wanted.insert(alias).second) throw InvalidArgument("duplicate output tensor alias: " + alias + " (output_filter)");
  }
  return wanted.empty() ? keys(sig.outputs) : wanted;
}

std::int64_t example_count(const tfs::Input& input) {
  return input.has_example_list() ? input.example_list().examples_size()
                                  : input.example_list_with_context().examples_size();
}

// Float features concatenated into one row per example (a missing one takes its default, or is
// an error), or a single bytes feature handed to the model's decoding step.
Tensor rows_from_input(const Servable& servable, const ExampleSignature& spec, const tfs::Input& input) {
  const Examples examples = examples_of(input);
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

void fill_regression(const Tensor& y, std::int64_t batch, tfs::RegressionResult* result) {
  if (y.dtype != DType::kF32) throw InvalidArgument("Expected output Tensor of DT_FLOAT.  Got: " + dtype_name(y.dtype));
  if (y.numel() != batch || y.shape.empty() || y.shape.size() > 2)
    throw InvalidArgument("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got " +
                          shape_to_string(y.shape, ","));
  for (std::int64_t i = 0; i < batch; ++i) result->add_regressions()->set_value(y.as<float>()[i]);
}

void fill_classification(const Tensor& scores, const ExampleSignature& spec, tfs::ClassificationResult* result) {
  if (scores.dtype != DType::kF32 || scores.shape.empty() || scores.shape.size() > 2)
    throw InvalidArgument("Expected scores Tensor of DT_FLOAT and shape [batch_size, num_classes], got " +
                          dtype_name(scores.dtype) + " " + shape_to_string(scores.shape, ","));
  const std::int64_t batch = scores.shape[0];
  const std::int64_t classes = scores.shape.size() == 2 ? scores.shape[1] : 1;
  if (!spec.classes.empty() && static_cast<std::int64_t>(spec.classes.size()) != classes)
    throw Internal("the signature names " + std::to_string(spec.classes.size()) + " classes but the model gives " +
                   std::to_string(classes) + " scores");
  for (std::int64_t i = 0; i < batch; ++i) {
    auto* c = result->add_classifications();
    for (std::int64_t j = 0; j < classes; ++j) {
      auto* cls = c->add_classes();
      cls->set_label(spec.classes.empty() ? "" : spec.classes[j]);
      cls->set_score(scores.as<float>()[i * classes + j]);
    }
  }
}

}  // namespace tensorhub::detail
