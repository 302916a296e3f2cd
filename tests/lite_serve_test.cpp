// tensorhub-serve-lite as a real process beside `tensorhub serve` on the same model
// directories, both spoken to over HTTP: the same answers for half_plus_two (predictions,
// status, metadata, TF Serving's errors), predictions within 1e-5 of serve's for a network of
// every layer kind and for Fashion-MNIST models trained and exported by `tensorhub train-spec`,
// models it cannot run refused at load naming the layer, a new version picked up, SIGTERM.
//
// Each test runs twice: with the x86-64 binary, and with the arm64 binary (build/arm64/, cross-
// compiled) under Debian's qemu-aarch64-static. The arm64 run is skipped, saying why, only
// when the cross compiler or qemu-user-static is not installed (scripts/setup installs both).
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "tensorhub/core/json.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/core/process.h"
#include "tensorhub/data/idx.h"
#include "lite_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::run_command;

const std::string kBin = TENSORHUB_BIN_DIR;
const std::string kHalfPlusTwo = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Polls `pred` every 50 ms for up to `limit`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 60000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

// A model server process (lite or serve) on a free port, and an HTTP client to it.
class Server {
 public:
  Server(std::vector<std::string> argv, const std::string& log) : port_(free_loopback_port()) {
    argv.insert(argv.end(), {"--rest_api_port", std::to_string(port_)});
    ProcessOptions options;
    options.output = log;
    process_ = std::make_unique<Process>(Process::spawn(argv, options));
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(60, 0);
  }
  // Waits until `model` has `version` (any, if empty) AVAILABLE.
  bool wait_available(const std::string& model, const std::string& version = "") {
    return eventually([&] {
      auto r = client_->Get(("/v1/models/" + model).c_str());
      if (!r || r->status != 200) return false;
      const Json status = Json::parse(r->body, nullptr, false);
      for (const auto& s : status.value("model_version_status", Json::array()))
        if (s["state"] == "AVAILABLE" && (version.empty() || s["version"] == version)) return true;
      return false;
    });
  }
  httplib::Result post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }
  httplib::Result get(const std::string& path) { return client_->Get(path.c_str()); }
  Process& process() { return *process_; }
  int port() const { return port_; }

 private:
  int port_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<httplib::Client> client_;
};

float uniform(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

Tensor random_tensor(std::mt19937& rng, std::vector<std::int64_t> shape, float lo = -0.5f, float hi = 0.5f) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = uniform(rng, lo, hi);
  return Tensor::from<float>(DType::kF32, std::move(shape), v);
}

// Padded standard base64 (RFC 4648).
std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    const std::size_t given = std::min<std::size_t>(3, bytes.size() - i);  // 1, 2 or 3 bytes: 2, 3 or 4 characters
    for (std::size_t k = 0; k < 4; ++k) out += k <= given ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

void write_version(const std::filesystem::path& dir, const Json& config, const NamedTensors& weights) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "model.json") << config.dump(2);
  if (!weights.empty()) write_safetensors(dir / "weights.safetensors", weights);
}

// Every layer kind the trainer saves, with TensorFlow's asymmetric "same" padding (an even
// kernel, a stride 2 over an even size), random weights and BatchNormalization averages.
Json every_layer_config() {
  return Json::parse(R"({
    "name": "every_layer", "input_shape": [784],
    "layers": [{"type": "Rescaling", "scale": 0.5, "offset": 0.1},
               {"type": "Reshape", "target_shape": [28, 28, 1]},
               {"type": "Conv2D", "filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"},
               {"type": "BatchNormalization", "epsilon": 0.01},
               {"type": "MaxPooling2D", "pool_size": 3, "strides": 2, "padding": "same"},
               {"type": "Conv2D", "filters": 6, "kernel_size": [3, 2], "strides": [2, 1], "padding": "same",
                "activation": "tanh"},
               {"type": "MaxPooling2D", "pool_size": 2},
               {"type": "Dropout", "rate": 0.3},
               {"type": "Flatten"},
               {"type": "Dense", "units": 16, "activation": "sigmoid"},
               {"type": "Activation", "activation": "relu"},
               {"type": "Dense", "units": 10, "activation": "softmax"}],
    "loss": "sparse_categorical_crossentropy"})");
}

NamedTensors every_layer_weights() {
  std::mt19937 rng(16);
  NamedTensors w;
  w["conv2d.weight"] = random_tensor(rng, {4, 1, 3, 3});
  w["conv2d.bias"] = random_tensor(rng, {4});
  w["batch_normalization.gamma"] = random_tensor(rng, {4}, 0.5f, 2);
  w["batch_normalization.beta"] = random_tensor(rng, {4});
  w["batch_normalization.moving_mean"] = random_tensor(rng, {4}, 0, 0.3f);
  w["batch_normalization.moving_variance"] = random_tensor(rng, {4}, 0.05f, 2);
  w["conv2d_1.weight"] = random_tensor(rng, {6, 4, 3, 2});
  w["conv2d_1.bias"] = random_tensor(rng, {6});
  w["dense.weight"] = random_tensor(rng, {16, 3 * 7 * 6}, -0.3f, 0.3f);  // 28 -> 14 -> 7x14 -> 3x7, 6 channels
  w["dense.bias"] = random_tensor(rng, {16});
  w["dense_1.weight"] = random_tensor(rng, {10, 16}, -2, 2);
  w["dense_1.bias"] = random_tensor(rng, {10});
  return w;
}

// Each prediction of `lite` within 1e-5 of `serve`'s, same shape; returns how many values.
int expect_near(const Json& lite, const Json& serve) {
  if (serve.is_number()) {
    EXPECT_TRUE(lite.is_number()) << lite;
    EXPECT_NEAR(lite.get<double>(), serve.get<double>(), 1e-5);
    return 1;
  }
  EXPECT_TRUE(lite.is_array() && lite.size() == serve.size()) << lite << " vs " << serve;
  if (!lite.is_array() || lite.size() != serve.size()) return 0;
  int n = 0;
  for (std::size_t i = 0; i < serve.size(); ++i) n += expect_near(lite[i], serve[i]);
  return n;
}

class LiteServeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    arch_ = arch_named(GetParam());
    if (const std::string why = missing(arch_); !why.empty()) GTEST_SKIP() << "arm64 not tested: " << why;
  }
  // tensorhub-serve-lite on `base` (model `name`).
  std::unique_ptr<Server> lite(const std::string& name, const std::string& base, const std::string& log_name = "lite.log") {
    std::vector<std::string> argv = arch_.launcher;
    argv.insert(argv.end(), {arch_.binary, "--model_name", name, "--model_base_path", base,
                             "--file_system_poll_wait_seconds", "0.2"});
    return std::make_unique<Server>(argv, (dir_.path() / log_name).string());
  }
  // `tensorhub serve` on the same.
  std::unique_ptr<Server> serve(const std::string& name, const std::string& base) {
    return std::make_unique<Server>(
        std::vector<std::string>{kBin + "/tensorhub", "serve", "--model_name", name, "--model_base_path", base,
                                 "--port", "0"},
        (dir_.path() / "serve.log").string());
  }
  std::string logs() { return read_text(dir_.path() / "lite.log") + read_text(dir_.path() / "serve.log"); }

  // Posts `body` to both; expects 200 from each and predictions within 1e-5.
  void expect_same_predictions(Server& l, Server& s, const std::string& model, const std::string& body,
                               int expected_values) {
    auto a = l.post("/v1/models/" + model + ":predict", body);
    auto b = s.post("/v1/models/" + model + ":predict", body);
    ASSERT_TRUE(a && b) << logs();
    ASSERT_EQ(b->status, 200) << b->body;
    ASSERT_EQ(a->status, 200) << a->body;
    const Json la = Json::parse(a->body), sb = Json::parse(b->body);
    const std::string key = sb.contains("predictions") ? "predictions" : "outputs";
    ASSERT_TRUE(la.contains(key)) << a->body;
    EXPECT_EQ(expect_near(la[key], sb[key]), expected_values);
  }

  Arch arch_;
  TempDir dir_;
};

// TF Serving's documented half_plus_two exchanges and its error cases: the same status code
// and body from both servers (JSON syntax errors: both "JSON Parse error", each parser's words).
TEST_P(LiteServeTest, HalfPlusTwoAnswersAsServeDoes) {
  auto l = lite("half_plus_two", kHalfPlusTwo);
  auto s = serve("half_plus_two", kHalfPlusTwo);
  ASSERT_TRUE(l->wait_available("half_plus_two")) << logs();
  ASSERT_TRUE(s->wait_available("half_plus_two")) << logs();
  const std::string p = "/v1/models/half_plus_two:predict";
  auto r = l->post(p, R"({"instances": [1.0, 2.0, 5.0]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"predictions":[2.5,3.0,4.5]})");
  const std::vector<std::pair<std::string, std::string>> requests = {
      {p, R"({"instances": [1.0, 2.0, 5.0]})"},
      {p, R"({"inputs": [3.0, 4.0]})"},
      {p, R"({"inputs": {"x": [3.0, 4.0]}})"},
      {p, R"({"instances": [{"x": 1.0}, {"x": 7.0}]})"},
      {"/v1/models/half_plus_two/versions/123:predict", R"({"signature_name": "serving_default", "instances": [1.0]})"},
      {p, R"({"instances": [NaN, Infinity, -Infinity, 1.0]})"},
      {p, R"({"instances": [1.0], "inputs": [1.0]})"},
      {p, R"({"foo": 1})"},
      {p, R"([1.0])"},
      {p, R"({"instances": [[1.0], [2.0, 3.0]]})"},
      {p, R"({"instances": ["one"]})"},
      {p, R"({"instances": [1e300]})"},
      {p, R"({"instances": []})"},
      {p, R"({"instances": [[1.0, 2.0]]})"},
      {p, R"({"signature_name": "nope", "instances": [1.0]})"},
      {p, R"({"signature_name": 3, "instances": [1.0]})"},
      {p, std::string(100, '[') + std::string(100, ']')},
      {p, ""},
      {"/v1/models/unknown:predict", R"({"instances": [1.0]})"},
      {"/v1/models/half_plus_two/versions/9:predict", R"({"instances": [1.0]})"},
      {"/v1/models/half_plus_two/labels/stable:predict", R"({"instances": [1.0]})"},
      {"/v1/models/half_plus_two:explain", R"({"instances": [1.0]})"},
  };
  for (const auto& [path, body] : requests) {
    auto a = l->post(path, body);
    auto b = s->post(path, body);
    ASSERT_TRUE(a && b) << path << " " << body << "\n" << logs();
    EXPECT_EQ(a->status, b->status) << body << ": lite " << a->body << " serve " << b->body;
    EXPECT_EQ(a->body, b->body) << path << " " << body;
  }
  for (const std::string body : {"{\"instances\": [1.0,", "{\"instances\": [nan]}", "{\"instances\": [1e999]}"}) {
    auto a = l->post(p, body);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 400) << body;
    EXPECT_EQ(Json::parse(a->body)["error"].get<std::string>().rfind("JSON Parse error: ", 0), 0u) << a->body;
  }
  for (const std::string path : {"/v1/models/half_plus_two", "/v1/models/half_plus_two/versions/123",
                                 "/v1/models/half_plus_two/versions/9", "/v1/models", "/v2/models/half_plus_two",
                                 "/v1/models/half_plus_two/versions/1234567890123456789012"}) {
    auto a = l->get(path);
    auto b = s->get(path);
    ASSERT_TRUE(a && b) << path;
    EXPECT_EQ(a->status, b->status) << path;
    EXPECT_EQ(a->body, b->body) << path;
  }
  // Metadata: serve's serving_default, the signature lite runs (serve also lists half_plus_two's
  // classify and regress signatures, which lite does not answer).
  const Json ma = Json::parse(l->get("/v1/models/half_plus_two/metadata")->body);
  const Json mb = Json::parse(s->get("/v1/models/half_plus_two/metadata")->body);
  EXPECT_EQ(ma["model_spec"], mb["model_spec"]);
  EXPECT_EQ(ma["metadata"]["signature_def"]["signature_def"]["serving_default"],
            mb["metadata"]["signature_def"]["signature_def"]["serving_default"]);
  r = l->post("/v1/models/half_plus_two:regress", R"({"examples": [{"x": 1.0}]})");
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("predict only"), std::string::npos) << r->body;
}

TEST_P(LiteServeTest, EveryLayerKindPredictsAsServeWithin1e5) {
  const auto base = dir_.path() / "every_layer";
  write_version(base / "1", every_layer_config(), every_layer_weights());
  auto l = lite("every_layer", base.string());
  auto s = serve("every_layer", base.string());
  ASSERT_TRUE(l->wait_available("every_layer")) << logs();
  ASSERT_TRUE(s->wait_available("every_layer")) << logs();
  std::mt19937 rng(7);
  Json instances = Json::array();
  for (int i = 0; i < 4; ++i) {
    const Tensor t = random_tensor(rng, {784}, 0, 2);
    instances.push_back(std::vector<float>(t.as<float>(), t.as<float>() + 784));
  }
  expect_same_predictions(*l, *s, "every_layer", Json{{"instances", instances}}.dump(), 40);
  expect_same_predictions(*l, *s, "every_layer", Json{{"inputs", instances}}.dump(), 40);
}

// The sequence layers (Embedding with mask_zero, Dense per step, GlobalAveragePooling1D; and
// Embedding, Conv1D with TensorFlow's odd "same" padding and a stride, MaxPooling1D "same"),
// random weights: lite's predictions within 1e-5 of serve's (Model::predict), and the same 400
// for an id out of range.
TEST_P(LiteServeTest, SequenceLayersPredictAsServeAndRefuseOutOfRangeIds) {
  const Json bag = Json::parse(R"({
    "input_shape": [7], "loss": "sparse_categorical_crossentropy",
    "layers": [{"type": "Embedding", "input_dim": 30, "output_dim": 5, "mask_zero": true},
               {"type": "Dense", "units": 4, "activation": "tanh"},
               {"type": "GlobalAveragePooling1D"},
               {"type": "Dense", "units": 3, "activation": "softmax"}]})");
  const Json cnn = Json::parse(R"({
    "input_shape": [7], "loss": "sparse_categorical_crossentropy",
    "layers": [{"type": "Embedding", "input_dim": 30, "output_dim": 5},
               {"type": "Conv1D", "filters": 6, "kernel_size": 4, "strides": 2, "padding": "same", "activation": "relu"},
               {"type": "MaxPooling1D", "pool_size": 3, "strides": 1, "padding": "same"},
               {"type": "Conv1D", "filters": 3, "kernel_size": 2},
               {"type": "Flatten"},
               {"type": "Dense", "units": 3}]})");
  std::mt19937 rng(24);
  NamedTensors bag_w = {{"embedding.weight", random_tensor(rng, {30, 5}, -1, 1)},
                        {"dense.weight", random_tensor(rng, {4, 5}, -1, 1)},
                        {"dense.bias", random_tensor(rng, {4})},
                        {"dense_1.weight", random_tensor(rng, {3, 4}, -1, 1)},
                        {"dense_1.bias", random_tensor(rng, {3})}};
  // 7 steps -> Conv1D same stride 2: 4 steps (pad 1 before, 2 after) -> pool 3 same: 4 -> valid k 2: 3.
  NamedTensors cnn_w = {{"embedding.weight", random_tensor(rng, {30, 5}, -1, 1)},
                        {"conv1d.weight", random_tensor(rng, {6, 5, 4}, -1, 1)},
                        {"conv1d.bias", random_tensor(rng, {6})},
                        {"conv1d_1.weight", random_tensor(rng, {3, 6, 2}, -1, 1)},
                        {"conv1d_1.bias", random_tensor(rng, {3})},
                        {"dense.weight", random_tensor(rng, {3, 9}, -1, 1)},
                        {"dense.bias", random_tensor(rng, {3})}};
  write_version(dir_.path() / "bag" / "1", bag, bag_w);
  write_version(dir_.path() / "text_cnn" / "1", cnn, cnn_w);
  Json instances = Json::array();
  for (int i = 0; i < 5; ++i) {
    std::vector<int> ids(7);
    for (int& id : ids) id = static_cast<int>(rng() % 30);
    if (i < 3) ids[static_cast<std::size_t>(6 - i)] = 0;  // padding the mask skips
    instances.push_back(ids);
  }
  instances.push_back(std::vector<int>(7, 0));  // all masked: zeros averaged, as serve
  for (const std::string name : {"bag", "text_cnn"}) {
    SCOPED_TRACE(name);
    auto l = lite(name, (dir_.path() / name).string());
    auto s = serve(name, (dir_.path() / name).string());
    ASSERT_TRUE(l->wait_available(name)) << logs();
    ASSERT_TRUE(s->wait_available(name)) << logs();
    expect_same_predictions(*l, *s, name, Json{{"instances", instances}}.dump(), 6 * 3);
    const std::string bad = R"({"instances": [[1, 2, 3, 4, 5, 6, 30]]})";
    auto a = l->post("/v1/models/" + name + ":predict", bad);
    auto b = s->post("/v1/models/" + name + ":predict", bad);
    ASSERT_TRUE(a && b) << logs();
    EXPECT_EQ(a->status, 400) << a->body;
    EXPECT_EQ(b->status, 400) << b->body;
    for (const auto* body : {&a->body, &b->body})
      EXPECT_NE(body->find("Embedding layer \\\"embedding\\\": input value 30 (element 6"), std::string::npos) << *body;
  }
}

// A model taking raw image bytes ({"b64": ...}, "decode": "raw_uint8"): the same predictions.
TEST_P(LiteServeTest, RawUint8BytesInputsPredictAsServe) {
  Json config = every_layer_config();
  config["signature"] = {{"inputs", "image_bytes"}, {"outputs", "probabilities"}, {"input_dtype", "DT_STRING"},
                         {"decode", "raw_uint8"}, {"decode_scale", 1.0 / 255}};
  const auto base = dir_.path() / "bytes";
  write_version(base / "3", config, every_layer_weights());
  auto l = lite("bytes", base.string());
  auto s = serve("bytes", base.string());
  ASSERT_TRUE(l->wait_available("bytes")) << logs();
  ASSERT_TRUE(s->wait_available("bytes")) << logs();
  std::string image(784, '\0');
  for (int i = 0; i < 784; ++i) image[static_cast<std::size_t>(i)] = static_cast<char>((i * 37) % 256);
  const std::string b64 = base64(image);
  expect_same_predictions(*l, *s, "bytes", Json{{"instances", {{{"b64", b64}}, {{"b64", b64}}}}}.dump(), 20);
}

// A directory of trained Fashion-MNIST models (an MLP and a CNN), made once per build tree:
// `tensorhub dataset import` of Debian's Fashion-MNIST, then `tensorhub train-spec` of one
// epoch each on its 10,000 validation images, exported by ModelCheckpoint as <base>/<name>/1.
std::filesystem::path trained_models() {
  const std::filesystem::path done = std::filesystem::path(kBin).parent_path() / "lite-test-models";
  if (std::filesystem::exists(done / "cnn" / "1" / "weights.safetensors")) return done;
  TempDir work;
  const std::string hub = "sqlite://" + (work.path() / "hub.db").string();
  const std::filesystem::path out = done.string() + ".tmp" + std::to_string(::getpid());
  run_command(kBin + "/tensorhub dataset import --name fashion_mnist --hub " + hub + " > /dev/null");
  const std::map<std::string, std::string> layers = {
      {"mlp", R"([{"type": "Dense", "units": 32, "activation": "relu"}, {"type": "Dropout", "rate": 0.2},
                 {"type": "Dense", "units": 10, "activation": "softmax"}])"},
      {"cnn", R"([{"type": "Reshape", "target_shape": [28, 28, 1]},
                 {"type": "Conv2D", "filters": 8, "kernel_size": 3, "activation": "relu"},
                 {"type": "MaxPooling2D", "pool_size": 2}, {"type": "BatchNormalization"},
                 {"type": "Flatten"}, {"type": "Dense", "units": 10, "activation": "softmax"}])"}};
  for (const auto& [name, list] : layers) {
    const Json spec = {
        {"model", {{"name", name}, {"input_shape", {784}}, {"layers", Json::parse(list)}, {"seed", 1}}},
        {"data", {{"dataset", "fashion_mnist"}, {"x", "X_val"}, {"y", "y_val"}}},
        {"fit", {{"batch_size", 64}, {"epochs", 1}, {"verbose", 0}, {"seed", 1}}},
        {"callbacks", {{{"type", "ModelCheckpoint"}, {"filepath", (out / name / "1").string()}}}},
        {"save_model", false}};
    std::ofstream(work.path() / "spec.json") << spec.dump();
    run_command("OMP_NUM_THREADS=2 " + kBin + "/tensorhub train-spec --spec " + (work.path() / "spec.json").string() +
                " --hub " + hub + " > /dev/null");
  }
  std::error_code ec;
  std::filesystem::rename(out, done, ec);  // another test process may have made it first
  std::filesystem::remove_all(out, ec);
  return done;
}

TEST_P(LiteServeTest, FashionMnistModelsTrainedByTensorhubPredictAsServeWithin1e5) {
  const auto models = trained_models();
  const Tensor images = read_idx(default_mnist_dir() / "t10k-images-idx3-ubyte.gz");  // U8 [10000, 28, 28]
  const Tensor labels = read_idx(default_mnist_dir() / "t10k-labels-idx1-ubyte.gz");  // U8 [10000]
  Json instances = Json::array();
  for (int i = 0; i < 100; ++i) {  // the first 100 test images
    std::vector<float> row(784);
    for (int j = 0; j < 784; ++j) row[j] = images.as<std::uint8_t>()[i * 784 + j] / 255.0f;
    instances.push_back(row);
  }
  for (const std::string name : {"mlp", "cnn"}) {
    SCOPED_TRACE(name);
    auto l = lite(name, (models / name).string());
    auto s = serve(name, (models / name).string());
    ASSERT_TRUE(l->wait_available(name)) << logs();
    ASSERT_TRUE(s->wait_available(name)) << logs();
    expect_same_predictions(*l, *s, name, Json{{"instances", instances}}.dump(), 1000);
    // Trained, not random: most test images get their label (one epoch on 10,000 images, seeded:
    // the MLP 69 and the CNN 74 of these 100 here; chance would be 10).
    const Json p = Json::parse(l->post("/v1/models/" + name + ":predict", Json{{"instances", instances}}.dump())->body);
    int right = 0;
    for (int i = 0; i < 100; ++i) {
      const auto& row = p["predictions"][i];
      right += std::max_element(row.begin(), row.end()) - row.begin() == labels.as<std::uint8_t>()[i];
    }
    EXPECT_GE(right, 50);
  }
}

TEST_P(LiteServeTest, ModelsItCannotRunAreRefusedAtLoadNamingTheLayer) {
  const auto base = dir_.path() / "lstm";
  write_version(base / "1", Json::parse(R"({"input_shape": [4], "layers": [{"type": "Dense", "units": 2},
      {"type": "LSTM", "units": 2}]})"), {});
  auto l = lite("lstm", base.string());
  Json status;
  ASSERT_TRUE(eventually([&] {
    auto r = l->get("/v1/models/lstm");
    if (!r || r->status != 200) return false;
    status = Json::parse(r->body);
    return status["model_version_status"][0]["state"] == "END";
  })) << logs();
  EXPECT_NE(status["model_version_status"][0]["status"]["error_message"].get<std::string>().find(
                "layers[1].type \"LSTM\" is not a layer"),
            std::string::npos) << status;
  auto r = l->post("/v1/models/lstm:predict", R"({"instances": [[1, 2, 3, 4]]})");
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("LSTM"), std::string::npos) << r->body;
  EXPECT_NE(read_text(dir_.path() / "lite.log").find("version 1 failed to load: layers[1].type \"LSTM\""), std::string::npos);
}

TEST_P(LiteServeTest, ANewerVersionIsPickedUpAndSigtermExitsZero) {
  const auto base = dir_.path() / "m";
  write_version(base / "1", Json::parse(R"({"input_shape": [], "layers": [{"type": "Rescaling", "scale": 2}]})"), {});
  auto l = lite("m", base.string());
  ASSERT_TRUE(l->wait_available("m", "1")) << logs();
  EXPECT_EQ(l->post("/v1/models/m:predict", R"({"instances": [1.5]})")->body, R"({"predictions":[3.0]})");
  write_version(base / "2", Json::parse(R"({"input_shape": [], "layers": [{"type": "Rescaling", "scale": 3}]})"), {});
  ASSERT_TRUE(l->wait_available("m", "2")) << logs();
  EXPECT_EQ(l->post("/v1/models/m:predict", R"({"instances": [1.5]})")->body, R"({"predictions":[4.5]})");
  EXPECT_EQ(Json::parse(l->get("/v1/models/m/versions/1")->body)["model_version_status"][0]["state"], "END");
  l->process().signal(SIGTERM);
  EXPECT_EQ(l->process().wait_for(30s), std::optional<int>(0)) << logs();
}

// The base path gone while serving (a volume unmounted): said once in the log, the loaded
// version keeps answering, and its return is noticed.
TEST_P(LiteServeTest, ABasePathGoneWhileServingIsSaidOnceAndTheVersionKeepsServing) {
  const auto base = dir_.path() / "m", moved = dir_.path() / "m.away";
  write_version(base / "1", Json::parse(R"({"input_shape": [], "layers": [{"type": "Rescaling", "scale": 2}]})"), {});
  auto l = lite("m", base.string());
  ASSERT_TRUE(l->wait_available("m", "1")) << logs();
  std::filesystem::rename(base, moved);
  const auto count = [&](const std::string& text) {
    const std::string log = read_text(dir_.path() / "lite.log");
    int n = 0;
    for (std::size_t at = 0; (at = log.find(text, at)) != std::string::npos; at += text.size()) ++n;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return count("is not a directory") == 1; }, 10000ms)) << logs();
  std::this_thread::sleep_for(1500ms);  // several more polls (every 0.2 s)
  EXPECT_EQ(count("is not a directory"), 1) << logs();
  EXPECT_EQ(l->post("/v1/models/m:predict", R"({"instances": [1.5]})")->body, R"({"predictions":[3.0]})");
  std::filesystem::rename(moved, base);
  EXPECT_TRUE(eventually([&] { return count("can be read again") == 1; }, 10000ms)) << logs();
}

// SIGTERM while a request is half sent: the server reads it to its end, answers it, and exits 0.
TEST_P(LiteServeTest, SigtermLetsTheRequestInFlightFinish) {
  auto l = lite("half_plus_two", kHalfPlusTwo);
  ASSERT_TRUE(l->wait_available("half_plus_two")) << logs();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(l->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = R"({"instances": [1.0, 2.0, 5.0]})";
  const std::string head = "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 10);
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(300ms);  // the server has the head and is waiting for the rest
  l->process().signal(SIGTERM);
  std::this_thread::sleep_for(500ms);
  const std::string rest = body.substr(10);
  ASSERT_EQ(::send(fd, rest.data(), rest.size(), 0), static_cast<ssize_t>(rest.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_NE(answer.find("HTTP/1.1 200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"({"predictions":[2.5,3.0,4.5]})"), std::string::npos) << answer;
  EXPECT_EQ(l->process().wait_for(30s), std::optional<int>(0)) << logs();
}

INSTANTIATE_TEST_SUITE_P(Arch, LiteServeTest, ::testing::Values("x86_64", "arm64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tensorhub
