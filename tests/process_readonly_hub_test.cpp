// The tensorhub command on a hub its user may only read (issue 26), as real processes: the
// commands that read (task list/show/wait, model and dataset list, model fetch), the model
// server (serve --hub_model) and the dashboard (ui) work, and the commands that write (task
// create/cancel, model delete, hub init/compact) fail at once saying that the hub is
// read-only, instead of waiting 25-51 s for "attempt to write a readonly database".
//
// Three hubs: a SQLite file the user may not write (in a directory it may), a SQLite file in a
// directory it may not write, and a PostgreSQL database read through a role with SELECT only.
// For SQLite the commands run as the user "nobody" (setpriv) when the test runs as root, whose
// writes pass every file mode; the hub's modes are real.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend_factory.h"
#include "process_util.h"
#include "readonly_util.h"
#include "tensorhub/core/named_tensors.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace testing;

// A command that writes must fail well before the 25-51 s the busy retries took (issue 26);
// loose, so that a loaded machine cannot fail it.
constexpr auto kAtOnce = 10s;

// y = 2 a - b + 0.5 for an input [a, b]: one Dense unit, saved as `tensorhub model save` would.
void save_linear_model(Hub& hub) {
  const Json arch{{"name", "lin"},
                  {"input_shape", {2}},
                  {"layers", {{{"type", "Dense"}, {"name", "out"}, {"units", 1}}}},
                  {"loss", "mse"},
                  {"optimizer", {{"type", "Adam"}}}};
  NamedTensors w;
  w["out.weight"] = Tensor::from<float>(DType::kF32, {1, 2}, std::vector<float>{2.0f, -1.0f});
  w["out.bias"] = Tensor::from<float>(DType::kF32, {1}, std::vector<float>{0.5f});
  hub.save_model(arch, w, "lin", {{"test_accuracy", 0.75}});
}

void fill(const std::string& uri) {
  Hub hub(uri, "p");
  save_linear_model(hub);
  hub.save_dataset({{"x", Tensor::from<float>(DType::kF32, {2}, {1.0f, 2.0f})}}, "d");
  TaskSpec spec;
  spec.task_name = "t";
  spec.command = "echo hi";
  TaskQueue(hub).create_task(spec);
}

// The body of a whole HTTP reply (raw_http_exchange's), "" without one.
std::string body_of(const std::string& reply) {
  const auto end = reply.find("\r\n\r\n");
  return end == std::string::npos ? "" : reply.substr(end + 4);
}

std::string get(int port, const std::string& path) {
  return raw_http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                                     "\r\nConnection: close\r\n\r\n");
}

enum class Kind { kSqliteFile, kSqliteDirectory, kPostgresSelectOnly };

struct CaseParam {
  std::string name;
  Kind kind;
};

void PrintTo(const CaseParam& p, std::ostream* os) { *os << p.name; }

class ReadOnlyCliTest : public ::testing::TestWithParam<CaseParam> {
 protected:
  void SetUp() override {
    fs::permissions(dir.path(), fs::perms(0755));  // the reader may enter (mkdtemp made 0700)
    fs::permissions(out.path(), fs::perms(0777));  // and write what it fetches here
    log = (out.path() / "command.log").string();
    if (GetParam().kind == Kind::kPostgresSelectOnly) {
      pg_ = PostgresTestDatabase::create();
      if (!pg_) GTEST_SKIP() << kNoPostgres;
      fill(pg_->uri());
      admin_ = std::make_unique<Hub>(pg_->uri(), "p");
      role_ = std::make_unique<SelectOnlyRole>(*admin_, pg_->uri());
      uri = role_->uri();
      return;
    }
    const std::string path = (dir.path() / "hub.db").string();
    uri = "sqlite://" + path;
    fill(uri);
    if (GetParam().kind == Kind::kSqliteFile) {
      fs::permissions(path, fs::perms(0444));
      fs::permissions(dir.path(), fs::perms(0777));
    } else {
      fs::permissions(path, fs::perms(0666));
      fs::permissions(dir.path(), fs::perms(0555));
    }
  }
  void TearDown() override { fs::permissions(dir.path(), fs::perms(0755)); }

  // argv as the reader runs it: behind setpriv as nobody when the test is root.
  std::vector<std::string> as_reader(std::vector<std::string> args) const {
    if (::geteuid() == 0)
      args.insert(args.begin(), {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
    return args;
  }

  struct Run {
    int exit = -1;
    std::string output;
    std::chrono::milliseconds took{};
  };

  // `tensorhub <args> --hub <uri> --project p` as the reader, bounded by a minute.
  Run tensorhub(std::vector<std::string> args) {
    args.insert(args.begin(), kTensorhub);
    args.insert(args.end(), {"--hub", uri, "--project", "p"});
    fs::remove(log);
    const auto start = std::chrono::steady_clock::now();
    const auto code = wait_exit_within(spawn(as_reader(args), log), 60s);
    Run r;
    r.exit = code.value_or(-1);
    r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    r.output = read_text(log);
    return r;
  }

  TempDir dir, out;
  std::string uri, log;
  std::unique_ptr<TestDatabase> pg_;
  std::unique_ptr<Hub> admin_;
  std::unique_ptr<SelectOnlyRole> role_;
};

TEST_P(ReadOnlyCliTest, CommandsThatReadWork) {
  auto r = tensorhub({"task", "list"});
  ASSERT_EQ(r.exit, 0) << r.output;
  EXPECT_NE(r.output.find("1   t          pending"), std::string::npos) << r.output;
  r = tensorhub({"task", "list", "--json"});
  ASSERT_EQ(r.exit, 0) << r.output;
  const json tasks = json::parse(r.output);
  ASSERT_EQ(tasks.size(), 1u) << r.output;
  EXPECT_EQ(tasks[0]["command"], "echo hi") << r.output;
  EXPECT_EQ(tasks[0]["status"], "pending") << r.output;

  r = tensorhub({"task", "show", "1"});
  ASSERT_EQ(r.exit, 0) << r.output;
  EXPECT_EQ(json::parse(r.output)["task_name"], "t") << r.output;

  r = tensorhub({"model", "list", "--json"});
  ASSERT_EQ(r.exit, 0) << r.output;
  const json models = json::parse(r.output);
  ASSERT_EQ(models.size(), 1u) << r.output;
  EXPECT_EQ(models[0]["model_name"], "lin") << r.output;
  EXPECT_EQ(models[0]["test_accuracy"], 0.75) << r.output;

  r = tensorhub({"dataset", "list", "--json"});
  ASSERT_EQ(r.exit, 0) << r.output;
  EXPECT_EQ(json::parse(r.output).at(0)["dataset_name"], "d") << r.output;

  const fs::path fetched = out.path() / "lin";
  r = tensorhub({"model", "fetch", "--model-name", "lin", "--output", fetched.string()});
  ASSERT_EQ(r.exit, 0) << r.output;
  const NamedTensors w = read_safetensors(fetched / "weights.safetensors");
  EXPECT_EQ(w.at("out.bias").as<float>()[0], 0.5f);

  // wait reads too, and says what a reader of a read-only hub leaves undone.
  r = tensorhub({"task", "wait", "1", "--timeout", "1"});
  EXPECT_EQ(r.exit, 1) << r.output;
  EXPECT_NE(r.output.find("the hub is read-only for this user: it is only read"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tasks still unfinished after --timeout 1 s: 1 pending"), std::string::npos) << r.output;
}

TEST_P(ReadOnlyCliTest, CommandsThatWriteSayAtOnceThatTheHubIsReadOnly) {
  const std::vector<std::vector<std::string>> writes = {{"task", "create", "--task-name", "t2", "--command", "true"},
                                                        {"task", "cancel", "--all"},
                                                        {"model", "delete", "--all"},
                                                        {"hub", "init"},
                                                        {"hub", "compact"}};
  for (const auto& args : writes) {
    const auto r = tensorhub(args);
    EXPECT_EQ(r.exit, 1) << args[0] << " " << args[1] << ": " << r.output;
    EXPECT_NE(r.output.find("tensorhub: the hub " + mask_passwords(uri) + " is read-only ("), std::string::npos)
        << args[0] << " " << args[1] << ": " << r.output;
    EXPECT_LT(r.took, kAtOnce) << args[0] << " " << args[1];
  }
  // Nothing was written.
  const auto r = tensorhub({"task", "list", "--json"});
  ASSERT_EQ(r.exit, 0) << r.output;
  const json tasks = json::parse(r.output);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0]["status"], "pending");
  EXPECT_EQ(tensorhub({"model", "list", "--json"}).output.find("lin") != std::string::npos, true);
}

TEST_P(ReadOnlyCliTest, ServeHubModelAndTheDashboardWork) {
  // serve --hub_model: the model loads and answers y = 2 a - b + 0.5.
  const int port = free_port();
  const pid_t serve = spawn(as_reader({kTensorhub, "serve", "--rest_api_port", std::to_string(port), "--port", "0",
                                       "--hub", uri, "--project", "p", "--hub_model", "lin"}),
                            log);
  const bool available = eventually([&] { return body_of(get(port, "/v1/models/lin")).find("AVAILABLE") != std::string::npos; },
                                    60s);
  std::string predicted;
  if (available) {
    const std::string body = R"({"instances": [[1.0, 2.0], [3.0, 1.0]]})";
    predicted = body_of(raw_http_exchange(
        port, "POST /v1/models/lin:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body));
  }
  kill(serve, SIGTERM);
  wait_exit_within(serve, 30s);
  ASSERT_TRUE(available) << read_text(log);
  EXPECT_EQ(json::parse(predicted), json::parse(R"({"predictions": [[0.5], [5.5]]})")) << predicted;

  // The dashboard: the project's counts and its task.
  fs::remove(log);
  const pid_t ui = spawn(as_reader({kTensorhub, "ui", "--hub", uri, "--project", "p", "--port", "0"}), log);
  const int ui_port = port_from_log(log, R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  const std::string projects = body_of(get(ui_port, "/api/projects"));
  const std::string tasks = body_of(get(ui_port, "/api/tasks"));
  kill(ui, SIGTERM);
  wait_exit_within(ui, 30s);
  const json p = json::parse(projects, nullptr, false);
  ASSERT_FALSE(p.is_discarded()) << projects << read_text(log);
  EXPECT_EQ(p["projects"][0]["name"], "p") << projects;
  EXPECT_EQ(p["projects"][0]["models"], 1) << projects;
  EXPECT_EQ(p["projects"][0]["datasets"], 1) << projects;
  EXPECT_EQ(p["projects"][0]["tasks"]["pending"], 1) << projects;
  EXPECT_NE(tasks.find(R"("task_name":"t")"), std::string::npos) << tasks;
}

INSTANTIATE_TEST_SUITE_P(Hubs, ReadOnlyCliTest,
                         ::testing::Values(CaseParam{"sqlite_file", Kind::kSqliteFile},
                                           CaseParam{"sqlite_directory", Kind::kSqliteDirectory},
                                           CaseParam{"postgresql_select_only", Kind::kPostgresSelectOnly}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tensorhub
