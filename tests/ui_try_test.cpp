// The try-a-model endpoint of `tensorhub ui` (POST /v1/models/<id>:predict, ui/try_api.h) over
// real HTTP: a real tensorhub process on a SQLite hub holding real models, its answers compared
// with the model run here in the test process, its errors with TF Serving's codes.
#include <cmath>
#include <regex>

#include <gtest/gtest.h>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "ui_process.h"

namespace tensorhub::testing {
namespace {

// A small classifier: 4 inputs -> Dense 8 relu -> Dense 3 logits, weights from its seed.
Json small_architecture() {
  return {{"name", "small"},
          {"seed", 3},
          {"input_shape", {4}},
          {"layers", {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 3}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.001}}}};
}

struct TryHub : SqliteHubPaths {
  Hub hub{uri, "p"};
  Model model = Model::from_config(small_architecture());
  std::int64_t small = hub.save_model(model.config(), model.weights(), "small", {{"class_names", {"a", "b", "c"}}});
  // Saved without weights: it cannot be loaded.
  std::int64_t empty = hub.save_model(small_architecture(), {}, "no_weights");
};

struct Reply {
  int status = 0;
  Json body;
};

Reply post(const UiProcess& ui, const std::string& path, const std::string& body,
           const std::string& content_type = "application/json") {
  auto c = ui.client();
  const auto res = c.Post(path.c_str(), body, content_type.c_str());
  if (!res) return {};
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << path;
  return {res->status, Json::parse(res->body)};
}

TEST(UiTryApi, PredictAnswersWhatTheModelComputes) {
  TryHub h;
  UiProcess ui(h, "p");
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.0f, 0.0f, -0.5f};
  const Tensor expected = h.model.predict(Tensor::from<float>(DType::kF32, {2, 4}, x));
  ASSERT_EQ(expected.shape, (std::vector<std::int64_t>{2, 3}));

  const std::string path = "/v1/models/" + std::to_string(h.small) + ":predict";
  const Reply rows = post(ui, path, R"({"instances": [[0.5, -1.0, 2.0, 0.25], [1.0, 1.0, 0.0, -0.5]]})");
  ASSERT_EQ(rows.status, 200) << rows.body.dump();
  ASSERT_EQ(rows.body["predictions"].size(), 2u);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(rows.body["predictions"][i][k].get<double>(), expected.as<float>()[i * 3 + k], 1e-5) << i << "," << k;

  // Columnar format, and a body sent as `curl -d` sends it (a form type): the same numbers.
  const Reply columns = post(ui, path, R"({"inputs": [[0.5, -1.0, 2.0, 0.25]]})", "application/x-www-form-urlencoded");
  ASSERT_EQ(columns.status, 200) << columns.body.dump();
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(columns.body["outputs"][0][k].get<double>(), expected.as<float>()[k], 1e-5);

  // A form-typed body over 8 KiB (a 28x28 image is ~10 KiB), which httplib alone would refuse.
  Json many = {{"instances", Json::array()}};
  for (int i = 0; i < 600; ++i) many["instances"].push_back({0.5, -1.0, 2.0, 0.25});
  ASSERT_GT(many.dump().size(), 8192u);
  const Reply big = post(ui, path, many.dump(), "application/x-www-form-urlencoded");
  ASSERT_EQ(big.status, 200) << big.body.dump();
  ASSERT_EQ(big.body["predictions"].size(), 600u);
  EXPECT_NEAR(big.body["predictions"][599][2].get<double>(), expected.as<float>()[2], 1e-5);
}

// Occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(UiTryApi, KeepsTheLastEightModelsUsedLoaded) {
  TryHub h;
  std::vector<std::int64_t> ids = {h.small};
  for (int i = 0; i < 8; ++i) ids.push_back(h.hub.save_model(h.model.config(), h.model.weights(), "small"));
  UiProcess ui(h, "p");
  const auto predict = [&](std::int64_t id) {
    return post(ui, "/v1/models/" + std::to_string(id) + ":predict", R"({"instances": [[1, 2, 3, 4]]})").status;
  };
  for (const std::int64_t id : ids) EXPECT_EQ(predict(id), 200) << id;
  const std::string first = "model " + std::to_string(ids[0]);
  // The ninth model loaded dropped the least recently used one, the first; asked again, it is
  // loaded again (and the second one dropped), while the others stayed.
  EXPECT_TRUE(eventually([&] { return ui.log().find(first + " removed by a config reload") != std::string::npos; }))
      << ui.log();
  EXPECT_EQ(predict(ids[0]), 200);
  EXPECT_TRUE(eventually([&] {
    return count_of(ui.log(), first + " version " + std::to_string(ids[0]) + " is AVAILABLE") == 2;
  })) << ui.log();
  EXPECT_NE(ui.log().find("model " + std::to_string(ids[1]) + " removed by a config reload"), std::string::npos);
  EXPECT_EQ(count_of(ui.log(), "model " + std::to_string(ids[8]) + " version " + std::to_string(ids[8]) + " is AVAILABLE"), 1);
}

TEST(UiTryApi, ErrorsSayWhyWithTfServingsCodes) {
  TryHub h;
  UiProcess ui(h, "p");
  const std::string path = "/v1/models/" + std::to_string(h.small) + ":predict";

  const Reply bad_json = post(ui, path, R"({"instances": [[1, 2, 3, 4]])");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_NE(bad_json.body.value("error", "").find("JSON Parse error"), std::string::npos) << bad_json.body.dump();

  const Reply wrong_shape = post(ui, path, R"({"instances": [[1, 2]]})");
  EXPECT_EQ(wrong_shape.status, 400);
  EXPECT_FALSE(wrong_shape.body.value("error", "").empty()) << wrong_shape.body.dump();

  const Reply unknown = post(ui, "/v1/models/999:predict", R"({"instances": [[1, 2, 3, 4]]})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["error"],
            "no model 999 in project p: the dashboard serves its project's models by id "
            "(POST /v1/models/<id>:predict; the Models view lists them)");
  EXPECT_EQ(post(ui, "/v1/models/small:predict", R"({"instances": [[1, 2, 3, 4]]})").status, 404);

  const Reply no_weights = post(ui, "/v1/models/" + std::to_string(h.empty) + ":predict", R"({"instances": [[1, 2, 3, 4]]})");
  EXPECT_EQ(no_weights.status, 404);
  const std::string why = no_weights.body.value("error", "");
  EXPECT_EQ(why.rfind("model " + std::to_string(h.empty) + " of project p cannot be loaded: ", 0), 0u) << why;

  // The failures left the loaded model serving.
  EXPECT_EQ(post(ui, path, R"({"instances": [[1, 2, 3, 4]]})").status, 200);
}

TEST(UiTryApi, ModelsOfAnotherProjectAreNotServed) {
  TryHub h;
  Hub other(h.uri, "other");
  const Model m = Model::from_config(small_architecture());
  const std::int64_t id = other.save_model(m.config(), m.weights(), "small");
  UiProcess ui(h, "p");
  EXPECT_EQ(post(ui, "/v1/models/" + std::to_string(id) + ":predict", R"({"instances": [[1, 2, 3, 4]]})").status, 404);
}

// `tensorhub serve --hub ... --hub_model small --rest_api_port 0` on the hub; its port is read
// from its log.
class ServeProcess {
 public:
  explicit ServeProcess(const SqliteHubPaths& h) : log_((h.dir.path() / "serve.log").string()) {
    pid_ = spawn({kTensorhub, "serve", "--hub", h.uri, "--project", "p", "--hub_model", "small", "--rest_api_port", "0",
                  "--port", "0"},
                 log_);
    port_ = port_from_log(log_, R"(REST API on http://127\.0\.0\.1:(\d+))");
  }
  ~ServeProcess() {
    kill(pid_, SIGTERM);
    wait_exit(pid_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string log_;
  pid_t pid_ = 0;
  int port_ = 0;
};

TEST(UiTryApi, ServeUrlRunsPredictionsOnATensorhubServe) {
  TryHub h;
  ServeProcess serve(h);
  UiProcess ui(h, "p", {"--serve_url", serve.url()});
  const Tensor expected = h.model.predict(Tensor::from<float>(DType::kF32, {1, 4}, {0.5f, -1.0f, 2.0f, 0.25f}));
  const Reply reply = post(ui, "/v1/models/" + std::to_string(h.small) + ":predict", R"({"instances": [[0.5, -1.0, 2.0, 0.25]]})");
  ASSERT_EQ(reply.status, 200) << reply.body.dump();
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(reply.body["predictions"][0][k].get<double>(), expected.as<float>()[k], 1e-5);

  // A model the serve does not serve: its own 404 and message come back.
  const Reply not_served = post(ui, "/v1/models/" + std::to_string(h.empty) + ":predict", R"({"instances": [[1, 2, 3, 4]]})");
  EXPECT_EQ(not_served.status, 404);
  EXPECT_NE(not_served.body.value("error", "").find("no_weights"), std::string::npos) << not_served.body.dump();
  EXPECT_EQ(post(ui, "/v1/models/999:predict", R"({"instances": [[1, 2, 3, 4]]})").status, 404);
}

TEST(UiTryApi, ServeUrlThatDoesNotAnswerIs503AndAMalformedOneRefusedAtStart) {
  TryHub h;
  {
    UiProcess ui(h, "p", {"--serve_url", "http://127.0.0.1:1"});  // nothing listens on port 1
    const Reply reply = post(ui, "/v1/models/" + std::to_string(h.small) + ":predict", R"({"instances": [[1, 2, 3, 4]]})");
    EXPECT_EQ(reply.status, 503);
    EXPECT_EQ(reply.body.value("error", "").rfind("the tensorhub serve at http://127.0.0.1:1 (--serve_url) did not answer", 0), 0u)
        << reply.body.dump();
  }
  const std::string log = (h.dir.path() / "bad-url.log").string();
  const pid_t pid = spawn({kTensorhub, "ui", "--hub", h.uri, "--project", "p", "--port", "0", "--serve_url",
                           "https://127.0.0.1:8501/v1"},
                          log);
  EXPECT_EQ(wait_exit(pid), 2);  // a usage error: the command line is wrong
  EXPECT_NE(read_text(log).find("--serve_url must be http://HOST:PORT"), std::string::npos) << read_text(log);
}

}  // namespace
}  // namespace tensorhub::testing
