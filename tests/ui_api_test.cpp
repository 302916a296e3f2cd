// `tensorhub ui`'s JSON API over real HTTP: a real tensorhub process on a seeded SQLite hub,
// spoken to with cpp-httplib's client, as the page and scripts speak to it.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "process_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/store/hub.h"

namespace tensorhub::testing {
namespace {

// The MLP of the demo at a smaller size: 784 -> Dropout -> Dense 32 relu -> Dense 10.
Json mlp_architecture() {
  return {{"name", "mlp"},
          {"input_shape", {784}},
          {"layers", {{{"type", "Dropout"}, {"rate", 0.2}},
                      {{"type", "Dense"}, {"units", 32}, {"activation", "relu"}},
                      {{"type", "Dense"}, {"units", 10}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.001}}}};
}

TaskSpec spec_named(const std::string& name, int max_attempts = 3) {
  TaskSpec s;
  s.task_name = name;
  s.command = "true";
  s.hyper_parameters = {{"lr", 0.01}};
  s.max_attempts = max_attempts;
  return s;
}

// A hub with a task in every state, one dataset and three models; ids kept for the checks.
struct SeededHub : SqliteHubFiles {
  std::int64_t pending, running, finished, failed, cancelled;
  std::int64_t low, high, xss;

  SeededHub() {
    hub.save_dataset({{"x", Tensor::from<float>(DType::kF32, {2}, {1, 2})}}, "ds");
    finished = queue.create_task(spec_named("finished"));
    auto t = queue.claim("finished", "runner-a", 60);
    queue.complete(*t, {{"test_accuracy", 0.875}});
    failed = queue.create_task(spec_named("failed", 1));
    t = queue.claim("failed", "runner-a", 60);
    queue.fail(*t, "exit status 1", "line one\nTraceback: out of memory\n");
    cancelled = queue.create_task(spec_named("cancelled"));
    queue.cancel_tasks({{"id", cancelled}});
    running = queue.create_task(spec_named("running"));
    queue.claim("running", "runner-b", 600);
    pending = queue.create_task(spec_named("pending"));
    low = hub.save_model(mlp_architecture(), {}, "mlp", {{"test_accuracy", 0.5}, {"name", "low"}});
    high = hub.save_model(mlp_architecture(), {}, "mlp", {{"test_accuracy", 0.9}, {"name", "high"}});
    xss = hub.save_model(mlp_architecture(), {}, "<img src=x onerror=alert(1)>", {{"test_accuracy", 0.7}});
  }
};

// `tensorhub ui --port 0` on the seeded hub; the port is read from its first line.
class UiProcess {
 public:
  explicit UiProcess(const SqliteHubFiles& h, const std::vector<std::string>& extra = {})
      : log_(h.log), pid_(spawn(args(h, extra), h.log)) {
    port_ = port_from_log(log_, R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  }
  ~UiProcess() {
    kill(pid_, SIGTERM);
    wait_exit(pid_);
  }
  static std::vector<std::string> args(const SqliteHubFiles& h, const std::vector<std::string>& extra) {
    std::vector<std::string> a = {kTensorhub, "ui", "--hub", h.uri, "--project", "p", "--port", "0"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  int port() const { return port_; }
  // POST /api/tasks/<id>/cancel with `token` (none when empty); the status and the body.
  std::pair<int, Json> cancel(std::int64_t id, const std::string& token) const {
    auto c = client();
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("X-Tensorhub-Token", token);
    const auto res = c.Post(("/api/tasks/" + std::to_string(id) + "/cancel").c_str(), headers, "", "text/plain");
    if (!res) return {0, nullptr};
    return {res->status, Json::parse(res->body)};
  }
  // The token in the page's <meta name="tensorhub-cancel-token" content="...">.
  std::string page_token() const {
    auto c = client();
    const auto res = c.Get("/");
    std::smatch m;
    const std::regex meta(R"re(<meta name="tensorhub-cancel-token" content="([^"]*)">)re");
    if (!res || !std::regex_search(res->body, m, meta)) ADD_FAILURE() << "no token meta in the page";
    return m.empty() ? "" : m[1].str();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(90, 0);
    return c;
  }
  Json get(const std::string& path, int expect_status = 200) const {
    auto c = client();
    const auto res = c.Get(path.c_str());
    if (!res) ADD_FAILURE() << "no answer to GET " << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, expect_status) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    return Json::parse(res->body);
  }

 private:
  std::string log_;
  pid_t pid_;
  int port_ = 0;
};

Json row_with_id(const Json& rows, std::int64_t id) {
  for (const auto& r : rows)
    if (r["id"] == id) return r;
  ADD_FAILURE() << "no row with id " << id << " in " << rows.dump();
  return Json::object();
}

TEST(UiApi, ProjectsCountsDatasetsModelsAndTasksByStatus) {
  SeededHub h;
  UiProcess ui(h);
  const Json body = ui.get("/api/projects");
  ASSERT_EQ(body["projects"].size(), 1u);
  const Json& p = body["projects"][0];
  EXPECT_EQ(p["name"], "p");
  EXPECT_EQ(p["datasets"], 1);
  EXPECT_EQ(p["models"], 3);
  EXPECT_EQ(p["searches"], 0);
  EXPECT_EQ(p["tasks"], Json({{"pending", 1}, {"running", 1}, {"finished", 1}, {"failed", 1}, {"cancelled", 1},
                              {"total", 5}}));
}

TEST(UiApi, TasksNewestFirstWithStatusRunnerResultAndErrorTail) {
  SeededHub h;
  UiProcess ui(h);
  const Json tasks = ui.get("/api/tasks")["tasks"];
  std::vector<std::int64_t> ids;
  for (const auto& t : tasks) ids.push_back(t["id"]);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{h.pending, h.running, h.cancelled, h.failed, h.finished}));

  const Json finished = row_with_id(tasks, h.finished);
  const Task stored = h.queue.get_task(h.finished);
  EXPECT_EQ(finished["status"], "finished");
  EXPECT_EQ(finished["result"], Json({{"test_accuracy", 0.875}}));
  EXPECT_EQ(finished["hyper_parameters"], Json({{"lr", 0.01}}));
  EXPECT_EQ(finished["attempt"], 1);
  EXPECT_DOUBLE_EQ(finished["duration_s"].get<double>(), (stored.finished_at - stored.started_at) / 1e6);
  EXPECT_EQ(finished["error_tail"], "");

  const Json failed = row_with_id(tasks, h.failed);
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"], "exit status 1");
  EXPECT_EQ(failed["error_tail"], "line one\nTraceback: out of memory\n");

  const Json running = row_with_id(tasks, h.running);
  EXPECT_EQ(running["status"], "running");
  EXPECT_EQ(running["runner"], "runner-b");
  EXPECT_TRUE(running["duration_s"].is_number());
  EXPECT_TRUE(running["finished"].is_null());

  const Json pending = row_with_id(tasks, h.pending);
  EXPECT_TRUE(pending["started"].is_null());
  EXPECT_TRUE(pending["duration_s"].is_null());
}

TEST(UiApi, TasksShowTheResourcesTheyAskForAndWhyAPendingOneWaits) {
  SeededHub h;
  TaskSpec big = spec_named("big");
  big.resources = {2, 1, 8LL << 30};
  const auto big_id = h.queue.create_task(big);
  UiProcess ui(h);
  const Json before = ui.get("/api/tasks");
  // No runner in the project: each pending task says so; the others have no reason.
  EXPECT_EQ(row_with_id(before["tasks"], h.pending)["waiting_for"], "no live runner");
  EXPECT_EQ(row_with_id(before["tasks"], big_id)["waiting_for"], "no live runner");
  EXPECT_TRUE(row_with_id(before["tasks"], h.running)["waiting_for"].is_null());
  EXPECT_EQ(row_with_id(before["tasks"], big_id)["resources"],
            Json({{"cpus", 2}, {"gpus", 1}, {"memory", "8 GiB"}, {"memory_bytes", 8LL << 30}, {"text", "2 cpus, 1 GPU, 8 GiB"}}));
  EXPECT_TRUE(row_with_id(before["tasks"], h.pending)["resources"].is_null());
  // A runner of any task name without a GPU comes: a change a waiting request answers; the
  // plain task fits it (no reason), the big one does not.
  std::atomic<bool> answered{false};
  Json after;
  std::thread waiter([&] {
    after = ui.get("/api/tasks?since=" + before["version"].get<std::string>() + "&wait=60");
    answered = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(answered) << "answered before anything changed: " << after.dump();
  RunnerInfo runner;
  runner.owner = "r";
  runner.host = "h";
  runner.cpus = 4;
  runner.memory_bytes = 16LL << 30;
  runner.lease_s = 600;
  h.queue.register_runner(runner);
  waiter.join();
  EXPECT_TRUE(row_with_id(after["tasks"], h.pending)["waiting_for"].is_null());
  EXPECT_EQ(row_with_id(after["tasks"], big_id)["waiting_for"], "needs 1 GPU; the live runner has 0");
  // The task's detail has both.
  const Json detail = ui.get("/api/tasks/" + std::to_string(big_id) + "/usage")["task"];
  EXPECT_EQ(detail["resources"]["text"], "2 cpus, 1 GPU, 8 GiB");
  EXPECT_EQ(detail["waiting_for"], "needs 1 GPU; the live runner has 0");
  const Json plain = ui.get("/api/tasks/" + std::to_string(h.pending) + "/usage")["task"];
  EXPECT_TRUE(plain["resources"].is_null());
  EXPECT_TRUE(plain["waiting_for"].is_null());
}

TEST(UiApi, TasksLongPollAnswersWhenAStatusChanges) {
  SeededHub h;
  UiProcess ui(h);
  const Json before = ui.get("/api/tasks");
  // Unchanged and not waiting: the same version comes straight back.
  EXPECT_EQ(ui.get("/api/tasks?since=" + before["version"].get<std::string>() + "&wait=0")["version"],
            before["version"]);

  // A request waiting on the current version; another process (here: this one's own hub
  // connection) cancels the pending task once the request is in.
  std::atomic<bool> answered{false};
  Json after;
  std::thread waiter([&] {
    after = ui.get("/api/tasks?since=" + before["version"].get<std::string>() + "&wait=60");
    answered = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(answered) << "answered before anything changed: " << after.dump();
  h.queue.cancel_tasks({{"id", h.pending}});
  waiter.join();
  EXPECT_NE(after["version"], before["version"]);
  EXPECT_EQ(row_with_id(after["tasks"], h.pending)["status"], "cancelled");
}

TEST(UiApi, RunningTasksShowTheirAttemptsLastEpoch) {
  SeededHub h;
  // Attempt 1 (the current one) reported epochs 0 and 1; a report of attempt 0 is not its own.
  save_epoch_report(h.hub, h.running, 1, 0, {{"loss", 0.9}});
  save_epoch_report(h.hub, h.running, 1, 1, {{"loss", 0.4}, {"val_accuracy", 0.85}});
  save_epoch_report(h.hub, h.running, 0, 7, {{"loss", 9.0}});
  UiProcess ui(h);
  const Json before = ui.get("/api/tasks");
  EXPECT_EQ(row_with_id(before["tasks"], h.running)["last_epoch"],
            Json({{"epoch", 1}, {"logs", {{"loss", 0.4}, {"val_accuracy", 0.85}}}}));
  EXPECT_TRUE(row_with_id(before["tasks"], h.pending)["last_epoch"].is_null());
  EXPECT_TRUE(row_with_id(before["tasks"], h.finished)["last_epoch"].is_null());
  // A new report is a change a waiting request answers.
  save_epoch_report(h.hub, h.running, 1, 2, {{"loss", std::numeric_limits<double>::quiet_NaN()}});
  const Json after = ui.get("/api/tasks?since=" + before["version"].get<std::string>() + "&wait=30");
  EXPECT_EQ(row_with_id(after["tasks"], h.running)["last_epoch"],
            Json({{"epoch", 2}, {"logs", {{"loss", {{"$numberDouble", "NaN"}}}}}}));
}

TEST(UiApi, ModelsSortFilterAndPage) {
  SeededHub h;
  UiProcess ui(h);
  auto ids_of = [](const Json& body) {
    std::vector<std::int64_t> ids;
    for (const auto& m : body["models"]) ids.push_back(m["id"]);
    return ids;
  };
  const Json best_first = ui.get("/api/models?sort=test_accuracy:-1");
  EXPECT_EQ(ids_of(best_first), (std::vector<std::int64_t>{h.high, h.xss, h.low}));
  EXPECT_EQ(best_first["total"], 3);
  EXPECT_EQ(best_first["keys"], Json({"model_name", "name", "test_accuracy"}));
  EXPECT_EQ(row_with_id(best_first["models"], h.xss)["model_name"], "<img src=x onerror=alert(1)>");
  EXPECT_EQ(ids_of(ui.get("/api/models?sort=test_accuracy:1")), (std::vector<std::int64_t>{h.low, h.xss, h.high}));

  // {"test_accuracy": {"$gte": 0.6}}, URL-encoded as the page sends it.
  const Json filtered =
      ui.get("/api/models?sort=test_accuracy:-1&filter=%7B%22test_accuracy%22%3A%7B%22%24gte%22%3A0.6%7D%7D");
  EXPECT_EQ(ids_of(filtered), (std::vector<std::int64_t>{h.high, h.xss}));
  EXPECT_EQ(filtered["total"], 2);

  const Json page2 = ui.get("/api/models?sort=test_accuracy:-1&offset=1&limit=1");
  EXPECT_EQ(ids_of(page2), (std::vector<std::int64_t>{h.xss}));
  EXPECT_EQ(page2["total"], 3);
  EXPECT_EQ(page2["offset"], 1);
}

TEST(UiApi, ModelsRefuseBadParametersWithTheReason) {
  SeededHub h;
  UiProcess ui(h);
  // The position and the reason, without the JSON library's internals.
  const std::string not_json = ui.get("/api/models?filter=%7Bnot%20json", 400)["error"];
  EXPECT_TRUE(not_json.starts_with("filter is not JSON: parse error at line 1, column 3")) << not_json;
  EXPECT_EQ(not_json.find("json.exception"), std::string::npos) << not_json;
  EXPECT_NE(ui.get("/api/models?filter=%5B1%5D", 400)["error"].get<std::string>().find("must be a JSON object"),
            std::string::npos);
  // {"name": {"$regex": "a"}}: an operator the store does not know.
  EXPECT_NE(ui.get("/api/models?filter=%7B%22name%22%3A%7B%22%24regex%22%3A%22a%22%7D%7D", 400)["error"]
                .get<std::string>()
                .find("$regex"),
            std::string::npos);
  EXPECT_EQ(ui.get("/api/models?sort=test_accuracy:2", 400)["error"],
            "sort \"test_accuracy:2\": direction must be 1 or -1 (asc or desc)");  // once "sort", not "sort: sort"
  EXPECT_NE(ui.get("/api/models?limit=0", 400)["error"].get<std::string>().find("limit must be in 1..1000"),
            std::string::npos);
  EXPECT_NE(ui.get("/api/nothing", 404)["error"].get<std::string>().find("no API endpoint /api/nothing"),
            std::string::npos);
  // Its list of endpoints names the task detail's too.
  EXPECT_NE(ui.get("/api/nothing", 404)["error"].get<std::string>().find("/api/tasks/<id>/usage"), std::string::npos);
}

TEST(UiApi, ModelLayersWithShapesAndParameterCounts) {
  SeededHub h;
  UiProcess ui(h);
  const Json m = ui.get("/api/models/" + std::to_string(h.high));
  EXPECT_EQ(m["model_name"], "mlp");
  EXPECT_EQ(m["tags"]["name"], "high");
  EXPECT_EQ(m["input_shape"], Json({784}));
  EXPECT_EQ(m["output_shape"], Json({10}));
  // Keras's summary(): Dense 784 -> 32 has 784 * 32 + 32 weights, Dense 32 -> 10 has 330.
  ASSERT_EQ(m["layers"].size(), 3u);
  EXPECT_EQ(m["layers"][0], Json({{"name", "dropout"}, {"type", "Dropout"}, {"input_shape", {784}},
                                  {"output_shape", {784}}, {"params", 0}}));
  EXPECT_EQ(m["layers"][1], Json({{"name", "dense"}, {"type", "Dense"}, {"input_shape", {784}},
                                  {"output_shape", {32}}, {"params", 25120}}));
  EXPECT_EQ(m["layers"][2]["params"], 330);
  EXPECT_EQ(m["total_params"], 25450);
  EXPECT_EQ(m["architecture"], mlp_architecture());
  EXPECT_NE(ui.get("/api/models/999", 404)["error"].get<std::string>().find("no model with id 999"),
            std::string::npos);
  EXPECT_EQ(m["serve_command"], "tensorhub serve --hub '" + h.uri + "' --project 'p' --hub_model 'mlp' --hub_filter "
                                "'{\"id\":" + std::to_string(h.high) + "}' --model_name 'mlp'");
}

TEST(UiApi, ModelFilesDownloadAsStored) {
  SeededHub h;
  h.high = h.hub.save_model(mlp_architecture(), {{"dense.bias", Tensor::from<float>(DType::kF32, {2}, {0.5f, -1.5f})}},
                            "mlp", {{"test_accuracy", 0.95}});
  UiProcess ui(h);
  auto c = ui.client();
  const Document doc = h.hub.find_models({{"id", h.high}}).at(0);
  for (const std::string part : {"model.json", "weights.safetensors"}) {
    const auto res = c.Get(("/api/models/" + std::to_string(h.high) + "/" + part).c_str());
    ASSERT_TRUE(res) << part;
    EXPECT_EQ(res->status, 200) << res->body;
    const auto stored = h.hub.load_model_part(doc, part).value();
    EXPECT_EQ(res->body, std::string(reinterpret_cast<const char*>(stored.data()), stored.size())) << part;
    EXPECT_NE(res->get_header_value("Content-Disposition").find("attachment"), std::string::npos);
  }
  EXPECT_EQ(from_safetensors(h.hub.load_model_part(doc, "weights.safetensors").value(), "weights").at("dense.bias").shape,
            (std::vector<std::int64_t>{2}));
  const auto missing = c.Get("/api/models/999/model.json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(UiApi, ServesTheEmbeddedPageAndFilesAsBuilt) {
  SeededHub h;
  UiProcess ui(h);
  auto c = ui.client();
  for (const std::string name : {"index.html", "app.js", "style.css"}) {
    const auto res = c.Get(("/" + name).c_str());
    ASSERT_TRUE(res) << name;
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, read_text(std::filesystem::path(TENSORHUB_SOURCE_DIR) / "ui" / name)) << name;
    EXPECT_NE(res->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  }
  const auto root = c.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(root->body.find("/app.js"), std::string::npos);
  const auto missing = c.Get("/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(UiApi, CancelIsRefusedWithoutAllowCancel) {
  SeededHub h;
  UiProcess ui(h);
  EXPECT_EQ(ui.page_token(), "");
  const auto [status, body] = ui.cancel(h.pending, "anything");
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body["error"], "cancelling is off: start tensorhub ui with --allow-cancel");
  EXPECT_EQ(h.queue.get_task(h.pending).status, TaskStatus::kPending);
}

TEST(UiApi, CancelNeedsThisStartsTokenAndAPendingOrRunningTask) {
  SeededHub h;
  UiProcess ui(h, {"--allow-cancel"});
  const std::string token = ui.page_token();
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(ui.cancel(h.pending, "").first, 403);
  EXPECT_EQ(ui.cancel(h.pending, std::string(32, '0')).first, 403);
  EXPECT_EQ(h.queue.get_task(h.pending).status, TaskStatus::kPending);

  const auto [status, body] = ui.cancel(h.running, token);
  EXPECT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body, Json({{"id", h.running}, {"status", "cancelled"}}));
  EXPECT_EQ(h.queue.get_task(h.running).status, TaskStatus::kCancelled);
  EXPECT_EQ(h.queue.get_task(h.pending).status, TaskStatus::kPending);

  const auto [finished_status, finished_body] = ui.cancel(h.finished, token);
  EXPECT_EQ(finished_status, 400);
  EXPECT_EQ(finished_body["error"], "task " + std::to_string(h.finished) +
                                        " is finished; only pending or running tasks can be cancelled");
  EXPECT_EQ(h.queue.get_task(h.finished).status, TaskStatus::kFinished);
  EXPECT_EQ(ui.cancel(999, token).first, 404);
}

TEST(UiApi, RequestsNamingAnotherHostAreRefused) {
  SeededHub h;
  UiProcess ui(h, {"--allow-cancel"});
  auto c = ui.client();
  // A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own name.
  const auto rebound = c.Get("/api/tasks", {{"Host", "attacker.test:" + std::to_string(ui.port())}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  EXPECT_NE(rebound->body.find("is not this dashboard's address"), std::string::npos) << rebound->body;
  const auto page = c.Get("/", {{"Host", "attacker.test:" + std::to_string(ui.port())}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 403);
  EXPECT_EQ(page->body.find("tensorhub-cancel-token"), std::string::npos);
  const auto by_name = c.Get("/api/projects", {{"Host", "localhost:" + std::to_string(ui.port())}});
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->status, 200);
}

TEST(UiApi, NoHubAtTheUriIsAnErrorAndNothingIsCreated) {
  TempDir dir;
  const std::string log = (dir.path() / "ui.log").string();
  const pid_t pid = spawn({kTensorhub, "ui", "--hub", "sqlite://" + (dir.path() / "hub.db").string(), "--port", "0"}, log);
  EXPECT_EQ(wait_exit(pid), 1);
  EXPECT_NE(read_text(log).find("no hub at"), std::string::npos) << read_text(log);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "hub.db"));
}

}  // namespace
}  // namespace tensorhub::testing
