// Corners TF Serving users meet: size-1 dimensions of a request kept in the answer, as
// TensorFlow's graph keeps them ([[1], [2]] to half_plus_two answers [[2.5], [3.0]]), through
// the JSON encoding (json_tensor.h) and the servable in process, and through a real
// `tensorhub serve` over REST.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <fstream>

#include "process_util.h"
#include "tensorhub/serve/json_tensor.h"
#include "tensorhub/serve/servable.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
namespace fs = std::filesystem;

const std::string kHalfPlusTwo = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";

// `body` parsed against serving_default of `servable`, run, and answered as the REST API does.
std::string answer(const Servable& servable, const std::string& body) {
  const Signature& sig = servable.signatures().at(kDefaultSignature);
  const PredictRequest request = parse_predict_request(body, [&](const std::string&) -> const Signature& { return sig; });
  return format_predict_response(servable.predict(kDefaultSignature, request.inputs), sig, request.row_format);
}

// A version directory of y = 0.5 x + 2 whose input is `input_shape` per example.
fs::path rescaling_model(const fs::path& dir, const std::string& input_shape) {
  fs::create_directories(dir);
  std::ofstream(dir / "model.json") << R"({"input_shape": )" << input_shape
                                    << R"(, "layers": [{"type": "Rescaling", "scale": 0.5, "offset": 2.0}],
                                          "signature": {"inputs": "x", "outputs": "y"}})";
  return dir;
}

TEST(SizeOneDimensions, AreKeptInTheAnswerAsTfServingKeepsThem) {
  TempDir tmp;
  // half_plus_two takes one float per example ([-1]); its examples sent as [1] lists keep
  // their nesting, in both formats.
  const auto hpt = load_servable(kHalfPlusTwo + "/00000123");
  EXPECT_EQ(answer(*hpt, R"({"instances": [[1], [2]]})"), R"({"predictions":[[2.5],[3.0]]})");
  EXPECT_EQ(answer(*hpt, R"({"inputs": [[1], [2]]})"), R"({"outputs":[[2.5],[3.0]]})");
  EXPECT_EQ(answer(*hpt, R"({"instances": [[[1]], [[2]]]})"), R"({"predictions":[[[2.5]],[[3.0]]]})");
  EXPECT_EQ(answer(*hpt, R"({"instances": [1, 2]})"), R"({"predictions":[2.5,3.0]})");
  // A model whose input is [-1, 1]: the same answers, [1, 2] included.
  const auto column = load_servable(rescaling_model(tmp.path() / "column" / "1", "[1]"));
  EXPECT_EQ(column->signatures().at(kDefaultSignature).inputs.at("x").shape, (std::vector<std::int64_t>{-1, 1}));
  EXPECT_EQ(answer(*column, R"({"instances": [[1], [2]]})"), R"({"predictions":[[2.5],[3.0]]})");
  EXPECT_EQ(answer(*column, R"({"inputs": [[1], [2]]})"), R"({"outputs":[[2.5],[3.0]]})");
  EXPECT_EQ(answer(*column, R"({"instances": [1, 2]})"), R"({"predictions":[2.5,3.0]})");
}

TEST(SizeOneDimensions, AreKeptByTheServerOverRest) {
  TempDir tmp;
  const std::string log = (tmp.path() / "server.log").string();
  const pid_t server = spawn({kTensorhub, "serve", "--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo,
                              "--rest_api_host", "127.0.0.1", "--rest_api_port", "0", "--port", "0"},
                             log);
  const int port = port_from_log(log, R"(REST API on http://127\.0\.0\.1:(\d+))");
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);
  std::string body;
  EXPECT_TRUE(eventually([&] {
    const auto r = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [[1], [2]]})", "application/json");
    if (r && r->status == 200) body = r->body;
    return !body.empty();
  }, 60000ms)) << read_text(log);
  EXPECT_EQ(body, R"({"predictions":[[2.5],[3.0]]})");
  kill(server, SIGTERM);
  EXPECT_EQ(wait_exit(server), 0) << read_text(log);
}

}  // namespace
}  // namespace tensorhub
