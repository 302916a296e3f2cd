// libFuzzer target for the REST API's request parsers (serve/json_tensor.h): any byte string
// as a predict body, against a one-input and a two-input signature and one with a DT_STRING
// input (strings and {"b64": ...}); and as a classify / regress body of tf.Examples, against a
// signature of float features (one with a default) and one of a bytes feature, whose rows are
// then written back as classify and regress results. A parse either succeeds
// and its tensors are consistent, or throws tensorhub::Error; nothing else is allowed.
// Build and run with scripts/fuzz (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/json_tensor.h"

using namespace tensorhub;
using namespace tensorhub;

namespace {

Signature make_signature(bool two_inputs, bool string_input = false) {
  Signature s;
  s.inputs["x"] = TensorInfo{"x:0", DType::kF32, {-1}};
  if (two_inputs) s.inputs["k"] = TensorInfo{"k:0", DType::kI64, {-1, 2}};
  if (string_input) s.inputs["s_bytes"] = TensorInfo{"s_bytes:0", DType::kU8, {-1}, false, true};
  s.outputs["y"] = TensorInfo{"y:0", DType::kF32, {-1}};
  return s;
}

Signature make_example_signature(bool bytes) {
  Signature s;
  s.method_name = kRegressMethodName;
  if (bytes) {
    ExampleFeature image;
    image.name = "image";
    image.bytes = true;
    s.examples.features = {image};
  } else {
    s.examples.features = {{"x", 2, {}, false}, {"y", 1, {0.5f}, false}};
  }
  return s;
}

// parse_examples_request on `body`: rows hold exactly examples x width floats, or one byte
// string per example; the writers take the rows as scores and (first column) as values.
void fuzz_examples(std::string_view body) {
  static const Signature floats = make_example_signature(false), bytes = make_example_signature(true);
  for (const Signature* sig : {&floats, &bytes}) {
    try {
      const ExamplesRequest req = parse_examples_request(body, [&](const std::string&) -> const Signature& { return *sig; });
      if (sig == &bytes) {
        if (req.bytes.empty()) std::abort();
        continue;
      }
      const Tensor& rows = req.rows;
      if (rows.shape.size() != 2 || rows.shape[1] != 3 || rows.shape[0] < 1 ||
          static_cast<std::size_t>(rows.numel()) * sizeof(float) != rows.data.size())
        std::abort();
      (void)format_classify_response(rows, {"a", "b", "c"});
      Tensor first = rows;
      first.shape = {rows.shape[0] * 3};
      (void)format_regress_response(first);
    } catch (const Error&) {
      // malformed input: the expected, clean outcome
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Signature one = make_signature(false), two = make_signature(true),
                         bytes = make_signature(false, true);
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  fuzz_examples(body);
  for (const Signature* sig : {&one, &two, &bytes}) {
    try {
      const PredictRequest req = parse_predict_request(body, [&](const std::string& name) -> const Signature& {
        if (name != kDefaultSignature) throw InvalidArgument("unknown signature");
        return *sig;
      });
      for (const auto& [name, t] : req.inputs) {
        // Every parsed tensor holds exactly the bytes its shape and dtype say.
        if (t.numel() < 0 || static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype) != t.data.size()) std::abort();
      }
      for (const auto& [name, t] : req.string_inputs)
        if (t.numel() < 0 || static_cast<std::size_t>(t.numel()) != t.values.size()) std::abort();
      // Echo the inputs as outputs: the response writer must handle whatever the parser made.
      NamedTensors outputs;
      for (const auto& [name, t] : req.inputs)
        if (!t.shape.empty()) outputs.emplace(name, t);
      NamedStringTensors string_outputs;
      for (const auto& [name, t] : req.string_inputs)
        if (!t.shape.empty()) string_outputs.emplace(name, t);
      if (!outputs.empty() || !string_outputs.empty()) {
        try {
          (void)format_predict_response(outputs, *sig, req.row_format, string_outputs);
        } catch (const Error&) {
          // e.g. outputs with different batch sizes in row format: a clean error is fine
        }
      }
    } catch (const Error&) {
      // malformed input: the expected, clean outcome
    }
  }
  return 0;
}
