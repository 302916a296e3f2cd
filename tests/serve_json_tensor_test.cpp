// The predict-request parser and the response writer in-process, on the examples of TF
// Serving's REST API page ("Predict API": row and columnar formats, named inputs, b64 strings)
// and its error texts; values worked out by hand from those bodies.
#include <gtest/gtest.h>

#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/json_tensor.h"
#include "test_util.h"

namespace tensorhub {
namespace {

TensorInfo info(std::string name, std::vector<std::int64_t> shape, bool is_string = false) {
  TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.is_string = is_string;
  return t;
}

// The signature of the REST page's example: tag (a string), signal [5], sensor [2, 2].
Signature example_signature() {
  Signature s;
  s.inputs["tag"] = info("tag:0", {-1}, true);
  s.inputs["signal"] = info("signal:0", {-1, 5});
  s.inputs["sensor"] = info("sensor:0", {-1, 2, 2});
  s.outputs["y"] = info("y:0", {-1, 1});
  return s;
}

Signature single_input() {
  Signature s;
  s.inputs["x"] = info("x:0", {-1, 2});
  s.outputs["y"] = info("y:0", {-1});
  return s;
}

PredictRequest parse(const std::string& body, const Signature& sig, std::string* asked = nullptr) {
  return parse_predict_request(body, [&](const std::string& name) -> const Signature& {
    if (asked) *asked = name;
    return sig;
  });
}

std::vector<float> values_of(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

void expect_example_tensors(const PredictRequest& r) {
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs.at("signal").shape, (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(values_of(r.inputs.at("signal")), (std::vector<float>{1, 2, 3, 4, 5, 3, 4, 1, 2, 5}));
  EXPECT_EQ(r.inputs.at("sensor").shape, (std::vector<std::int64_t>{2, 2, 2}));
  EXPECT_EQ(values_of(r.inputs.at("sensor")), (std::vector<float>{1, 2, 3, 4, 4, 5, 6, 8}));
  ASSERT_EQ(r.string_inputs.size(), 1u);
  EXPECT_EQ(r.string_inputs.at("tag").shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(r.string_inputs.at("tag").values, (std::vector<std::string>{"foo", "bar"}));
}

TEST(PredictRequest, RowFormatWithNamedInputsFromTheRestPage) {
  std::string asked;
  const PredictRequest r = parse(R"({"instances": [
      {"tag": "foo", "signal": [1, 2, 3, 4, 5], "sensor": [[1, 2], [3, 4]]},
      {"tag": "bar", "signal": [3, 4, 1, 2, 5], "sensor": [[4, 5], [6, 8]]}]})",
                                 example_signature(), &asked);
  EXPECT_TRUE(r.row_format);
  EXPECT_EQ(r.signature_name, "");
  EXPECT_EQ(asked, kDefaultSignature);
  expect_example_tensors(r);
}

TEST(PredictRequest, ColumnarFormatFromTheRestPageGivesTheSameTensors) {
  std::string asked;
  const PredictRequest r = parse(R"({"signature_name": "classify", "inputs": {
      "tag": ["foo", "bar"],
      "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]],
      "sensor": [[[1, 2], [3, 4]], [[4, 5], [6, 8]]]}})",
                                 example_signature(), &asked);
  EXPECT_FALSE(r.row_format);
  EXPECT_EQ(r.signature_name, "classify");
  EXPECT_EQ(asked, "classify");
  expect_example_tensors(r);
}

TEST(PredictRequest, ASingleInputTakesPlainRowsAndB64Strings) {
  const PredictRequest rows = parse(R"({"instances": [[1.5, 2], [3, 4]]})", single_input());
  EXPECT_EQ(rows.inputs.at("x").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(values_of(rows.inputs.at("x")), (std::vector<float>{1.5, 2, 3, 4}));

  Signature bytes;
  bytes.inputs["image_bytes"] = info("image_bytes:0", {-1}, true);
  // "aGVsbG8=" is base64 for "hello"; a plain string is taken as it is.
  const PredictRequest b = parse(R"({"instances": [{"b64": "aGVsbG8="}, "raw"]})", bytes);
  EXPECT_EQ(b.string_inputs.at("image_bytes").values, (std::vector<std::string>{"hello", "raw"}));
}

TEST(PredictRequest, MalformedBodiesGetTfServingsMessages) {
  const Signature s = single_input();
  const auto bad = [&](const std::string& body, const std::string& text) {
    testing::expect_error([&] { parse(body, s); }, ErrorKind::kInvalidArgument, {text});
  };
  bad(R"({"instances": [[1, 2]], "inputs": [[1, 2]]})", "expecting only one of 'inputs' or 'instances'");
  bad(R"({"signature_name": "x"})", "Missing 'inputs' or 'instances' key");
  bad(R"({"instances": []})", "No values in 'instances' array");
  bad(R"({"instances": [[1, 2], [3]]})", "Expecting tensor size: 2");
  bad(R"({"instances": [["a", 2]]})", "is not of expected type: float");
  bad(R"([1, 2])", "Is not object");
  bad("", "The document is empty");
}

TEST(PredictResponse, RowAndColumnarBodies) {
  const Signature s = single_input();
  const NamedTensors out = {{"y", Tensor::from(DType::kF32, {2}, std::vector<float>{2.5, 3})}};
  EXPECT_EQ(format_predict_response(out, s, /*row_format=*/true), R"({"predictions":[2.5,3.0]})");
  EXPECT_EQ(format_predict_response(out, s, /*row_format=*/false), R"({"outputs":[2.5,3.0]})");
}

}  // namespace
}  // namespace tensorhub
