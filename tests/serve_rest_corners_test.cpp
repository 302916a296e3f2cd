// The REST corners where TF Serving's behaviour is exact, in process: the NaN / Infinity /
// -Infinity tokens in requests and responses (and no other spelling), the batcher's
// allowed_batch_sizes (padding, each caller gets its own rows), pad_variable_length_inputs
// and the parameter checks with TF Serving's messages; and the Classify and Regress API's
// tf.Examples in JSON (features, context, TF Serving's errors) and its "results" answers.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>

#include "process_util.h"
#include "tensorhub/serve/batcher.h"
#include "tensorhub/serve/json_tensor.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::error_message_of;

// ---- NaN, Infinity, -Infinity ------------------------------------------------------------------

Signature one_input(DType dtype, bool is_string = false) {
  Signature sig;
  TensorInfo x{"x:0", dtype, {-1}};
  x.is_string = is_string;
  sig.inputs["x"] = x;
  return sig;
}

PredictRequest parse(const std::string& body, const Signature& sig) {
  return parse_predict_request(body, [&](const std::string&) -> const Signature& { return sig; });
}

std::vector<float> floats_of(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

TEST(NonFiniteJsonTest, NaNInfinityAndMinusInfinityAreNumbersInEveryPlace) {
  const Signature sig = one_input(DType::kF32);
  const float inf = std::numeric_limits<float>::infinity();
  // Row format, with and without blanks around the tokens.
  auto req = parse(R"({"instances": [NaN, Infinity,-Infinity , 1.5]})", sig);
  auto v = floats_of(req.inputs.at("x"));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], inf);
  EXPECT_EQ(v[2], -inf);
  EXPECT_EQ(v[3], 1.5f);
  // Named instances, columnar format, nested lists.
  v = floats_of(parse(R"({"instances": [{"x": [NaN, 2.0]}, {"x": [3.0, -Infinity]}]})", sig).inputs.at("x"));
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[3], -inf);
  v = floats_of(parse(R"({"inputs": {"x": [[Infinity]]}})", sig).inputs.at("x"));
  EXPECT_EQ(v, std::vector<float>{inf});
  v = floats_of(parse(R"({"signature_name":"serving_default","inputs":[NaN]})", sig).inputs.at("x"));
  EXPECT_TRUE(std::isnan(v[0]));
  // Doubles keep them too.
  const auto d = parse(R"({"instances": [-Infinity]})", one_input(DType::kF64)).inputs.at("x");
  EXPECT_EQ(d.as<double>()[0], -std::numeric_limits<double>::infinity());
}

TEST(NonFiniteJsonTest, OtherSpellingsAndPlacesAreRefused) {
  const Signature sig = one_input(DType::kF32);
  for (const std::string token : {"nan", "NAN", "inf", "Inf", "-inf", "infinity", "+Infinity", "-NaN", "Infinityx",
                                  "NaN1", "1NaN", "- Infinity"}) {
    const std::string body = R"({"instances": [)" + token + "]}";
    EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { parse(body, sig); }, body).find("JSON Parse error"),
              std::string::npos)
        << body;
  }
  // A token is no key, and a string "NaN" stays a string.
  error_message_of(ErrorKind::kInvalidArgument, [&] { parse(R"({NaN: [1.0]})", sig); }, "NaN as a key");
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { parse(R"({"instances": ["NaN"]})", sig); }, "string"),
            R"(Failed to process element: 0 of 'instances' list. Error: JSON Value: "NaN" Type: String is not of expected type: float)");
  // Where a float does not fit, the error shows the token, as TF Serving's JsonValueToString.
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument,
                             [&] { parse(R"({"instances": [NaN]})", one_input(DType::kI64)); }, "int64"),
            "Failed to process element: 0 of 'instances' list. Error: JSON Value: NaN Type: Number is not of "
            "expected type: int64");
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument,
                             [&] { parse(R"({"inputs": [Infinity]})", one_input(DType::kF32, true)); }, "string"),
            "JSON Value: Infinity Type: Number is not of expected type: string");
  // A body whose strings escape U+0000 is never rewritten, so a marker cannot be forged.
  error_message_of(ErrorKind::kInvalidArgument,
                   [&] { parse(R"({"signature_name": "\u0000NaN", "instances": [NaN]})", sig); }, "U+0000");
}

TEST(NonFiniteJsonTest, NonFiniteOutputsAreWrittenAsTheTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  NamedTensors out;
  out["y"] = Tensor::from<float>(DType::kF32, {3}, {std::nanf(""), inf, -inf});
  EXPECT_EQ(format_predict_response(out, {}, true), R"({"predictions":[NaN,Infinity,-Infinity]})");
  EXPECT_EQ(format_predict_response(out, {}, false), R"({"outputs":[NaN,Infinity,-Infinity]})");
}

// ---- batching: allowed_batch_sizes, pad_variable_length_inputs ---------------------------------

// Echoes input "x" as output "y" and keeps every batch it ran. It holds its first batch until
// release(), so that requests sent meanwhile wait in the queue and then form one batch.
class EchoServable final : public Servable {
 public:
  EchoServable() { signatures_[kDefaultSignature] = {}; }
  const std::map<std::string, Signature>& signatures() const override { return signatures_; }
  std::string source() const override { return "echo"; }
  NamedTensors predict(const std::string&, const NamedTensors& inputs) const override {
    std::unique_lock lock(mutex_);
    batches_.push_back(inputs.at("x"));
    released_cv_.wait(lock, [&] { return released_; });
    return {{"y", inputs.at("x")}};
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    released_cv_.notify_all();
  }
  std::vector<Tensor> batches() const {
    std::lock_guard lock(mutex_);
    return batches_;
  }

 private:
  std::map<std::string, Signature> signatures_;
  mutable std::mutex mutex_;
  mutable std::condition_variable released_cv_;
  mutable std::vector<Tensor> batches_;
  bool released_ = false;
};

Tensor rows(std::vector<std::int64_t> shape, std::vector<float> values) {
  return Tensor::from<float>(DType::kF32, std::move(shape), std::move(values));
}

// One batcher thread busy with a first request while `requests` queue up, one after the other,
// then released: the queued ones run as one batch (when they can share one). Returns each
// request's "y".
std::vector<Tensor> run_queued(Batcher& batcher, const std::shared_ptr<EchoServable>& servable,
                               const std::vector<Tensor>& requests) {
  const std::shared_ptr<const Servable> s = servable;
  auto busy = std::async(std::launch::async, [&] { return batcher.predict(s, kDefaultSignature, {{"x", rows({1, 1}, {9})}}); });
  EXPECT_TRUE(testing::eventually([&] { return servable->batches().size() == 1; }));
  std::vector<std::future<NamedTensors>> answers;
  std::int64_t queued = 0;
  for (const auto& x : requests) {
    answers.push_back(std::async(std::launch::async, [&, x] { return batcher.predict(s, kDefaultSignature, {{"x", x}}); }));
    queued += x.shape[0];
    EXPECT_TRUE(testing::eventually([&] { return batcher.queued_rows() == queued; }));
  }
  servable->release();
  busy.get();
  std::vector<Tensor> out;
  for (auto& a : answers) out.push_back(a.get().at("y"));
  return out;
}

BatchingParameters one_thread(std::int64_t max_batch_size) {
  BatchingParameters p;
  p.max_batch_size = max_batch_size;
  p.num_batch_threads = 1;
  return p;
}

TEST(BatchingTest, ABatchIsPaddedToAnAllowedSizeAndEachCallerGetsItsOwnRows) {
  BatchingParameters p = one_thread(8);
  p.allowed_batch_sizes = {2, 4, 8};
  Batcher batcher(p);
  auto servable = std::make_shared<EchoServable>();
  const auto answers = run_queued(batcher, servable, {rows({3, 1}, {1, 2, 3}), rows({2, 1}, {4, 5})});
  EXPECT_EQ(answers[0].shape, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(floats_of(answers[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(floats_of(answers[1]), (std::vector<float>{4, 5}));
  const auto batches = servable->batches();
  ASSERT_EQ(batches.size(), 2u);
  // The lone first request: 1 row padded to 2 with a copy of itself.
  EXPECT_EQ(floats_of(batches[0]), (std::vector<float>{9, 9}));
  // 5 rows padded to 8 with copies of the first row of the last request (TF Serving's choice).
  EXPECT_EQ(batches[1].shape, (std::vector<std::int64_t>{8, 1}));
  EXPECT_EQ(floats_of(batches[1]), (std::vector<float>{1, 2, 3, 4, 5, 4, 4, 4}));
  // More rows than max_batch_size: TF Serving's error.
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument,
                             [&] { batcher.predict(servable, kDefaultSignature, {{"x", rows({9, 1}, std::vector<float>(9))}}); },
                             "9 rows"),
            "Task size 9 is larger than maximum input batch size 8");
}

TEST(BatchingTest, PadVariableLengthInputsPadsEachInputWithItsFirstElement) {
  BatchingParameters p = one_thread(8);
  p.pad_variable_length_inputs = true;
  Batcher batcher(p);
  auto servable = std::make_shared<EchoServable>();
  const auto answers = run_queued(batcher, servable, {rows({1, 2}, {1, 2}), rows({1, 3}, {3, 4, 5})});
  const auto batches = servable->batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(floats_of(batches[1]), (std::vector<float>{1, 2, 1, 3, 4, 5}));
  // Outputs keep the padded shape, split by rows.
  EXPECT_EQ(answers[0].shape, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(floats_of(answers[0]), (std::vector<float>{1, 2, 1}));
  EXPECT_EQ(floats_of(answers[1]), (std::vector<float>{3, 4, 5}));
}

TEST(BatchingTest, WithoutPaddingRequestsOfOtherShapesRunInBatchesOfTheirOwn) {
  Batcher batcher(one_thread(8));
  auto servable = std::make_shared<EchoServable>();
  const auto answers = run_queued(batcher, servable, {rows({1, 2}, {1, 2}), rows({1, 3}, {3, 4, 5})});
  EXPECT_EQ(servable->batches().size(), 3u);
  EXPECT_EQ(answers[0].shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(floats_of(answers[1]), (std::vector<float>{3, 4, 5}));
}

TEST(BatchingTest, ParametersFileReadsAllowedSizesAndRefusesThemAsTfServing) {
  const auto p = parse_batching_parameters(
      "max_batch_size { value: 8 }\nallowed_batch_sizes: [2, 4, 8]\npad_variable_length_inputs: true\n");
  EXPECT_EQ(p.allowed_batch_sizes, (std::vector<std::int64_t>{2, 4, 8}));
  EXPECT_TRUE(p.pad_variable_length_inputs);
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument,
                             [] { parse_batching_parameters("max_batch_size { value: 8 } allowed_batch_sizes: [2, 6]"); },
                             "last entry 6"),
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 6; expected 8");
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument,
                             [] { parse_batching_parameters("max_batch_size { value: 8 } allowed_batch_sizes: [4, 2, 8]"); },
                             "decreasing"),
            "allowed_batch_sizes entries must be monotonically increasing");
  // The default max_batch_size (1000) counts too.
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [] { parse_batching_parameters("allowed_batch_sizes: 64"); },
                             "default max")
                .find("last entry was 64; expected 1000"),
            std::string::npos);
  BatchingParameters bad = one_thread(4);
  bad.allowed_batch_sizes = {2};
  error_message_of(ErrorKind::kInvalidArgument, [&] { Batcher b(bad); }, "a Batcher checks them too");
}

// ---- classify and regress: tf.Examples in JSON -------------------------------------------------

// A regress signature reading features "a" (2 floats) and "b" (1 float, default 7).
Signature example_signature() {
  Signature sig;
  sig.method_name = kRegressMethodName;
  sig.examples.features = {{"a", 2, {}, false}, {"b", 1, {7.0f}, false}};
  return sig;
}

ExamplesRequest parse_examples(const std::string& body) {
  const Signature sig = example_signature();
  return parse_examples_request(body, [&](const std::string&) -> const Signature& { return sig; });
}

TEST(ExamplesJsonTest, FeaturesInSignatureOrderWithContextAndDefaults) {
  const auto req = parse_examples(
      R"({"signature_name": "r", "context": {"b": 3.0, "a": [0.5, 0.5]},
          "examples": [{"a": [1.0, 2.0]}, {"b": -Infinity, "c": "ignored"}, {"a": [5.0, 6.0], "b": [4.0]}]})");
  EXPECT_EQ(req.signature_name, "r");
  EXPECT_EQ(req.rows.shape, (std::vector<std::int64_t>{3, 3}));
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floats_of(req.rows), (std::vector<float>{1, 2, 3, 0.5, 0.5, -inf, 5, 6, 4}));
  // Without a context, "b" takes its default.
  EXPECT_EQ(floats_of(parse_examples(R"({"examples": [{"a": [1.0, 2.0]}]})").rows), (std::vector<float>{1, 2, 7}));
}

TEST(ExamplesJsonTest, ValuesTfServingRefusesAreRefusedWithItsMessages) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"examples": [{"a": null}]})", "Feature: a has element with unexpected JSON type: Null"},
      {R"({"examples": [{"a": [[1.0]]}]})", "Feature: a has element with unexpected JSON type: Array"},
      {R"({"examples": [{"a": {"x": 1}}]})", "Feature: a has element with unexpected JSON type: Object"},
      {R"({"examples": [{"a": 18446744073709551615}]})", "Feature: a has uint64 element. Only int64 is supported."},
      {R"({"examples": [{"a": [1.0, true]}]})", "Unexpected element type in feature: a expecting type: float"},
      {R"({"examples": [{"a": ["x", 1.0]}]})", "Unexpected element type in feature: a expecting type: bytes"},
      {R"({"examples": [{"a": {"b64": "not base64!"}}]})", "Unable to base64 decode"},
      {R"({"examples": [{"a": [1e300, 1.0]}]})", "to float without loss of precision."},
      {R"({"examples": [{"a": [true, false]}]})",
       "Name: <unknown>, Key: a, Index: 0.  Data types don't match. Data type: int64 but expected type: float"},
      {R"({"examples": [{"a": [1.0, 2.0]}, {"a": {"b64": "AAAA"}}]})",
       "Name: <unknown>, Key: a, Index: 1.  Data types don't match. Data type: string but expected type: float"},
      {R"({"examples": [{"a": [1.0]}]})",
       "Name: <unknown>, Key: a, Index: 0.  Number of float values != expected.  Values size: 1 but output shape: [2]"},
      {R"({"examples": [{"b": 1.0}]})", "Name: <unknown>, Feature: a (data type: float) is required but could not be found."},
      {R"({"examples": [{"a": []}]})", "Name: <unknown>, Feature: a (data type: float) is required but could not be found."},
      {R"({"examples": {"a": 1.0}})", "Expecting 'examples' value to be an list/array"},
      {R"({"examples": ["a"]})", "Example must be JSON object but got JSON String"},
      {R"({"context": [1.0], "examples": [{"a": [1.0, 2.0]}]})", "Example must be JSON object but got JSON Array"},
      {R"({"signature_name": 1, "examples": []})", "'signature_name' key must be a string value."},
  };
  for (const auto& [body, expected] : cases)
    EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { parse_examples(body); }, body).find(expected),
              std::string::npos)
        << body << " -> expected " << expected;
}

// A signature of one bytes feature: each example's byte string, from a JSON string as it is or
// from {"b64": ...} decoded; other kinds and counts are parse_example's errors.
TEST(ExamplesJsonTest, ABytesFeatureGivesOneByteStringPerExample) {
  Signature sig;
  sig.method_name = kClassifyMethodName;
  ExampleFeature image;
  image.name = "image";
  image.bytes = true;
  sig.examples.features = {image};
  const auto parse_bytes = [&](const std::string& body) {
    return parse_examples_request(body, [&](const std::string&) -> const Signature& { return sig; });
  };
  const auto req = parse_bytes(R"({"examples": [{"image": {"b64": "AP/+"}}, {"image": ["plain"]}]})");
  EXPECT_EQ(req.bytes, (std::vector<std::string>{std::string("\x00\xff\xfe", 3), "plain"}));
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { parse_bytes(R"({"examples": [{"image": 1.5}]})"); },
                             "a float")
                .find("Name: <unknown>, Key: image, Index: 0.  Data types don't match. Data type: float but expected "
                      "type: string"),
            std::string::npos);
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { parse_bytes(R"({"examples": [{"image": ["a", "b"]}]})"); },
                             "two strings")
                .find("Number of bytes values != expected.  Values size: 2 but output shape: []"),
            std::string::npos);
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { parse_bytes(R"({"examples": [{}]})"); }, "none")
                .find("Feature: image (data type: string) is required but could not be found."),
            std::string::npos);
}

TEST(ExamplesJsonTest, ResultsAreWrittenAsTfServing) {
  const Tensor scores = Tensor::from<float>(DType::kF32, {2, 2}, {0.25f, 0.75f, 1.0f, std::nanf("")});
  EXPECT_EQ(format_classify_response(scores, {"cat", "dog"}),
            R"({"results":[[["cat",0.25],["dog",0.75]],[["cat",1.0],["dog",NaN]]]})");
  EXPECT_EQ(format_classify_response(Tensor::from<float>(DType::kF32, {1}, {2.5f}), {}), R"({"results":[[["",2.5]]]})");
  EXPECT_EQ(format_regress_response(Tensor::from<float>(DType::kF32, {3, 1}, {2.5f, 3.0f, -1e-7f})),
            R"({"results":[2.5,3.0,-1e-07]})");
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { format_regress_response(scores); }, "two columns"),
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got [2,2]");
  error_message_of(ErrorKind::kInvalidArgument, [&] { format_classify_response(scores, {"one"}); }, "one class name");
}

}  // namespace
}  // namespace tensorhub
