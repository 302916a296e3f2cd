// The model server as a real process, spoken to over HTTP: TF Serving's documented
// half_plus_two exchanges, its error cases, the demo's MLP from files and from the hub,
// a TorchScript model written by PyTorch during the test, version polling, a model config
// file with labels, batching, the body size limit, metrics and SIGTERM; {"b64": ...} bytes
// inputs, request deadlines (--rest_api_timeout_in_ms) and draining a request in flight;
// a busy port, hub queries that match nothing, TENSORHUB_URI / TENSORHUB_PROJECT, versions
// that fail to load and are retried, and sources that are broken at start or later.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/socket.h>

#include <cmath>
#include <fstream>
#include <future>
#include <thread>

#include "process_util.h"
#include "tensorhub/serve/json_tensor.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
using nlohmann::json;

const std::string kHalfPlusTwo = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";

// A `tensorhub serve` process on a free port; stopped with SIGTERM on destruction.
class ServerProcess {
 public:
  // `port` 0: a free one.
  ServerProcess(std::vector<std::string> args, const std::string& log, int port = 0)
      : port_(port ? port : free_port()) {
    args.insert(args.begin(), {kTensorhub, "serve", "--rest_api_port", std::to_string(port_)});
    pid_ = spawn(args, log);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(30, 0);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      wait_exit(pid_);
    }
  }
  // Waits until `model` has an AVAILABLE version (optionally a given one).
  bool wait_available(const std::string& model, const std::string& version = "") {
    return eventually([&] {
      auto r = client_->Get(("/v1/models/" + model).c_str());
      if (!r) last_error_ = httplib::to_string(r.error());
      if (!r || r->status != 200) return false;
      const json status = json::parse(r->body);  // named: a temporary would dangle in the loop
      for (const auto& s : status["model_version_status"])
        if (s["state"] == "AVAILABLE" && (version.empty() || s["version"] == version)) return true;
      return false;
    }, 60000ms);
  }
  std::string last_error_;
  httplib::Result post(const std::string& path, const std::string& body,
                       const std::string& content_type = "application/json") {
    return client_->Post(path.c_str(), body, content_type.c_str());
  }
  httplib::Result get(const std::string& path) { return client_->Get(path.c_str()); }
  httplib::Client& client() { return *client_; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  void forget() { pid_ = -1; }

 private:
  int port_;
  pid_t pid_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

class ServeTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string log = (dir.path() / "server.log").string();

  void expect_reply(ServerProcess& s, const std::string& path, const std::string& body, int status,
                    const std::string& expected_substring) {
    auto r = s.post(path, body);
    ASSERT_TRUE(r) << "no reply; server log:\n" << read_text(log);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    EXPECT_NE(r->body.find(expected_substring), std::string::npos) << body << " -> " << r->body;
    if (status != 200) {
      EXPECT_TRUE(json::parse(r->body).contains("error")) << r->body;
    }
  }
};

TEST_F(ServeTest, HalfPlusTwoAnswersTheDocumentedExchanges) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string predict = "/v1/models/half_plus_two:predict";
  // https://www.tensorflow.org/tfx/serving/api_rest and TF Serving's docker example.
  auto r = s.post(predict, R"({"instances": [1.0, 2.0, 5.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"predictions": [2.5, 3.0, 4.5]})"));
  r = s.post(predict, R"({"instances": [10.0, 2.0, 5.0]})");
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"predictions": [7.0, 3.0, 4.5]})"));
  r = s.post(predict, R"({"inputs": [3.0, 4.0]})");
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"outputs": [3.5, 4.0]})"));
  // The same through the version and through signature_name.
  r = s.post("/v1/models/half_plus_two/versions/123:predict",
             R"({"signature_name": "serving_default", "instances": [1.0]})");
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");

  r = s.get("/v1/models/half_plus_two");
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"model_version_status": [{"version": "123", "state": "AVAILABLE",
      "status": {"error_code": "OK", "error_message": ""}}]})"));
  r = s.get("/v1/models/half_plus_two/metadata");
  const json meta = json::parse(r->body);
  EXPECT_EQ(meta["model_spec"]["version"], "123");
  const json sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["inputs"]["x"]["dtype"], "DT_FLOAT");
  EXPECT_EQ(sig["inputs"]["x"]["tensor_shape"]["dim"][0]["size"], "-1");
  EXPECT_EQ(sig["outputs"]["y"]["dtype"], "DT_FLOAT");
  EXPECT_EQ(sig["method_name"], "tensorflow/serving/predict");
}

TEST_F(ServeTest, BadRequestsGetTfServingErrorsAndTheServerKeepsServing) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo, "--max_body_mb", "1"}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string p = "/v1/models/half_plus_two:predict";
  expect_reply(s, p, "", 400, "JSON Parse error: The document is empty");
  expect_reply(s, p, "{\"instances\": [1.0,", 400, "JSON Parse error");
  expect_reply(s, p, R"({"instances": [1.0], "inputs": [1.0]})", 400,
               "expecting only one of 'inputs' or 'instances' keys to exist");
  expect_reply(s, p, R"({"foo": 1})", 400, "Missing 'inputs' or 'instances' key");
  expect_reply(s, p, R"({"instances": [[1.0], [2.0, 3.0]]})", 400, "Expecting tensor size: 1 but got: 2");
  expect_reply(s, p, R"({"instances": ["one"]})", 400, "is not of expected type: float");
  expect_reply(s, p, R"({"instances": [nan]})", 400, "JSON Parse error");  // NaN is a number, nan is not
  expect_reply(s, p, R"({"instances": [1e300]})", 400, "without loss of precision");
  expect_reply(s, p, R"({"instances": [1e999]})", 400, "JSON Parse error");  // found by the fuzzer
  expect_reply(s, p, R"({"instances": []})", 400, "No values in 'instances' array");
  expect_reply(s, p, R"({"signature_name": "nope", "instances": [1.0]})", 400, "nope");
  expect_reply(s, p, std::string(100, '[') + std::string(100, ']'), 400, "nesting deeper");
  expect_reply(s, "/v1/models/unknown:predict", R"({"instances": [1.0]})", 404, "unknown");
  expect_reply(s, "/v1/models/half_plus_two/versions/9:predict", R"({"instances": [1.0]})", 404, "9");
  expect_reply(s, "/v1/models/half_plus_two/labels/stable:predict", R"({"instances": [1.0]})", 400,
               "Unrecognized servable version label: stable");
  // A body over the limit (1 MiB here; 64 MiB by default) is refused with a clear error.
  expect_reply(s, p, "{\"instances\": [" + std::string(2 << 20, ' ') + "1.0]}", 413,
               "larger than the server's limit of 1 MiB (--max_body_mb)");
  // ... and the server still answers.
  auto r = s.post(p, R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
  // Metrics counted them by status.
  r = s.get("/monitoring/prometheus/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find(R"(:tensorflow:serving:request_count{model_name="half_plus_two",status="INVALID_ARGUMENT"} 13)"),
            std::string::npos) << r->body;
  EXPECT_NE(r->body.find(":tensorflow:serving:request_latency_bucket{model_name=\"half_plus_two\""), std::string::npos);
}

// The demo's MLP (784 -> 10 classes) with known weights: served from a version directory and
// from a hub query, with 784 floats or a 28x28 list per instance.
class MlpServeTest : public ServeTest {
 protected:
  void SetUp() override {
    config_ = mlp_config(16, 16);
    config_["seed"] = 7;
    model_ = std::make_unique<Model>(Model::from_config(config_));
    image_.resize(784);
    for (int i = 0; i < 784; ++i) image_[i] = static_cast<float>((i * 37) % 255) / 255.0f;
    const Tensor x = Tensor::from<float>(DType::kF32, {1, 784}, image_);
    expected_ = model_->predict(x);
    // The served model ends in softmax: predict() gives logits, so apply softmax here.
    double total = 0;
    for (int c = 0; c < 10; ++c) total += std::exp(expected_.as<float>()[c]);
    for (int c = 0; c < 10; ++c) probs_.push_back(std::exp(expected_.as<float>()[c]) / total);
  }

  // The served MLP ends in a softmax (class probabilities).
  json served_config() const {
    json c = model_->config();
    c["layers"].back()["activation"] = "softmax";
    return c;
  }

  void expect_probabilities(const json& row) {
    ASSERT_EQ(row.size(), 10u) << row;
    double sum = 0;
    for (int c = 0; c < 10; ++c) {
      EXPECT_NEAR(row[c].get<double>(), probs_[c], 1e-5);
      sum += row[c].get<double>();
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }

  json config_;
  std::unique_ptr<Model> model_;
  std::vector<float> image_;
  Tensor expected_;
  std::vector<double> probs_;
};

TEST_F(MlpServeTest, FromAVersionDirectoryWithFlatOr28x28Instances) {
  const auto base = dir.path() / "mlp";
  std::filesystem::create_directories(base / "1");
  std::ofstream(base / "1" / "model.json") << served_config().dump();
  write_safetensors(base / "1" / "weights.safetensors", model_->weights());
  ServerProcess s({"--model_name", "mlp", "--model_base_path", base.string()}, log);
  ASSERT_TRUE(s.wait_available("mlp")) << read_text(log);

  json flat = {{"instances", {image_}}};
  auto r = s.post("/v1/models/mlp:predict", flat.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  expect_probabilities(json::parse(r->body)["predictions"][0]);

  json square = json::array();
  for (int i = 0; i < 28; ++i) square.push_back(std::vector<float>(image_.begin() + 28 * i, image_.begin() + 28 * (i + 1)));
  r = s.post("/v1/models/mlp:predict", json({{"instances", {square, square}}}).dump());
  ASSERT_EQ(r->status, 200) << r->body;
  const json preds = json::parse(r->body)["predictions"];
  ASSERT_EQ(preds.size(), 2u);
  expect_probabilities(preds[1]);

  expect_reply(s, "/v1/models/mlp:predict", R"({"instances": [[1.0, 2.0, 3.0]]})", 400, "784");

  // A new version directory is picked up; the old one unloads once the new is AVAILABLE.
  std::filesystem::create_directories(base / "2");
  std::ofstream(base / "2" / "model.json") << served_config().dump();
  write_safetensors(base / "2" / "weights.safetensors", model_->weights());
  ASSERT_TRUE(s.wait_available("mlp", "2")) << read_text(log);
  ASSERT_TRUE(eventually([&] {
    auto st = json::parse(s.get("/v1/models/mlp/versions/1")->body);
    return st["model_version_status"][0]["state"] == "END";
  }));
}

TEST_F(MlpServeTest, FromTheHubTheBestModelAndABetterOneLater) {
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  Hub hub(uri, "p");
  const auto first = hub.save_model(served_config(), model_->weights(), "mlp", {{"test_accuracy", 0.8}});
  hub.save_model(served_config(), model_->weights(), "mlp", {{"test_accuracy", 0.7}});
  ServerProcess s({"--hub", uri, "--project", "p", "--hub_model", "mlp", "--hub_sort", "test_accuracy:-1",
                   "--file_system_poll_wait_seconds", "0.2"},
                  log);
  ASSERT_TRUE(s.wait_available("mlp", std::to_string(first))) << read_text(log);
  auto r = s.post("/v1/models/mlp:predict", json({{"instances", {image_}}}).dump());
  ASSERT_EQ(r->status, 200) << r->body;
  expect_probabilities(json::parse(r->body)["predictions"][0]);
  const auto better = hub.save_model(served_config(), model_->weights(), "mlp", {{"test_accuracy", 0.9}});
  EXPECT_TRUE(s.wait_available("mlp", std::to_string(better))) << read_text(log);
}

TEST_F(ServeTest, TorchScriptModelWrittenByPyTorch) {
  const auto base = dir.path() / "ts";
  std::filesystem::create_directories(base / "1");
  const auto script = dir.path() / "export.py";
  std::ofstream(script) << "import torch, sys\n"
                           "class M(torch.nn.Module):\n"
                           "    def forward(self, x):\n"
                           "        return x * 3.0 - 1.0\n"
                           "torch.jit.save(torch.jit.script(M()), sys.argv[1])\n";
  run_command("/usr/bin/python3 " + script.string() + " " + (base / "1" / "model.pt").string());
  ServerProcess s({"--model_name", "ts", "--model_base_path", base.string()}, log);
  ASSERT_TRUE(s.wait_available("ts")) << read_text(log);
  auto r = s.post("/v1/models/ts:predict", R"({"instances": [[1.0, 2.0], [0.5, 0.0]]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"predictions": [[2.0, 5.0], [0.5, -1.0]]})")) << r->body;
}

TEST_F(ServeTest, ModelConfigFileWithLabelsAndBatchingUnderConcurrentLoad) {
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list {\n"
                           "  config {\n"
                           "    name: 'hpt'\n"
                           "    base_path: '" << kHalfPlusTwo << "'\n"
                           "    model_platform: 'tensorflow'\n"
                           "    model_version_policy { specific { versions: 123 } }\n"
                           "    version_labels { key: 'stable' value: 123 }\n"
                           "  }\n"
                           "}\n";
  const auto batching = dir.path() / "batching.config";
  std::ofstream(batching) << "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 2000 }\n";
  ServerProcess s({"--model_config_file", config.string(), "--enable_batching", "--batching_parameters_file",
                   batching.string()},
                  log);
  ASSERT_TRUE(s.wait_available("hpt")) << read_text(log);
  // 8 clients at once: every answer must be its own (batches are split back correctly).
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", s.port());  // one client per thread: clients are not thread-safe
      for (int i = 0; i < 25; ++i) {
        const double x = c * 100 + i;
        auto r = client.Post("/v1/models/hpt/labels/stable:predict", json({{"instances", {x, x + 1}}}).dump(),
                             "application/json");
        if (!r || r->status != 200 || json::parse(r->body) != json({{"predictions", {0.5 * x + 2, 0.5 * (x + 1) + 2}}}))
          ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // A bad config file is refused with the line of the error.
  std::ofstream(dir.path() / "bad.config") << "model_config_list { config { nme: 'x' } }";
  const auto out = dir.path() / "bad.log";
  const pid_t p = spawn({kTensorhub, "serve", "--model_config_file", (dir.path() / "bad.config").string()}, out.string());
  EXPECT_EQ(wait_exit(p), 1);
  EXPECT_NE(read_text(out).find("line 1"), std::string::npos) << read_text(out);
}

TEST_F(ServeTest, SigtermDrainsAndExits) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log) << s.last_error_;
  kill(s.pid(), SIGTERM);
  EXPECT_EQ(wait_exit(s.pid()), 0);
  s.forget();
  EXPECT_NE(read_text(log).find("draining"), std::string::npos);
}

// ---- TF Serving parity: b64 bytes, deadlines, drain ----------------------------------------

// Base64 by OpenSSL's encoder directly, independent of the server's wrapper.
std::string openssl_base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

TEST(Base64Test, Rfc4648VectorsPaddedAndUnpaddedAndInvalidText) {
  // RFC 4648 section 10 test vectors.
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), plain) << encoded;
    std::string unpadded = encoded;
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
    EXPECT_EQ(base64_decode(unpadded), plain) << unpadded;  // absl::Base64Unescape takes both
  }
  // Bytes that are not text: 0x00 0xff 0xfe -> "AP/+" (Python: base64.b64encode(b"\x00\xff\xfe")).
  EXPECT_EQ(base64_decode("AP/+"), std::string("\x00\xff\xfe", 3));
  for (const char* bad : {"Zm9v!", "Z", "Zm=v", "Zm9v====", "Zg=", "Zm 9v", "-_8="})
    EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { base64_decode(bad); }, bad),
              "Unable to base64 decode");
}

TEST(JsonTensorTest, StringOutputsNamedBytesAreB64AndOthersJsonStrings) {
  // TF Serving's json_tensor.cc: a DT_STRING output whose name ends in "_bytes" is written as
  // {"b64": ...}, any other DT_STRING output as a JSON string.
  NamedStringTensors strings;
  strings["label"] = BytesTensor{{2}, {"foo", "ab\"c"}};
  strings["thumb_bytes"] = BytesTensor{{2}, {"foo", std::string("\x00\xff\xfe", 3)}};
  NamedTensors numbers;
  numbers["score"] = Tensor::from<float>(DType::kF32, {2}, {0.5f, 3.0f});
  const Signature sig;
  EXPECT_EQ(format_predict_response(numbers, sig, true, strings),
            R"({"predictions":[{"label":"foo","score":0.5,"thumb_bytes":{"b64":"Zm9v"}},)"
            R"({"label":"ab\"c","score":3.0,"thumb_bytes":{"b64":"AP/+"}}]})");
  EXPECT_EQ(format_predict_response({}, sig, false, {{"thumb_bytes", strings["thumb_bytes"]}}),
            R"({"outputs":[{"b64":"Zm9v"},{"b64":"AP/+"}]})");
}

// The MLP with a DT_STRING input: one 28x28 uint8 image per example, decoded "raw_uint8" and
// scaled by 1/255 (the float image_ of the fixture is exactly byte / 255); also classified from
// tf.Examples whose bytes feature goes through the same decoding step.
TEST_F(MlpServeTest, B64ImageBytesPredictAsTheSameImageInFloats) {
  const auto base = dir.path() / "mlp_bytes";
  std::filesystem::create_directories(base / "1");
  json config = served_config();
  config["signature"] = {{"inputs", "image_bytes"}, {"outputs", "probabilities"}, {"input_dtype", "DT_STRING"},
                         {"decode", "raw_uint8"}, {"decode_scale", 1.0 / 255.0}};
  config["signatures"] = {{"classify_images", {{"method_name", "tensorflow/serving/classify"},
                                               {"features", {{{"name", "image"}, {"dtype", "string"}}}}}}};
  std::ofstream(base / "1" / "model.json") << config.dump();
  write_safetensors(base / "1" / "weights.safetensors", model_->weights());
  ServerProcess s({"--model_name", "mlp", "--model_base_path", base.string(), "--enable_batching"}, log);
  ASSERT_TRUE(s.wait_available("mlp")) << read_text(log);

  std::string bytes(784, '\0');
  for (int i = 0; i < 784; ++i) bytes[i] = static_cast<char>((i * 37) % 255);  // image_[i] * 255
  const std::string b64 = openssl_base64(bytes);
  const std::string p = "/v1/models/mlp:predict";
  // Row format, plain and named; columnar format.
  for (const std::string& body : {json({{"instances", {{{"b64", b64}}}}}).dump(),
                                  json({{"instances", {{{"image_bytes", {{"b64", b64}}}}}}}).dump()}) {
    auto r = s.post(p, body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json preds = json::parse(r->body)["predictions"];
    ASSERT_EQ(preds.size(), 1u) << r->body;
    expect_probabilities(preds[0]);
  }
  auto r = s.post(p, json({{"inputs", {{"image_bytes", {{{"b64", b64}}, {{"b64", b64}}}}}}}).dump());
  ASSERT_EQ(r->status, 200) << r->body;
  const json outputs = json::parse(r->body)["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << r->body;
  expect_probabilities(outputs[1]);

  // The same images as tf.Examples with a bytes feature, classified through the decoding step.
  r = s.post("/v1/models/mlp:classify", json({{"examples", {{{"image", {{"b64", b64}}}}}}}).dump());
  ASSERT_EQ(r->status, 200) << r->body;
  const json classes = json::parse(r->body)["results"][0];
  ASSERT_EQ(classes.size(), 10u) << r->body;
  for (int c = 0; c < 10; ++c) EXPECT_NEAR(classes[c][1].get<double>(), probs_[c], 1e-5) << r->body;
  expect_reply(s, "/v1/models/mlp:classify", R"({"examples": [{"image": 1.0}]})", 400,
               "Data types don't match. Data type: float but expected type: string");
  expect_reply(s, "/v1/models/mlp:classify", json({{"examples", {{{"image", {{"b64", openssl_base64("abc")}}}}}}}).dump(),
               400, "has 3 bytes");

  expect_reply(s, p, R"({"instances": [{"b64": "not base64!"}]})", 400, "Unable to base64 decode");
  expect_reply(s, p, json({{"instances", {{{"b64", openssl_base64(bytes.substr(0, 100))}}}}}).dump(), 400,
               "has 100 bytes");
  expect_reply(s, p, R"({"instances": [1.0]})", 400, "is not of expected type: string");
  // {"b64": 1} is no b64 object: as an instance it reads as named inputs (as in TF Serving).
  expect_reply(s, p, R"({"instances": [{"b64": 1}]})", 400, "does not have named input: b64");
  expect_reply(s, p, R"({"inputs": {"image_bytes": [{"b64": 1}]}})", 400, "not formatted correctly for base64 data");

  r = s.get("/v1/models/mlp/metadata");
  ASSERT_TRUE(r);
  const json sig = json::parse(r->body)["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["inputs"]["image_bytes"]["dtype"], "DT_STRING") << r->body;
  EXPECT_EQ(sig["inputs"]["image_bytes"]["name"], "image_bytes:0");
  EXPECT_EQ(sig["inputs"]["image_bytes"]["tensor_shape"]["dim"].size(), 1u);
  EXPECT_EQ(sig["outputs"]["probabilities"]["dtype"], "DT_FLOAT");
}

// A file of TF Serving's BatchingParameters.
std::string batching_file(const TempDir& dir, int max_batch_size, long batch_timeout_micros) {
  const auto path = dir.path() / "batching.config";
  std::ofstream(path) << "max_batch_size { value: " << max_batch_size << " }\nbatch_timeout_micros { value: "
                      << batch_timeout_micros << " }\n";
  return path.string();
}

// A lone request waits for its batch (10 s) longer than its deadline (1 s): 504. A full batch
// runs at once and is answered.
TEST_F(ServeTest, RequestPastItsDeadlineGets504AndTheServerKeepsServing) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo, "--enable_batching",
                   "--batching_parameters_file", batching_file(dir, 4, 10'000'000), "--rest_api_timeout_in_ms",
                   "1000"},
                  log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string p = "/v1/models/half_plus_two:predict";
  expect_reply(s, p, R"({"instances": [1.0]})", 504, "Deadline exceeded");
  auto r = s.post(p, R"({"instances": [1.0, 2.0, 5.0, 10.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"predictions": [2.5, 3.0, 4.5, 7.0]})"));
  r = s.get("/monitoring/prometheus/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find(R"(:tensorflow:serving:request_count{model_name="half_plus_two",status="DEADLINE_EXCEEDED"} 1)"),
            std::string::npos) << r->body;
  // A negative deadline is refused at start, as a wrong command line (exit 2).
  const auto out = dir.path() / "bad.log";
  const pid_t bad = spawn({kTensorhub, "serve", "--model_base_path", kHalfPlusTwo, "--rest_api_timeout_in_ms", "-1"},
                          out.string());
  EXPECT_EQ(wait_exit(bad), 2);
  EXPECT_NE(read_text(out).find("--rest_api_timeout_in_ms"), std::string::npos) << read_text(out);
}

// SIGTERM while a request waits in the batcher (3 s batch timeout): the request is still
// answered, new connections are refused, and the server exits 0.
TEST_F(ServeTest, SigtermDrainsARequestInFlight) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo, "--enable_batching",
                   "--batching_parameters_file", batching_file(dir, 64, 3'000'000)},
                  log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  auto in_flight = std::async(std::launch::async, [&] {
    httplib::Client client("127.0.0.1", s.port());
    client.set_read_timeout(30, 0);
    auto r = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0, 5.0]})", "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, httplib::to_string(r.error()));
  });
  std::this_thread::sleep_for(1s);  // the request is in the batcher for 3 s
  kill(s.pid(), SIGTERM);
  EXPECT_TRUE(eventually([&] {
    httplib::Client probe("127.0.0.1", s.port());
    probe.set_connection_timeout(1, 0);
    auto r = probe.Get("/v1/models/half_plus_two");
    return !r && r.error() == httplib::Error::Connection;
  }, 10000ms)) << "the server still accepts connections after SIGTERM";
  const auto [status, body] = in_flight.get();
  EXPECT_EQ(status, 200) << body << "\n" << read_text(log);
  EXPECT_EQ(json::parse(body, nullptr, false), json::parse(R"({"predictions": [2.5, 4.5]})")) << body;
  EXPECT_EQ(wait_exit(s.pid()), 0);
  s.forget();
  EXPECT_NE(read_text(log).find("draining"), std::string::npos);
}

// ---- start-up and sources: issue 15 ---------------------------------------------------------

// The exit code of `pid` if it exits within `limit`; otherwise it is killed and -1 returned
// (a server that should have refused to start must not hang the test).
int exit_code_within(pid_t pid, std::chrono::milliseconds limit = 60000ms) {
  int status = 0;
  const bool exited = eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// How many times `text` occurs in `haystack`.
int count_of(const std::string& haystack, const std::string& text) {
  int n = 0;
  for (auto at = haystack.find(text); at != std::string::npos; at = haystack.find(text, at + 1)) ++n;
  return n;
}

// The "error" of a JSON error reply.
std::string error_of(const httplib::Result& r) {
  if (!r) return "no reply: " + httplib::to_string(r.error());
  const json body = json::parse(r->body, nullptr, false);
  return body.is_object() && body.contains("error") ? body["error"].get<std::string>() : r->body;
}

// An environment variable set for the test's scope (servers spawned meanwhile inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// A copy of half_plus_two's version 123 under `base`/`version`.
void copy_half_plus_two(const std::filesystem::path& base, const std::string& version) {
  std::filesystem::create_directories(base / version);
  std::filesystem::copy_file(kHalfPlusTwo + "/00000123/model.json", base / version / "model.json",
                             std::filesystem::copy_options::overwrite_existing);
}

// Two servers on one port would each get about half the connections (SO_REUSEPORT): the
// second must refuse to start, and the first keep every request.
TEST_F(ServeTest, ASecondServerOnABusyPortExitsAndTheFirstKeepsEveryRequest) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const auto out = dir.path() / "second.log";
  const pid_t second = spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(s.port()), "--model_name",
                              "other", "--model_base_path", kHalfPlusTwo},
                             out.string());
  EXPECT_EQ(exit_code_within(second), 1) << read_text(out);
  EXPECT_NE(read_text(out).find("cannot listen on 127.0.0.1:" + std::to_string(s.port()) +
                                " (in use? choose another --rest_api_port)"),
            std::string::npos)
      << read_text(out);
  for (int i = 0; i < 20; ++i) {
    httplib::Client fresh("127.0.0.1", s.port());  // a new connection each time
    auto r = fresh.Get("/v1/models/half_plus_two");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
}

// `serve --hub_model mlpp` (a typo) starts, warns, and its status says which query matched
// nothing; the model is served once one by that name is saved.
TEST_F(MlpServeTest, AHubQueryThatMatchesNothingWarnsAndSaysSoInTheStatus) {
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  Hub hub(uri, "p");
  hub.save_model(served_config(), model_->weights(), "mlp", {{"test_accuracy", 0.8}});
  ServerProcess s({"--hub", uri, "--project", "p", "--hub_model", "mlpp", "--file_system_poll_wait_seconds", "0.2"},
                  log);
  ASSERT_TRUE(eventually([&] {
    auto r = s.get("/v1/models/mlpp");
    return r && r->status == 404;
  })) << read_text(log);
  const std::string query = "hub query {\"model_name\":\"mlpp\"} sorted by time:-1 in project p of " + uri;
  EXPECT_EQ(error_of(s.get("/v1/models/mlpp")),
            "Could not find any versions of model mlpp: " + query +
                " matched no model: check --hub_model, --hub_filter, --project and --hub (tensorhub model list shows "
                "the models there)");
  auto r = s.post("/v1/models/mlpp:predict", json({{"instances", {image_}}}).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(error_of(r).find(query + " matched no model"), std::string::npos) << r->body;
  const auto id = hub.save_model(served_config(), model_->weights(), "mlpp", {});
  ASSERT_TRUE(s.wait_available("mlpp", std::to_string(id))) << read_text(log);
  EXPECT_EQ(count_of(read_text(log), "model mlpp has nothing to serve: " + query + " matched no model"), 1)
      << read_text(log);
}

// README: every command takes its hub from TENSORHUB_URI and its project from
// TENSORHUB_PROJECT. For serve the hub is only read with --hub_model: a server of files
// ignores TENSORHUB_URI (and never creates a hub there).
TEST_F(MlpServeTest, TheHubAndProjectComeFromTheEnvironmentWhenNotGiven) {
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  const auto id = Hub(uri, "p").save_model(served_config(), model_->weights(), "mlp", {});
  {
    ScopedEnv hub_env("TENSORHUB_URI", uri), project_env("TENSORHUB_PROJECT", "p");
    ServerProcess s({"--hub_model", "mlp"}, log);
    ASSERT_TRUE(s.wait_available("mlp", std::to_string(id))) << read_text(log);
  }
  const auto never = dir.path() / "never.db";
  ScopedEnv hub_env("TENSORHUB_URI", "sqlite://" + never.string());
  const auto files_log = (dir.path() / "files.log").string();
  ServerProcess files({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, files_log);
  ASSERT_TRUE(files.wait_available("half_plus_two")) << read_text(files_log);
  EXPECT_FALSE(std::filesystem::exists(never));
}

// `cp -r` deploys a version directory before its files: the failed load is END with its
// error, and is retried on the following polls until the files are there.
TEST_F(ServeTest, AVersionDirectoryFilledAfterItAppearedIsLoadedOnALaterPoll) {
  const auto base = dir.path() / "hpt";
  std::filesystem::create_directories(base / "1");
  ServerProcess s({"--model_name", "hpt", "--model_base_path", base.string(), "--file_system_poll_wait_seconds", "0.2"},
                  log);
  ASSERT_TRUE(eventually([&] {
    auto r = s.get("/v1/models/hpt");
    return r && r->status == 200 && json::parse(r->body)["model_version_status"][0]["state"] == "END";
  })) << read_text(log);
  const json st = json::parse(s.get("/v1/models/hpt/versions/1")->body)["model_version_status"][0];
  EXPECT_NE(st["status"]["error_message"].get<std::string>().find("no model in " + (base / "1").string()),
            std::string::npos)
      << st;
  // TF Serving's status names the load error's kind (ToStatusProto), not UNKNOWN.
  EXPECT_EQ(st["status"]["error_code"], "NOT_FOUND") << st;
  // TF Serving answers 404 with its text, here followed by why nothing is loaded (also while
  // the load is retried, every 0.2 s here).
  auto r = s.post("/v1/models/hpt:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(error_of(r).rfind("Servable not found for request: Latest(hpt): no version is loaded: version 1 is ", 0), 0u)
      << r->body;
  EXPECT_NE(error_of(r).find(": NotFound: no model in"), std::string::npos) << r->body;
  r = s.post("/v1/models/hpt/versions/1:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(error_of(r).rfind("Servable not found for request: Specific(hpt, 1): it failed to load: NotFound: no "
                              "model in",
                              0),
            0u)
      << r->body;

  copy_half_plus_two(base, "1");
  ASSERT_TRUE(s.wait_available("hpt", "1")) << read_text(log);
  r = s.post("/v1/models/hpt:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
  EXPECT_EQ(count_of(read_text(log), "version 1 failed to load"), 1) << read_text(log);
  // At warn level, so that --log-level warn still shows it.
  EXPECT_EQ(count_of(read_text(log), " warning model hpt version 1 failed to load"), 1) << read_text(log);
}

// Every source broken at start: serve exits 1 naming each source and its error, and creates
// nothing. A hub URI's password never shows.
// `curl -X POST`: no Content-Length, no Transfer-Encoding, so no body (RFC 9112 6.3): TF
// Serving's answer for an empty document, at once (httplib waited 5 s for a body, then said
// it could not be read).
TEST_F(ServeTest, APostWithoutABodyIsAnEmptyDocument) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string reply = raw_http_exchange(
      s.port(), "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("JSON Parse error: The document is empty"), std::string::npos) << reply;
}

TEST_F(ServeTest, ServeRefusesToStartWhenEverySourceIsBroken) {
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list { config { name: 'a' base_path: '" << (dir.path() / "missing").string()
                        << "' } }";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expected;
    int exit_code = 1;  // 2: the command line is wrong (README's exit codes)
  };
  const std::string typo = (dir.path() / "typo.db").string();
  const std::string no_dir = (dir.path() / "no_dir" / "hub.db").string();
  const std::string pg = "postgresql://serve:s3cret@127.0.0.1:" + std::to_string(free_port()) + "/hub";
  const std::vector<Case> cases = {
      {{"--hub", "sqlite://" + typo, "--hub_model", "mlp"},
       {"no model can be served, every source failed:", "model mlp: hub query", "no hub at sqlite://" + typo}},
      {{"--hub", "sqlite://" + no_dir, "--hub_model", "mlp"}, {"model mlp: hub query", "no hub at sqlite://" + no_dir}},
      {{"--hub", pg, "--hub_model", "mlp"}, {"model mlp: hub query", "cannot connect to PostgreSQL hub"}},
      {{"--model_config_file", config.string()},
       {"model a: base path " + (dir.path() / "missing").string(), "is not a directory"}},
      {{"--model_base_path", (dir.path() / "missing").string()}, {"model default: base path", "is not a directory"}},
      {{"--hub", "sqlite://" + typo}, {"--hub needs --hub_model"}, 2},
      {{"--hub_model", "mlp", "--model_base_path", kHalfPlusTwo}, {"give only one of"}, 2},
      {{"--model_name", "x"}, {"give --model_base_path (with --model_name)"}, 2},
      {{"--model_config_file", (dir.path() / "nope.config").string()},
       {"--model_config_file " + (dir.path() / "nope.config").string() + ": "}},
      {{"--model_base_path", kHalfPlusTwo, "--enable_batching", "--batching_parameters_file",
        (dir.path() / "nope.txt").string()},
       {"--batching_parameters_file " + (dir.path() / "nope.txt").string() + ": "}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto out = dir.path() / ("case" + std::to_string(i) + ".log");
    std::vector<std::string> args = {kTensorhub, "serve", "--rest_api_port", std::to_string(free_port())};
    args.insert(args.end(), cases[i].args.begin(), cases[i].args.end());
    EXPECT_EQ(exit_code_within(spawn(args, out.string())), cases[i].exit_code) << i << ": " << read_text(out);
    for (const auto& e : cases[i].expected) EXPECT_NE(read_text(out).find(e), std::string::npos) << i << ": " << read_text(out);
    EXPECT_EQ(read_text(out).find("s3cret"), std::string::npos) << read_text(out);
  }
  EXPECT_FALSE(std::filesystem::exists(typo));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no_dir"));
}

// One broken source among good ones: the server starts, says so once (not every poll), answers
// 503 with the error for that model, and serves it once its base path appears.
TEST_F(ServeTest, ABrokenSourceAmongGoodOnesWarnsOnceAndIsRetried) {
  const auto later = dir.path() / "later";
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list {\n  config { name: 'hpt' base_path: '" << kHalfPlusTwo
                        << "' }\n  config { name: 'later' base_path: '" << later.string() << "' }\n}\n";
  ServerProcess s({"--model_config_file", config.string(), "--file_system_poll_wait_seconds", "0.2"}, log);
  ASSERT_TRUE(s.wait_available("hpt")) << read_text(log);
  auto r = s.get("/v1/models/later");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(error_of(r).find("cannot read its source, base path " + later.string()), std::string::npos) << r->body;
  std::this_thread::sleep_for(1500ms);  // several poll intervals: polled every 0.2 s, it would log ~7 times
  copy_half_plus_two(later, "1");
  ASSERT_TRUE(s.wait_available("later", "1")) << read_text(log);
  const std::string text = read_text(log);
  EXPECT_EQ(count_of(text, "model later: cannot read its source"), 1) << text;
  EXPECT_EQ(count_of(text, "model later: its source can be read again"), 1) << text;
}

// A base path that disappears while serving (a database down, a volume unmounted): its
// version keeps serving, the error is logged once, and the source recovers when it is back.
TEST_F(ServeTest, ASourceBrokenWhileServingKeepsItsVersionServing) {
  const auto base = dir.path() / "hpt";
  copy_half_plus_two(base, "1");
  ServerProcess s({"--model_name", "hpt", "--model_base_path", base.string(), "--file_system_poll_wait_seconds", "0.2"},
                  log);
  ASSERT_TRUE(s.wait_available("hpt", "1")) << read_text(log);
  const auto moved = dir.path() / "hpt.moved";
  std::filesystem::rename(base, moved);
  ASSERT_TRUE(eventually([&] { return read_text(log).find("model hpt: cannot read its source") != std::string::npos; }))
      << read_text(log);
  std::this_thread::sleep_for(1500ms);  // several poll intervals
  auto r = s.post("/v1/models/hpt:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
  std::filesystem::rename(moved, base);
  copy_half_plus_two(base, "2");
  ASSERT_TRUE(s.wait_available("hpt", "2")) << read_text(log);
  const std::string text = read_text(log);
  EXPECT_EQ(count_of(text, "model hpt: cannot read its source"), 1) << text;
  EXPECT_EQ(count_of(text, "(its loaded versions keep serving)"), 1) << text;
  EXPECT_EQ(count_of(text, "model hpt: its source can be read again"), 1) << text;
}

// ---- bad input from a fresh user: content types, flags, start-up messages ---------------------

// `curl -d @body.json` sends application/x-www-form-urlencoded, which cpp-httplib alone caps
// at 8 KiB: a 31 KB body of two MNIST rows is served as with application/json, and only
// --max_body_mb limits it (named in the 413).
TEST_F(MlpServeTest, AnyContentTypeIsServedUpToMaxBodyMb) {
  const auto base = dir.path() / "mlp";
  std::filesystem::create_directories(base / "1");
  std::ofstream(base / "1" / "model.json") << served_config().dump();
  write_safetensors(base / "1" / "weights.safetensors", model_->weights());
  ServerProcess s({"--model_name", "mlp", "--model_base_path", base.string(), "--max_body_mb", "1"}, log);
  ASSERT_TRUE(s.wait_available("mlp")) << read_text(log);
  std::string row;  // floats widened to doubles, as numpy's tolist() gives them: ~20 bytes each
  for (float v : image_) row += (row.empty() ? "" : ", ") + json(static_cast<double>(v)).dump();
  const std::string body = "{\"instances\": [[" + row + "], [" + row + "]]}";
  ASSERT_GT(body.size(), 30000u);
  const auto as_json = s.post("/v1/models/mlp:predict", body);
  const auto as_form = s.post("/v1/models/mlp:predict", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(as_json && as_form);
  ASSERT_EQ(as_json->status, 200) << as_json->body;
  ASSERT_EQ(as_form->status, 200) << as_form->body;
  EXPECT_EQ(as_form->body, as_json->body);
  expect_probabilities(json::parse(as_form->body)["predictions"][1]);
  const auto too_large = s.post("/v1/models/mlp:predict", std::string(2 << 20, ' '), "application/x-www-form-urlencoded");
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_EQ(error_of(too_large), "the request body is larger than the server's limit of 1 MiB (--max_body_mb)");
  const auto elsewhere = s.post("/v1/nothing", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(elsewhere->status, 400) << elsewhere->body;  // TF Serving: a /v1/ path it cannot route
  EXPECT_EQ(error_of(elsewhere), "Malformed request: POST /v1/nothing");
  EXPECT_EQ(s.post("/v1/models/mlp:predict", body, "text/plain")->body, as_json->body);
}

// Flag values out of range are usage errors (exit 2) before anything starts.
TEST_F(ServeTest, FlagValuesOutOfRangeExit2) {
  const std::vector<std::vector<std::string>> cases = {
      {"--rest_api_port", "70000"},        {"--rest_api_port", "-1"},
      {"--rest_api_num_threads", "-3"},    {"--file_system_poll_wait_seconds", "-1"},
      {"--max_body_mb", "0"},              {"--rest_api_timeout_in_ms", "-5"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto out = dir.path() / ("case" + std::to_string(i) + ".log");
    std::vector<std::string> args = {kTensorhub, "serve", "--model_base_path", kHalfPlusTwo};
    args.insert(args.end(), cases[i].begin(), cases[i].end());
    EXPECT_EQ(exit_code_within(spawn(args, out.string())), 2) << i << ": " << read_text(out);
    EXPECT_NE(read_text(out).find(cases[i][0]), std::string::npos) << i << ": " << read_text(out);
    EXPECT_EQ(read_text(out).find("REST API on"), std::string::npos) << i << ": " << read_text(out);
  }
}

// An address this machine does not have is said to be so, not "in use?".
TEST_F(ServeTest, AHostThatCannotBeBoundIsNamedAsSuch) {
  for (const std::string host : {"999.1.1.1", "192.0.2.1"}) {
    const auto out = dir.path() / (host + ".log");
    const pid_t pid = spawn({kTensorhub, "serve", "--rest_api_host", host, "--rest_api_port",
                             std::to_string(free_port()), "--model_base_path", kHalfPlusTwo},
                            out.string());
    EXPECT_EQ(exit_code_within(pid), 1) << read_text(out);
    EXPECT_NE(read_text(out).find("cannot listen on " + host + ":"), std::string::npos) << read_text(out);
    // "is not an address of this machine", or, for 999.1.1.1, "is not a numeric IP address".
    EXPECT_NE(read_text(out).find(host + " is not a"), std::string::npos) << read_text(out);
    EXPECT_EQ(read_text(out).find("in use"), std::string::npos) << read_text(out);
  }
}

// --hub_filter and --hub_sort are checked at start: errors name the flag and exit 2; a sort
// key no model has is warned about and the server serves.
TEST_F(MlpServeTest, HubFilterAndSortAreCheckedAtStart) {
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  Hub hub(uri, "p");
  const auto id = hub.save_model(served_config(), model_->weights(), "mlp", {{"test_accuracy", 0.8}});
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--hub_filter", "{bad"}, "--hub_filter is not valid JSON"},
      {{"--hub_filter", R"({"test_accuracy": {"$regex": "m.*"}})"}, "--hub_filter: filter on \"test_accuracy\": unknown operator"},
      {{"--hub_sort", "acc:up"}, "--hub_sort: sort \"acc:up\": direction must be"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto out = dir.path() / ("case" + std::to_string(i) + ".log");
    std::vector<std::string> args = {kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                     "--hub", uri, "--project", "p", "--hub_model", "mlp"};
    args.insert(args.end(), cases[i].args.begin(), cases[i].args.end());
    EXPECT_EQ(exit_code_within(spawn(args, out.string())), 2) << i << ": " << read_text(out);
    EXPECT_NE(read_text(out).find(cases[i].expected), std::string::npos) << i << ": " << read_text(out);
    EXPECT_EQ(read_text(out).find("retrying"), std::string::npos) << i << ": " << read_text(out);
  }
  ServerProcess s({"--hub", uri, "--project", "p", "--hub_model", "mlp", "--hub_sort", "test_acc:-1"}, log);
  ASSERT_TRUE(s.wait_available("mlp", std::to_string(id))) << read_text(log);
  EXPECT_EQ(count_of(read_text(log), "no model named \"mlp\" has the sort key \"test_acc\""), 1) << read_text(log);
}

// Start-up errors are said once, as the fatal error; a config file's parse errors end
// cleanly; a version without weights.safetensors names that file.
TEST_F(MlpServeTest, StartUpErrorsAreSaidOnceAndNameWhatIsMissing) {
  auto out = dir.path() / "missing.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_base_path", (dir.path() / "missing").string()},
                                   out.string())),
            1);
  EXPECT_EQ(count_of(read_text(out), "is not a directory"), 1) << read_text(out);
  EXPECT_EQ(read_text(out).find("retrying"), std::string::npos) << read_text(out);

  const int same = free_port();
  out = dir.path() / "same-port.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(same), "--port",
                                    std::to_string(same), "--model_base_path", dir.path().string()},
                                   out.string())),
            2);
  EXPECT_NE(read_text(out).find("--rest_api_port cannot be same as --port"), std::string::npos) << read_text(out);

  const auto config = dir.path() / "bad.config";
  std::ofstream(config) << "model_config_list { config { name: 'a' base_path: }";
  out = dir.path() / "config.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_config_file", config.string()},
                                   out.string())),
            1);
  const std::string text = read_text(out);
  // TF Serving's message name, not our package's.
  EXPECT_NE(text.find("--model_config_file is not a valid tensorflow.serving.ModelServerConfig text proto"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("; \n"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text[text.size() - 2], ' ') << text;
  std::ofstream(config) << "model_config_list { config { name: 'a' base_path: '/m' }";  // unclosed
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_config_file", config.string()},
                                   out.string())),
            1);
  EXPECT_NE(read_text(out).find("got: the end of the file"), std::string::npos) << read_text(out);

  const auto base = dir.path() / "mlp";
  std::filesystem::create_directories(base / "1");
  std::ofstream(base / "1" / "model.json") << served_config().dump();
  ServerProcess s({"--model_name", "mlp", "--model_base_path", base.string()}, log);
  ASSERT_TRUE(eventually([&] {
    auto r = s.get("/v1/models/mlp");
    return r && r->status == 200 && json::parse(r->body)["model_version_status"][0]["state"] == "END";
  })) << read_text(log);
  const json st = json::parse(s.get("/v1/models/mlp")->body)["model_version_status"][0];
  EXPECT_NE(st["status"]["error_message"].get<std::string>().find((base / "1" / "weights.safetensors").string() +
                                                                  " is missing"),
            std::string::npos)
      << st;
}

// ---- REST corners as TF Serving: issue 14 ---------------------------------------------------

// NaN, Infinity and -Infinity in and out, as TF Serving's JSON; other spellings are 400.
TEST_F(ServeTest, NonFiniteNumbersGoInAndComeOutAsTheTokens) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string p = "/v1/models/half_plus_two:predict";
  auto r = s.post(p, R"({"instances": [NaN, Infinity, -Infinity, 1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body, R"({"predictions":[NaN,Infinity,-Infinity,2.5]})");
  r = s.post(p, R"({"inputs": {"x": [-Infinity]}})");
  EXPECT_EQ(r->body, R"({"outputs":[-Infinity]})");
  // Python's json module reads the answer back as the same values.
  for (const std::string token : {"nan", "inf", "Inf", "+Infinity", "-NaN"})
    expect_reply(s, p, R"({"instances": [)" + token + "]}", 400, "JSON Parse error");
}

// Each error says what was wrong, with TF Serving's HTTP code: paths under /v1/ it cannot route
// are 400 (others 404), a version that is no number, and a body nested too deep.
TEST_F(ServeTest, ErrorsNameTheirCauseWithTfServingsCodes) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  auto r = s.get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Missing model name in request.");
  r = s.post("/v1/models/half_plus_two:explain", R"({"instances": [1.0]})");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: POST /v1/models/half_plus_two:explain");
  r = s.get("/v1/models/half_plus_two/shapes");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: GET /v1/models/half_plus_two/shapes");
  // Other methods under /v1/ route nowhere either: 400, as TF Serving.
  r = s.client().Delete("/v1/models/half_plus_two");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: DELETE /v1/models/half_plus_two");
  r = s.client().Put("/v1/models/half_plus_two:predict", R"({"instances": [1.0]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: PUT /v1/models/half_plus_two:predict");
  r = s.get("/v2/models/half_plus_two");
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(error_of(r).find("Malformed request: GET /v2/models/half_plus_two"), std::string::npos) << r->body;
  r = s.get("/v1/models/half_plus_two/versions/1234567890123456789012");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Failed to convert version: 1234567890123456789012 to numeric.");
  // 64 levels (the object and 63 arrays) are read: whatever the answer, it is not about depth.
  r = s.post("/v1/models/half_plus_two:predict", R"({"instances": )" + std::string(63, '[') + "1.0" +
                                                     std::string(63, ']') + "}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.find("nesting deeper"), std::string::npos) << r->body;
  // Nested deeper than the parser reads, small or large: said so, never "too large".
  for (const int depth : {64, 100, 200000}) {
    const std::string body = R"({"instances": )" + std::string(depth, '[') + "1.0" + std::string(depth, ']') + "}";
    r = s.post("/v1/models/half_plus_two:predict", body);
    ASSERT_TRUE(r) << depth;
    EXPECT_EQ(r->status, 400) << depth;
    EXPECT_EQ(error_of(r), "JSON Parse error: nesting deeper than 64 levels of arrays and objects (the most this "
                           "server reads)")
        << depth;
  }
}

// Metrics: one series per served model, whatever names clients send; label values escaped as
// the Prometheus text format requires; the API label says which method was called.
TEST_F(ServeTest, MetricsKeepABoundedLabelSetAndEscapeLabelValues) {
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list { config { name: 'a\"b\\\\c' base_path: '" << kHalfPlusTwo << "' } }";
  ServerProcess s({"--model_config_file", config.string()}, log);
  ASSERT_TRUE(s.wait_available("a%22b%5Cc")) << read_text(log);
  auto r = s.post("/v1/models/a%22b%5Cc:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
  for (int i = 0; i < 5; ++i) s.post("/v1/models/unknown" + std::to_string(i) + ":predict", R"({"instances": [1.0]})");
  r = s.get("/monitoring/prometheus/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find(R"(:tensorflow:serving:request_latency_count{model_name="a\"b\\c",API="predict",entrypoint="REST"} 1)"),
            std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find(R"(:tensorflow:serving:request_count{model_name="",status="NOT_FOUND"} 5)"), std::string::npos)
      << r->body;
  EXPECT_EQ(r->body.find("unknown"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"(API="predict",entrypoint="REST")"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"(API="GetModelStatus",entrypoint="REST")"), std::string::npos) << r->body;
}

// Labels: an unknown one is 400; one on a version that is not loaded is refused at start with
// TF Serving's message naming model, version and label, unless
// --allow_version_labels_for_unavailable_models, and is then 404 naming the label.
TEST_F(ServeTest, VersionLabelsOnVersionsNotLoadedAreRefusedAtStart) {
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list { config { name: 'hpt' base_path: '" << kHalfPlusTwo
                        << "' version_labels { key: 'stable' value: 123 } version_labels { key: 'canary' value: 124 } } }";
  const auto out = dir.path() / "refused.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_config_file", config.string()},
                                   out.string())),
            1);
  EXPECT_NE(read_text(out).find("Request to assign label to version 124 of model hpt, which is not currently available "
                                "for inference (version_labels { key: 'canary' value: 124 })"),
            std::string::npos)
      << read_text(out);
  EXPECT_EQ(read_text(out).find("'stable'"), std::string::npos) << read_text(out);

  ServerProcess s({"--model_config_file", config.string(), "--allow_version_labels_for_unavailable_models"}, log);
  ASSERT_TRUE(s.wait_available("hpt")) << read_text(log);
  auto r = s.post("/v1/models/hpt/labels/stable:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
  expect_reply(s, "/v1/models/hpt/labels/canary:predict", R"({"instances": [1.0]})", 404,
               "label canary of model hpt points at version 124, which is not loaded");
  expect_reply(s, "/v1/models/hpt/labels/nope:predict", R"({"instances": [1.0]})", 400,
               "Unrecognized servable version label: nope");
}

// allowed_batch_sizes over HTTP: a batch of 3 runs padded to 4 and the caller gets its 3
// rows; more rows than max_batch_size is TF Serving's 400; a last entry that is not
// max_batch_size is refused at start with TF Serving's message.
TEST_F(ServeTest, AllowedBatchSizesAreHonouredAndCheckedAtStart) {
  const auto batching = dir.path() / "batching.config";
  std::ofstream(batching) << "max_batch_size { value: 4 }\nallowed_batch_sizes: [2, 4]\n";
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo, "--enable_batching",
                   "--batching_parameters_file", batching.string()},
                  log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string p = "/v1/models/half_plus_two:predict";
  auto r = s.post(p, R"({"instances": [1.0, 2.0, 5.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5,3.0,4.5]})");
  expect_reply(s, p, R"({"instances": [1.0, 2.0, 3.0, 4.0, 5.0]})", 400,
               "Task size 5 is larger than maximum input batch size 4");

  std::ofstream(batching) << "max_batch_size { value: 4 }\nallowed_batch_sizes: [2, 3]\n";
  const auto out = dir.path() / "refused.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_base_path", kHalfPlusTwo, "--enable_batching",
                                    "--batching_parameters_file", batching.string()},
                                   out.string())),
            1);
  EXPECT_NE(read_text(out).find("Last entry in allowed_batch_sizes must match max_batch_size; last entry was 3; "
                                "expected 4"),
            std::string::npos)
      << read_text(out);
}

// ---- Classify and Regress: issue 14 ---------------------------------------------------------

// TF Serving's Classify and Regress API on half_plus_two's regress_x_to_y and classify_x_to_y
// signatures (tf.Examples with a float feature x): the documented call, context merged into
// each example, NaN, and TF Serving's errors for wrong examples and wrong signatures.
TEST_F(ServeTest, HalfPlusTwoRegressesAndClassifiesExamples) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo}, log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string regress = "/v1/models/half_plus_two:regress";
  const std::string classify = "/v1/models/half_plus_two:classify";
  auto r = s.post(regress, R"({"examples": [{"x": 1.0}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"results": [2.5]})"));
  // The context's features go into every example; an example's own feature wins.
  r = s.post(regress, R"({"context": {"x": 5.0}, "examples": [{"x": [1.0]}, {}, {"x": 10.0}]})");
  EXPECT_EQ(r->body, R"({"results":[2.5,4.5,7.0]})");
  r = s.post("/v1/models/half_plus_two/versions/123:regress",
             R"({"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}, {"x": NaN}]})");
  EXPECT_EQ(r->body, R"({"results":[3.0,NaN]})");
  // Classify: one [label, score] pair per class; this signature names no class (label "").
  r = s.post(classify, R"({"examples": [{"x": 1.0}, {"x": 3.0}]})");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body, R"({"results":[[["",2.5]],[["",3.5]]]})");

  // Examples parse_example cannot read.
  expect_reply(s, regress, R"({"examples": [{"x": 1}]})", 400,
               "Name: <unknown>, Key: x, Index: 0.  Data types don't match. Data type: int64 but expected type: float");
  expect_reply(s, regress, R"({"examples": [{"x": 1.0}, {"y": 1.0}]})", 400,
               "Name: <unknown>, Feature: x (data type: float) is required but could not be found.");
  expect_reply(s, regress, R"({"examples": [{"x": [1.0, 2.0]}]})", 400,
               "Number of float values != expected.  Values size: 2 but output shape: [1]");
  expect_reply(s, regress, R"({"examples": [{"x": {"b64": "AAAA"}}]})", 400, "Data type: string but expected type: float");
  expect_reply(s, regress, R"({"examples": [{"x": [1.0, "a"]}]})", 400,
               "Unexpected element type in feature: x expecting type: float");
  expect_reply(s, regress, R"({"examples": [[1.0]]})", 400, "Example must be JSON object but got JSON Array");
  expect_reply(s, regress, R"({"examples": []})", 400, "'examples' value is an empty array");
  expect_reply(s, regress, R"({"instances": [1.0]})", 400, "key 'examples' is expected and was not found");
  // Signatures of another method, and names that do not exist.
  expect_reply(s, regress, R"({"signature_name": "serving_default", "examples": [{"x": 1.0}]})", 400,
               "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
               "tensorflow/serving/predict");
  expect_reply(s, classify, R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})", 400,
               "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
               "tensorflow/serving/regress");
  expect_reply(s, regress, R"({"signature_name": "nope", "examples": [{"x": 1.0}]})", 400,
               "No signature was found with the name: nope");
  expect_reply(s, "/v1/models/half_plus_two:predict", R"({"signature_name": "regress_x_to_y", "instances": [1.0]})",
               400, "POST its examples to :regress");

  // The metadata shows them as TF Serving does.
  r = s.get("/v1/models/half_plus_two/metadata");
  const json defs = json::parse(r->body)["metadata"]["signature_def"]["signature_def"];
  EXPECT_EQ(defs["regress_x_to_y"]["method_name"], "tensorflow/serving/regress") << r->body;
  EXPECT_EQ(defs["regress_x_to_y"]["inputs"]["inputs"]["dtype"], "DT_STRING") << r->body;
  EXPECT_EQ(defs["regress_x_to_y"]["outputs"]["outputs"]["dtype"], "DT_FLOAT") << r->body;
  EXPECT_EQ(defs["classify_x_to_y"]["method_name"], "tensorflow/serving/classify") << r->body;
  EXPECT_EQ(defs["classify_x_to_y"]["outputs"]["scores"]["name"], "y:0") << r->body;
  EXPECT_EQ(defs["serving_default"]["method_name"], "tensorflow/serving/predict") << r->body;
}

// The MLP with a classification signature naming its classes: one [label, probability] pair
// per digit. A model without such signatures gets TF Serving's error.
TEST_F(MlpServeTest, ClassifyNamesEachClassAndAModelWithoutSuchSignatureIsRefused) {
  const auto base = dir.path() / "mlp";
  std::filesystem::create_directories(base / "1");
  json config = served_config();
  json classes = json::array();
  for (int c = 0; c < 10; ++c) classes.push_back(std::to_string(c));
  config["signatures"] = {{"classify_digits", {{"method_name", "tensorflow/serving/classify"},
                                               {"features", {{{"name", "pixels"}, {"size", 784}}}},
                                               {"classes", classes}}}};
  std::ofstream(base / "1" / "model.json") << config.dump();
  write_safetensors(base / "1" / "weights.safetensors", model_->weights());
  const auto plain = dir.path() / "plain";
  std::filesystem::create_directories(plain / "1");
  std::ofstream(plain / "1" / "model.json") << served_config().dump();
  write_safetensors(plain / "1" / "weights.safetensors", model_->weights());
  const auto config_file = dir.path() / "models.config";
  std::ofstream(config_file) << "model_config_list { config { name: 'mlp' base_path: '" << base.string()
                             << "' } config { name: 'plain' base_path: '" << plain.string() << "' } }";
  ServerProcess s({"--model_config_file", config_file.string(), "--enable_batching"}, log);
  ASSERT_TRUE(s.wait_available("mlp")) << read_text(log);
  ASSERT_TRUE(s.wait_available("plain")) << read_text(log);

  std::vector<double> pixels(image_.begin(), image_.end());
  auto r = s.post("/v1/models/mlp:classify", json({{"examples", {{{"pixels", pixels}}, {{"pixels", pixels}}}}}).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json results = json::parse(r->body)["results"];
  ASSERT_EQ(results.size(), 2u) << r->body;
  for (const auto& example : results) {
    ASSERT_EQ(example.size(), 10u);
    for (int c = 0; c < 10; ++c) {
      EXPECT_EQ(example[c][0], std::to_string(c));
      EXPECT_NEAR(example[c][1].get<double>(), probs_[c], 1e-5);
    }
  }
  expect_reply(s, "/v1/models/mlp:regress", json({{"examples", {{{"pixels", pixels}}}}}).dump(), 400,
               "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
               "tensorflow/serving/predict");
  expect_reply(s, "/v1/models/plain:classify", json({{"examples", {{{"pixels", pixels}}}}}).dump(), 400,
               "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
               "tensorflow/serving/predict");
}

// ---- routes, names and HTTP corners: issue 26 ------------------------------------------------

// TF Serving's routes are regular expressions with (?i): any case of the fixed parts routes,
// names and labels are percent-decoded after matching; what does not match is its 400 under
// /v1/ (in any case) and 404 elsewhere.
TEST_F(ServeTest, RoutesMatchInAnyCaseAsTfServings) {
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list { config { name: 'Half Plus Two' base_path: '" << kHalfPlusTwo
                        << "' version_labels { key: 'stable' value: 123 } } }";
  ServerProcess s({"--model_config_file", config.string()}, log);
  ASSERT_TRUE(s.wait_available("Half%20Plus%20Two")) << read_text(log);
  for (const std::string path : {"/V1/MODELS/Half%20Plus%20Two:PREDICT", "/v1/Models/Half%20Plus%20Two/Versions/123:Predict",
                                 "/v1/models/Half%20Plus%20Two/LABELS/stable:predict"}) {
    auto r = s.post(path, R"({"instances": [1.0, 5.0]})");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << " -> " << r->body;
    EXPECT_EQ(r->body, R"({"predictions":[2.5,4.5]})") << path;
  }
  auto r = s.post("/V1/models/Half%20Plus%20Two:REGRESS", R"({"examples": [{"x": 1.0}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"results":[2.5]})");
  r = s.get("/V1/MODELS/Half%20Plus%20Two/VERSIONS/123");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model_version_status"][0]["state"], "AVAILABLE") << r->body;
  r = s.get("/v1/models/Half%20Plus%20Two/Labels/stable/METADATA");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["model_spec"]["version"], "123") << r->body;
  // The name itself keeps its case: another case is another (unknown) model.
  r = s.post("/v1/models/half%20plus%20two:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  // Unmatched: 400 under /v1/ in any case, 404 elsewhere; the metrics path is exact.
  r = s.get("/V1/Models/Half%20Plus%20Two/shapes");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: GET /V1/Models/Half%20Plus%20Two/shapes");
  r = s.post("/V1/models/Half%20Plus%20Two:explain", "{}");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Malformed request: POST /V1/models/Half%20Plus%20Two:explain");
  r = s.get("/v1/models/");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), "Missing model name in request.");
  r = s.get("/monitoring/prometheus/metrics");
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find(R"(request_latency_count{model_name="Half Plus Two",API="predict",entrypoint="REST"} 3)"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(s.get("/Monitoring/Prometheus/Metrics")->status, 404);
}

// A name holding '/' could never be asked for over REST: refused where it is configured, with
// the flag or file that configured it.
TEST_F(ServeTest, AModelNameWithASlashIsRefusedWhereItIsConfigured) {
  auto out = dir.path() / "flag.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()), "--model_name",
                                    "team/hpt", "--model_base_path", kHalfPlusTwo},
                                   out.string())),
            2);
  EXPECT_NE(read_text(out).find("--model_name: model name \"team/hpt\" contains '/'"), std::string::npos)
      << read_text(out);
  const auto config = dir.path() / "models.config";
  std::ofstream(config) << "model_config_list { config { name: 'hpt' base_path: '" << kHalfPlusTwo
                        << "' } config { name: 'a/b' base_path: '" << kHalfPlusTwo << "' } }";
  out = dir.path() / "config.log";
  EXPECT_EQ(exit_code_within(spawn({kTensorhub, "serve", "--rest_api_port", std::to_string(free_port()),
                                    "--model_config_file", config.string()},
                                   out.string())),
            1);
  EXPECT_NE(read_text(out).find("--model_config_file " + config.string() + ": model name \"a/b\" contains '/'"),
            std::string::npos)
      << read_text(out);
  EXPECT_EQ(read_text(out).find("REST API on"), std::string::npos) << read_text(out);
}

// The engine's refusals reach a client of serve as 400s that say why, and the server keeps
// serving: a negative Content-Length, a head over --http_max_header_kb, too many header fields.
TEST_F(ServeTest, MalformedHeadsGet400WithTheReason) {
  ServerProcess s({"--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo, "--http_max_header_kb", "8"},
                  log);
  ASSERT_TRUE(s.wait_available("half_plus_two")) << read_text(log);
  const std::string predict = "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  std::string reply = raw_http_exchange(s.port(), predict + "Content-Length: -5\r\n\r\n{}");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Length"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\"error\""), std::string::npos) << reply;

  reply = raw_http_exchange(s.port(), predict + "X-Big: " + std::string(9 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply.substr(0, 300);
  EXPECT_NE(reply.find("--http_max_header_kb"), std::string::npos) << reply.substr(0, 300);

  std::string many;
  for (int i = 0; i < 101; ++i) many += "X-F" + std::to_string(i) + ": 1\r\n";
  reply = raw_http_exchange(s.port(), predict + many + "\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("100"), std::string::npos) << reply;

  auto r = s.post("/v1/models/half_plus_two:predict", R"({"instances": [1.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5]})");
}

}  // namespace
}  // namespace tensorhub
