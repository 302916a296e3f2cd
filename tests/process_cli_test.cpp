// The `tensorhub` command line as a user meets it (issue 15's report), run as real processes
// on a real hub: read-only commands never create a hub, `task wait` judges only the tasks it
// waits for, a running task's epochs show, misspelt sort keys are warned about, errors name
// what was wrong (exit 2 for a wrong command line), no output shows a password, and deletes
// give space back. The suite runs on SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/queue/epoch_report.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

class CliTest : public BackendTest {
 protected:
  void set_up() override { uri = db_->uri(); }

  // Runs `tensorhub ARGS --hub uri --project p` (no hub options when `hub_options` is false);
  // its exit code, with stdout and stderr in output().
  int tensorhub(std::vector<std::string> args, bool hub_options = true) {
    args.insert(args.begin(), kTensorhub);
    if (hub_options) args.insert(args.end(), {"--hub", uri, "--project", "p"});
    std::filesystem::remove(log);
    return wait_exit(spawn(args, log));
  }
  // Runs a /bin/sh command line; its exit code, output in output().
  int shell(const std::string& line) {
    std::filesystem::remove(log);
    return wait_exit(spawn({"/bin/sh", "-c", line}, log));
  }
  std::string output() { return read_text(log); }
  bool sqlite() const { return uri.starts_with("sqlite://"); }

  std::vector<std::string> runner_args() {
    return {kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "t", "--poll", "0.05",
            "--exit-when-idle", "1"};
  }

  TaskSpec task(const std::string& command, int max_attempts = 1) {
    TaskSpec s;
    s.task_name = "t";
    s.command = command;
    s.max_attempts = max_attempts;
    return s;
  }

  std::string uri;
  TempDir dir;
  std::string log = (dir / "out.log").string();
};

TEST_P(CliTest, ReadOnlyCommandsOnAMissingHubSayThereIsNoneAndCreateNothing) {
  const std::vector<std::vector<std::string>> commands = {
      {"model", "list"},   {"dataset", "list"},           {"log", "list"},         {"task", "list"},
      {"task", "show", "1"}, {"task", "wait"},            {"tune", "results"},     {"model", "show", "1"},
      {"model", "delete", "--all"}, {"task", "cancel", "--all"}, {"hub", "compact"}};
  for (const auto& c : commands) {
    EXPECT_EQ(tensorhub(c), 1) << c[0] << " " << c[1] << ": " << output();
    EXPECT_NE(output().find("no hub at "), std::string::npos) << c[0] << " " << c[1] << ": " << output();
    EXPECT_NE(output().find("--hub"), std::string::npos) << output();
    EXPECT_EQ(output().find("(none)"), std::string::npos) << output();
  }
  if (auto* f = dynamic_cast<SqliteTestDatabase*>(db_.get())) {
    EXPECT_FALSE(std::filesystem::exists(f->path()));
  }
  error_message_of(ErrorKind::kNotFound, [&] { Hub(uri, "p", OpenMode::kExisting); }, "still no hub");

  // A command that writes makes the hub; then the readers see it.
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--command", "true"}), 0) << output();
  ASSERT_EQ(tensorhub({"task", "list"}), 0) << output();
  EXPECT_NE(output().find("pending"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"model", "list"}), 0) << output();
  EXPECT_NE(output().find("(none)"), std::string::npos) << output();
}

TEST_P(CliTest, TaskWaitJudgesOnlyTheTasksItWaitsFor) {
  Hub hub(uri, "p");
  TaskQueue queue(hub);
  const auto bad = queue.create_task(task("echo no data >&2; exit 3"));
  ASSERT_EQ(wait_exit(spawn(runner_args(), (dir / "runner.log").string())), 0);
  ASSERT_EQ(queue.get_task(bad).status, TaskStatus::kFailed);

  // An earlier failure of the project does not fail a wait for a new task.
  const auto good = queue.create_task(task("echo '{}' > $TENSORHUB_RESULT_FILE"));
  const auto wait_log = dir / "wait.log";
  const pid_t waiter = spawn({kTensorhub, "task", "wait", "--hub", uri, "--project", "p"}, wait_log.string());
  ASSERT_TRUE(eventually([&] { return read_text(wait_log).find("1 task: 1 pending") != std::string::npos; }))
      << read_text(wait_log);
  const pid_t runner = spawn(runner_args(), (dir / "runner.log").string());
  EXPECT_EQ(wait_exit(waiter), 0) << read_text(wait_log);
  EXPECT_EQ(wait_exit(runner), 0);
  EXPECT_NE(read_text(wait_log).find("1 task: 1 finished"), std::string::npos) << read_text(wait_log);
  EXPECT_EQ(read_text(wait_log).find("failed"), std::string::npos) << read_text(wait_log);

  // Tasks named by id are judged whatever their state: the failed one fails the wait.
  EXPECT_EQ(tensorhub({"task", "wait", std::to_string(good)}), 0) << output();
  EXPECT_EQ(tensorhub({"task", "wait", std::to_string(good), std::to_string(bad)}), 1) << output();
  const std::string b = std::to_string(bad);
  EXPECT_NE(output().find("task " + b + " failed: "), std::string::npos) << output();
  EXPECT_NE(output().find("no data"), std::string::npos) << output();  // its last output
  EXPECT_NE(output().find("1 of the 2 task(s) waited for did not finish: " + b + " (failed)"), std::string::npos)
      << output();
  EXPECT_EQ(tensorhub({"task", "wait", "999"}), 1);
  EXPECT_NE(output().find("task 999 is not in project \"p\""), std::string::npos) << output();

  // Nothing pending or running: nothing to wait for, and the earlier ends are mentioned.
  EXPECT_EQ(tensorhub({"task", "wait"}), 0) << output();
  EXPECT_NE(output().find("nothing to wait for (2 matching task(s) had ended before"), std::string::npos)
      << output();
}

TEST_P(CliTest, ARunningTasksEpochsShowInListShowAndWait) {
  Hub hub(uri, "p");
  TaskQueue queue(hub);
  const auto go = dir / "go";
  const std::string report = kTensorhub + " task report-epoch --epoch ";
  const auto id = queue.create_task(
      task(report + "0 --logs '{\"loss\": 0.5}' && " + report +
           "1 --logs '{\"loss\": 0.25, \"val_accuracy\": 0.875}' && while [ ! -e " + go.string() +
           " ]; do sleep 0.05; done; echo '{}' > $TENSORHUB_RESULT_FILE"));
  const pid_t runner = spawn(runner_args(), (dir / "runner.log").string());
  const auto wait_log = dir / "wait.log";
  const pid_t waiter = spawn({kTensorhub, "task", "wait", "--hub", uri, "--project", "p"}, wait_log.string());

  const std::string progress = "epoch 2 loss=0.25 val_accuracy=0.875";
  ASSERT_TRUE(eventually([&] {
    return tensorhub({"task", "list"}) == 0 && output().find(progress) != std::string::npos;
  })) << output() << read_text(dir / "runner.log");
  EXPECT_NE(output().find("progress"), std::string::npos) << output();  // the column
  ASSERT_EQ(tensorhub({"task", "show", std::to_string(id)}), 0);
  const Json shown = Json::parse(output());
  EXPECT_EQ(shown.at("last_epoch").at("epoch"), 1);
  EXPECT_EQ(shown.at("last_epoch").at("attempt"), 1);
  EXPECT_EQ(shown.at("last_epoch").at("logs"), Json({{"loss", 0.25}, {"val_accuracy", 0.875}}));
  ASSERT_TRUE(eventually([&] { return read_text(wait_log).find("task " + std::to_string(id) + " " + progress) !=
                                      std::string::npos; }))
      << read_text(wait_log);

  std::ofstream(go).close();
  EXPECT_EQ(wait_exit(waiter), 0) << read_text(wait_log);
  EXPECT_EQ(wait_exit(runner), 0);
  ASSERT_EQ(tensorhub({"task", "list"}), 0);
  EXPECT_NE(output().find("finished"), std::string::npos) << output();
  EXPECT_EQ(output().find("progress"), std::string::npos) << "only running tasks have progress: " << output();
}

TEST_P(CliTest, ASpecTasksEpochsCountAgainstItsPlannedEpochs) {
  Hub hub(uri, "p");
  TaskSpec s;
  s.task_name = "spec";
  s.train_spec = {{"model", {{"layers", Json::array()}}}, {"fit", {{"epochs", "${epochs}"}}}};
  s.hyper_parameters = {{"epochs", 3}};
  const auto id = TaskQueue(hub).create_task(s);
  // report-epoch as a task under a runner calls it: the runner's variables name the task.
  const std::string env = "TENSORHUB_URI='" + uri + "' TENSORHUB_PROJECT=p TENSORHUB_TASK_ID=";
  ASSERT_EQ(shell(env + std::to_string(id) + " " + kTensorhub +
                  " task report-epoch --epoch 1 --logs '{\"accuracy\": 0.75}'"),
            0)
      << output();
  ASSERT_EQ(tensorhub({"task", "show", std::to_string(id)}), 0);
  const Json last = Json::parse(output()).at("last_epoch");
  EXPECT_EQ(last.at("epoch"), 1);
  EXPECT_EQ(last.at("epochs"), 3);

  // A task that is not in the hub: the report fails and nothing is stored.
  EXPECT_EQ(shell(env + "999 " + kTensorhub + " task report-epoch --epoch 0 --logs '{\"loss\": 1}'"), 1);
  EXPECT_NE(output().find("task 999 (TENSORHUB_TASK_ID) is not in project \"p\""), std::string::npos) << output();
  EXPECT_EQ(hub.find_documents(kEpochReports, {{"task_id", 999}}).size(), 0u);
}

TEST_P(CliTest, ASortKeyNoDocumentHasIsWarnedAboutAndTheListStillPrints) {
  Hub hub(uri, "p");
  hub.save_model(Json::object(), {}, "mlp", {{"test_accuracy", 0.8}, {"name", "first"}});
  hub.save_model(Json::object(), {}, "mlp", {{"test_accuracy", 0.9}, {"name", "second"}});
  ASSERT_EQ(tensorhub({"model", "list", "--sort", "test_acuracy:-1"}), 0);
  EXPECT_NE(output().find("warning: no model has the sort key \"test_acuracy\""), std::string::npos) << output();
  EXPECT_NE(output().find("first"), std::string::npos) << output();
  EXPECT_NE(output().find("second"), std::string::npos) << output();
  ASSERT_EQ(tensorhub({"model", "list", "--sort", "test_accuracy:-1"}), 0);
  EXPECT_EQ(output().find("warning"), std::string::npos) << output();
  EXPECT_LT(output().find("second"), output().find("first")) << output();  // 0.9 first

  TaskQueue(hub).create_task(task("true"));
  ASSERT_EQ(tensorhub({"task", "list", "--sort", "priorty:-1"}), 0);
  EXPECT_NE(output().find("warning: no task has the sort key \"priorty\""), std::string::npos) << output();
  ASSERT_EQ(tensorhub({"task", "list", "--sort", "priority:-1,time:1"}), 0);
  EXPECT_EQ(output().find("warning"), std::string::npos) << output();
}

TEST_P(CliTest, HubAndProjectWorkBeforeAndAfterTheCommand) {
  ASSERT_EQ(tensorhub({"--hub", uri, "--project", "p", "task", "create", "--task-name", "early", "--command", "true"},
                      false),
            0)
      << output();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--project", "p", "task", "list", "--hub", uri},
        std::vector<std::string>{"--hub", uri, "--project", "p", "task", "list"},
        std::vector<std::string>{"task", "--project", "p", "list", "--hub", uri},
        std::vector<std::string>{"--project", "other", "task", "list", "--hub", uri, "--project", "p"}}) {
    EXPECT_EQ(tensorhub(args, false), 0) << output();
    EXPECT_NE(output().find("early"), std::string::npos) << args[0] << " " << args[1] << ": " << output();
  }
  EXPECT_EQ(tensorhub({"--project", "other", "task", "list", "--hub", uri}, false), 0);
  EXPECT_NE(output().find("(none)"), std::string::npos) << output();
}

TEST_P(CliTest, DeletingALargeDatasetGivesTheSpaceBackOrSaysHow) {
  {
    std::mt19937 gen(5);
    std::vector<std::uint8_t> bytes(24 << 20);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(gen());
    NamedTensors t;
    t["x"] = Tensor::from<std::uint8_t>(DType::kU8, {static_cast<std::int64_t>(bytes.size())}, bytes);
    Hub(uri, "p").save_dataset(t, "big");
  }
  const auto file = std::filesystem::path(uri.substr(std::string("sqlite://").size()));
  if (sqlite()) {
    EXPECT_GT(std::filesystem::file_size(file), 24u << 20);
  }
  ASSERT_EQ(tensorhub({"dataset", "delete", "--filter", R"({"dataset_name": "big"})"}), 0) << output();
  EXPECT_NE(output().find("deleted 1 dataset\n"), std::string::npos) << output();
  if (sqlite()) {
    EXPECT_NE(output().find("the hub file shrank from "), std::string::npos) << output();
    EXPECT_LT(std::filesystem::file_size(file), 2u << 20);
  } else {
    EXPECT_NE(output().find("PostgreSQL's autovacuum makes their space reusable"), std::string::npos) << output();
    EXPECT_NE(output().find("`tensorhub hub compact` returns it"), std::string::npos) << output();
  }
  EXPECT_EQ(tensorhub({"hub", "compact"}), 0) << output();
  EXPECT_NE(output().find("compacted "), std::string::npos) << output();
}

TEST_P(CliTest, AFilterFieldNoItemHasIsWarnedAbout) {
  Hub hub(uri, "p");
  TaskQueue(hub).create_task(task("true"));
  hub.save_model(Json::object(), {}, "mlp", {{"test_accuracy", 0.8}});
  ASSERT_EQ(tensorhub({"task", "list", "--filter", R"({"stauts": "failed"})"}), 0) << output();
  EXPECT_NE(output().find("warning: no task has the field \"stauts\", so the filter matches nothing"),
            std::string::npos)
      << output();
  ASSERT_EQ(tensorhub({"task", "list", "--filter", R"({"status": "failed"})"}), 0) << output();
  EXPECT_EQ(output().find("warning"), std::string::npos) << output();
  ASSERT_EQ(tensorhub({"model", "list", "--filter", R"({"test_acuracy": {"$gte": 0.5}})"}), 0) << output();
  EXPECT_NE(output().find("warning: no model has the field \"test_acuracy\""), std::string::npos) << output();
  ASSERT_EQ(tensorhub({"model", "list", "--filter", R"({"test_accuracy": {"$gte": 0.5}})"}), 0) << output();
  EXPECT_EQ(output().find("warning"), std::string::npos) << output();

  // A project that holds nothing: most likely a typo of the project's name.
  for (const char* noun : {"task", "model", "dataset", "log"}) {
    ASSERT_EQ(tensorhub({noun, "list", "--hub", uri, "--project", "P"}, false), 0) << output();
    EXPECT_NE(output().find("warning: project \"P\" has no tasks, datasets, models or logs in this hub"),
              std::string::npos)
        << noun << ": " << output();
  }
  ASSERT_EQ(tensorhub({"dataset", "list"}), 0) << output();  // project p has tasks and a model
  EXPECT_EQ(output().find("warning"), std::string::npos) << output();
}

TEST_P(CliTest, ATaskDeletedWhileWaitedForFailsTheWaitNamingIt) {
  Hub hub(uri, "p");
  TaskQueue queue(hub);
  const auto id = queue.create_task(task("true"));  // no runner: it stays pending
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{std::to_string(id)}, std::vector<std::string>{"--filter", R"({"task_name": "t"})"}}) {
    if (how[0] == "--filter") queue.create_task(task("true"));
    std::vector<std::string> args = {kTensorhub, "task", "wait", "--hub", uri, "--project", "p"};
    args.insert(args.end(), how.begin(), how.end());
    const auto wait_log = dir / "wait.log";
    std::filesystem::remove(wait_log);
    const pid_t waiter = spawn(args, wait_log.string());
    ASSERT_TRUE(eventually([&] { return read_text(wait_log).find("1 pending") != std::string::npos; }))
        << read_text(wait_log);
    queue.delete_tasks();
    EXPECT_EQ(wait_exit(waiter), 1) << read_text(wait_log);
    EXPECT_NE(read_text(wait_log).find("were deleted while waited for (no longer in the hub)"), std::string::npos)
        << read_text(wait_log);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CliTest, ::testing::ValuesIn(backend_params()), backend_param_name);

// ---- the command line itself (one SQLite hub) ------------------------------------------------

class CliUsageTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string uri = "sqlite://" + (dir / "hub.db").string();
  std::string log = (dir / "out.log").string();

  int tensorhub(std::vector<std::string> args) {
    args.insert(args.begin(), kTensorhub);
    std::filesystem::remove(log);
    return wait_exit(spawn(args, log));
  }
  std::string output() { return read_text(log); }
};

TEST_F(CliUsageTest, AWrongCommandLineExits2AndNamesWhatWasWrong) {
  EXPECT_EQ(tensorhub({"tsk", "list"}), 2);
  EXPECT_NE(output().find("tensorhub: unknown command 'tsk'; the commands are: dataset, model, log, task"),
            std::string::npos)
      << output();
  EXPECT_EQ(tensorhub({"--hub", uri, "task", "lst"}), 2);
  EXPECT_NE(output().find("tensorhub task: unknown command 'lst'; the commands are: create, list"), std::string::npos)
      << output();
  EXPECT_EQ(tensorhub({"task", "list", "--hub", uri, "--limit", "many"}), 2) << output();
  EXPECT_EQ(tensorhub({"task", "create", "--hub", uri, "--command", "true"}), 2) << output();  // no --task-name
  EXPECT_NE(output().find("--task-name"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "create", "--hub", uri, "--task-name", "t"}), 2) << output();
  EXPECT_NE(output().find("one of --command CMD, --spec FILE or --script FILE"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "create", "--hub", uri, "--task-name", "t", "--command", "true", "--max-attempts", "0"}),
            2);
  EXPECT_NE(output().find("--max-attempts"), std::string::npos) << output();
  EXPECT_EQ(output().find("max_attempts"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "create", "--hub", uri, "--task-name", "t", "--command", "true", "--saved-result-keys",
                       ""}),
            2);
  EXPECT_NE(output().find("--saved-result-keys: a key name is empty"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "show", "abc", "--hub", uri}), 2);
  EXPECT_NE(output().find("a task id is a whole number"), std::string::npos) << output();
  EXPECT_EQ(output().find("Could not convert"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "wait", "1", "x2", "--hub", uri}), 2);
  EXPECT_NE(output().find("got \"x2\""), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"tune", "--hub", uri, "--space", "s.json", "--parallel", "0", "--", "true"}), 2);
  EXPECT_NE(output().find("--parallel: must be greater than 0, got 0"), std::string::npos) << output();
  EXPECT_NE(output().find("--parallel"), std::string::npos) << output();
  EXPECT_FALSE(std::filesystem::exists(dir / "hub.db")) << "nothing was created by a wrong command line";

  // A runtime failure stays 1.
  ASSERT_EQ(tensorhub({"hub", "init", "--hub", uri}), 0) << output();
  EXPECT_EQ(tensorhub({"task", "show", "999", "--hub", uri}), 1);
  EXPECT_NE(output().find("task 999 is not in project"), std::string::npos) << output();
}

// `tensorhub` links no libtorch (so `task list` and a task's `task report-epoch` start in
// milliseconds) and hands the commands that need it over to tensorhub-torch: the user sees
// one program. Its dynamic section (readelf -d, binutils) names no libtorch library, and each
// handed-over command answers with its own options.
TEST_F(CliUsageTest, TensorhubLoadsNoLibtorchAndHandsTheLibtorchCommandsOver) {
  ASSERT_EQ(wait_exit(spawn({"/usr/bin/readelf", "-d", kTensorhub}, log)), 0) << output();
  const std::string needed = output();
  ASSERT_NE(needed.find("(NEEDED)"), std::string::npos) << needed;
  for (const char* lib : {"libtorch", "libc10", "libopenblas", "libgomp"})
    EXPECT_EQ(needed.find(lib), std::string::npos) << lib << " in\n" << needed;
  ASSERT_EQ(wait_exit(spawn({"/usr/bin/readelf", "-d", kTensorhub + "-torch"}, log)), 0) << output();
  EXPECT_NE(output().find("libtorch"), std::string::npos) << "the readelf check finds libtorch where it is";

  // Handed over before parsing, whatever comes before the command; --help is the command's own.
  EXPECT_EQ(tensorhub({"--hub", uri, "serve", "--help"}), 0) << output();
  EXPECT_NE(output().find("--model_base_path"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"--project=p", "tune", "results", "--help"}), 0) << output();
  EXPECT_NE(output().find("--top"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"--version"}), 0) << output();
  EXPECT_NE(output().find("libtorch "), std::string::npos) << output();
  // The main --help lists them (fork-server stays hidden) and the torch program's errors are exit 2 as ever.
  EXPECT_EQ(tensorhub({"--help"}), 0) << output();
  for (const char* c : {"demo", "serve", "tune", "train-spec", "ui"}) EXPECT_NE(output().find(c), std::string::npos) << c;
  EXPECT_EQ(output().find("fork-server"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"serve", "--no-such-flag"}), 2) << output();
  EXPECT_NE(output().find("--no-such-flag"), std::string::npos) << output();
}

TEST_F(CliUsageTest, WhatTheUserTypedIsCheckedFirstExits2AndCreatesNothing) {
  const auto hub_db = dir / "hub.db";
  auto expect_usage = [&](std::vector<std::string> args, const std::string& says) {
    EXPECT_EQ(tensorhub(args), 2) << args[0] << " " << args[1] << ": " << output();
    EXPECT_NE(output().find(says), std::string::npos) << output();
    EXPECT_EQ(output().find("InvalidArgument"), std::string::npos) << output();
    EXPECT_FALSE(std::filesystem::exists(hub_db)) << output();
  };
  expect_usage({"task", "create", "--hub", uri, "--task-name", "t", "--command", "echo {x}"},
               "placeholder");
  expect_usage({"task", "list", "--hub", "sqlit://" + hub_db.string()}, "is not a hub URI");
  expect_usage({"task", "list", "--hub", hub_db.string()}, "is not a hub URI");
  expect_usage({"task", "create", "--hub", uri, "--project", "", "--task-name", "t", "--command", "true"},
               "a project name must not be empty");
  std::filesystem::remove(log);
  EXPECT_EQ(wait_exit(spawn({"/usr/bin/env", "TENSORHUB_PROJECT=", kTensorhub, "task", "create", "--hub", uri,
                             "--task-name", "t", "--command", "true"},
                            log)),
            2);
  EXPECT_NE(output().find("a project name must not be empty"), std::string::npos) << output();
  expect_usage({"task", "report-epoch", "--epoch", "-5", "--logs", "{}"}, "must be 0 or more");
  EXPECT_LT(output().size(), 300u) << output();
  const auto space = dir / "space.json";
  std::ofstream(space) << R"([{"name": "x", "type": "Int", "min_value": 1, "max_value": 3}])";
  expect_usage({"tune", "--hub", uri, "--space", space.string(), "--", "echo {x} > out"},
               "is one word with spaces, 'echo {x} > out'");

  // On a hub: an unknown filter operator, and an empty filter where tasks must be chosen.
  ASSERT_EQ(tensorhub({"hub", "init", "--hub", uri}), 0) << output();
  for (const char* command : {"list", "cancel", "delete", "wait"}) {
    EXPECT_EQ(tensorhub({"task", command, "--hub", uri, "--filter", R"({"status": {"$regex": "f"}})"}), 2)
        << command;
    EXPECT_EQ(output().find("tensorhub: --filter: "), 0u) << output();
    EXPECT_NE(output().find("$regex"), std::string::npos) << output();
  }
  EXPECT_EQ(tensorhub({"model", "list", "--hub", uri, "--filter", R"({"a": {"$regex": "f"}})"}), 2) << output();
  for (const char* command : {"cancel", "delete"}) {
    EXPECT_EQ(tensorhub({"task", command, "--hub", uri, "--filter", "{}"}), 2) << command;
    EXPECT_NE(output().find("--filter {} is empty and would " + std::string(command) +
                            " every task of the project; give a filter that chooses tasks, or --all"),
              std::string::npos)
        << output();
  }
  // A failure at work exits 1, its message without the C++ kind.
  EXPECT_EQ(tensorhub({"task", "show", "7", "--hub", uri}), 1);
  EXPECT_EQ(output().find("tensorhub: task 7 is not in project"), 0u) << output();
}

TEST_F(CliUsageTest, DispatchTasksRefusesBadValuesBeforeOpeningTheHub) {
  const std::string dispatch = std::string(TENSORHUB_BIN_DIR) + "/dispatch_tasks";
  const auto hub_db = dir / "dd.db";
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--epochs", "0"},
                                              std::vector<std::string>{"--epochs", "-1"},
                                              std::vector<std::string>{"--units", "0"},
                                              std::vector<std::string>{"--cpus", "-1"},
                                              std::vector<std::string>{"--gpus", "1.5"},
                                              std::vector<std::string>{"--memory", "8 lots"}}) {
    std::vector<std::string> args = {dispatch, "--hub", "sqlite://" + hub_db.string(), "--data", "/nonexistent"};
    args.insert(args.end(), bad.begin(), bad.end());
    std::filesystem::remove(log);
    EXPECT_EQ(wait_exit(spawn(args, log)), 2) << bad[0] << " " << bad[1] << ": " << output();
    EXPECT_NE(output().find(bad[0]), std::string::npos) << output();
  }
  std::filesystem::remove(log);
  EXPECT_EQ(wait_exit(spawn({dispatch, "--hub", "sqlite://" + hub_db.string(), "--data", "/nonexistent"}, log)), 1)
      << output();
  EXPECT_FALSE(std::filesystem::exists(hub_db)) << output();
}

TEST_F(CliUsageTest, InvalidJsonErrorsShowTheParsersMessageForTheInputGiven) {
  const std::vector<std::string> create = {"task", "create", "--hub", uri, "--task-name", "t", "--command", "true"};
  for (const char* flag : {"--tags", "--hyper-parameters"}) {
    auto args = create;
    args.insert(args.end(), {flag, R"({"units": 8,})"});
    EXPECT_EQ(tensorhub(args), 2) << flag;
    EXPECT_NE(output().find(std::string(flag) + " is not valid JSON: parse error at line 1, column 13: syntax error"),
              std::string::npos)
        << output();
    EXPECT_EQ(output().find("n_units1"), std::string::npos) << output();
    args.back() = R"({"lr": 1e999})";  // beyond a double: nlohmann's out_of_range, not a parse error
    EXPECT_EQ(tensorhub(args), 2) << flag;
    EXPECT_NE(output().find(std::string(flag) + " is not valid JSON: number overflow parsing '1e999'"),
              std::string::npos)
        << output();
    EXPECT_EQ(output().find("unexpected error"), std::string::npos) << output();
    args.back() = "[1]";
    EXPECT_EQ(tensorhub(args), 2) << flag;
    EXPECT_NE(output().find(std::string(flag) + " must be a JSON object ({\"key\": value, ...}), got an array: [1]"),
              std::string::npos)
        << output();
  }
  const auto spec = dir / "spec.json";
  std::ofstream(spec) << "{\n  \"model\": \n}\n";
  EXPECT_EQ(tensorhub({"task", "create", "--hub", uri, "--task-name", "t", "--spec", spec.string()}), 2);
  EXPECT_NE(output().find("--spec file " + spec.string() + " is not valid JSON: parse error at line 3, column 1"),
            std::string::npos)
      << output();
  EXPECT_EQ(tensorhub({"task", "report-epoch", "--epoch", "0", "--logs", "{loss: 1}"}), 2);
  EXPECT_NE(output().find("--logs is not valid JSON: parse error at line 1, column 2"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "list", "--hub", uri, "--filter", R"({"status": )"}), 2);
  EXPECT_NE(output().find("--filter is not valid JSON: parse error at line 1, column 12"), std::string::npos)
      << output();
}

TEST_F(CliUsageTest, NoOutputShowsAPassword) {
  // Port 1 on the loopback: nothing listens, every connection is refused at once.
  const std::string secret_uri = "postgresql://tensorhub:s3cr3t@127.0.0.1:1/hub";
  const std::string masked = "postgresql://tensorhub:***@127.0.0.1:1/hub";
  auto expect_masked = [&](const std::string& label) {
    EXPECT_EQ(output().find("s3cr3t"), std::string::npos) << label << ": " << output();
    EXPECT_NE(output().find(masked), std::string::npos) << label << ": " << output();
  };
  EXPECT_NE(tensorhub({"demo", "--hub", secret_uri, "--runners", "1", "--epochs", "1", "--data", dir.path().string()}),
            0);
  expect_masked("demo");
  EXPECT_NE(output().find("tensorhub demo: hub " + masked), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "list", "--hub", secret_uri}), 1);
  expect_masked("task list");
  EXPECT_EQ(tensorhub({"tune", "results", "--hub", secret_uri}), 1);
  expect_masked("tune results");
  EXPECT_EQ(tensorhub({"runner", "--hub", secret_uri, "--exit-when-idle", "0"}), 1);
  EXPECT_EQ(output().find("s3cr3t"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"task", "list", "--hub", "postgresq://tensorhub:s3cr3t@127.0.0.1:1/hub"}), 2);
  EXPECT_NE(output().find("postgresq://tensorhub:***@127.0.0.1:1/hub"), std::string::npos) << output();
  EXPECT_EQ(output().find("s3cr3t"), std::string::npos) << output();
  // A --hub before the command is shown masked in the command's help.
  EXPECT_EQ(tensorhub({"--hub", secret_uri, "task", "list", "--help"}), 0);
  expect_masked("help after a global --hub");
  // The help shows the default hub (from TENSORHUB_URI) masked.
  std::filesystem::remove(log);
  EXPECT_EQ(wait_exit(spawn({"/usr/bin/env", "TENSORHUB_URI=" + secret_uri, kTensorhub, "task", "list", "--help"}, log)),
            0);
  expect_masked("help");
}

// The pids of the processes whose command line (arguments joined by spaces) holds every word
// of `words`.
std::vector<pid_t> pids_running(const std::vector<std::string>& words) {
  return pids_whose_cmdline([&](std::string cmdline) {
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    return !cmdline.empty() && std::all_of(words.begin(), words.end(), [&](const std::string& w) {
      return cmdline.find(w) != std::string::npos;
    });
  });
}

TEST_F(CliUsageTest, TheDemoStopsWhenItsRunnersAreGone) {
  const std::string data = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(data)) GTEST_SKIP() << data << " is missing (scripts/setup installs dataset-fashion-mnist)";
  std::filesystem::remove(log);
  const pid_t demo = spawn({kTensorhub, "demo", "--hub", uri, "--runners", "2", "--epochs", "1"}, log);
  // Both runners up, then killed as an OOM killer or a careless `kill -9` would.
  std::vector<pid_t> runners;
  for (int i = 0; i < 600 && runners.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    runners = pids_running({" runner ", " " + uri + " "});  // not the demo's own " --runners "
  }
  ASSERT_EQ(runners.size(), 2u) << output();
  for (pid_t r : runners) ::kill(r, SIGKILL);
  // The dispatcher waits for tasks nobody runs now: the demo must not wait with it.
  const auto code = wait_exit_within(demo, std::chrono::seconds(60));
  if (!code) {
    ::kill(demo, SIGKILL);
    wait_exit(demo);
  }
  ASSERT_TRUE(code.has_value()) << "the demo still waits with no runner: " << output();
  EXPECT_EQ(*code, 1) << output();
  EXPECT_NE(output().find("every runner exited (the last with status 137)"), std::string::npos) << output();
  EXPECT_TRUE(pids_running({"dispatch_tasks", " " + uri + " "}).empty()) << "the dispatcher was left running";
}

TEST_F(CliUsageTest, ATunersStopReasonNamesTheFlag) {
  const auto space = dir / "space.json";
  std::ofstream(space) << R"([{"name": "x", "type": "Int", "min_value": 1, "max_value": 3}])";
  const pid_t runner = spawn({kTensorhub, "runner", "--hub", uri, "--task-name", "trial", "--poll", "0.05",
                              "--exit-when-idle", "2"},
                             (dir / "runner.log").string());
  EXPECT_EQ(tensorhub({"tune", "--hub", uri, "--space", space.string(), "--oracle", "random", "--max-trials", "1",
                       "--objective", "loss:min", "--poll", "0.05", "--", "/bin/sh", "-c",
                       "echo '{\"loss\": 1}' > \"$TENSORHUB_RESULT_FILE\""}),
            0)
      << output() << read_text(dir / "runner.log");
  EXPECT_NE(output().find("done: --max-trials (1) reached"), std::string::npos) << output();
  EXPECT_EQ(output().find("max_trials"), std::string::npos) << output();
  EXPECT_EQ(wait_exit(runner), 0);
  // A wrong --objective is a wrong command line: 2, naming the flag.
  EXPECT_EQ(tensorhub({"tune", "--hub", uri, "--name", "o", "--space", space.string(), "--objective", "loss:maximize",
                       "--", "true"}),
            2)
      << output();
  EXPECT_NE(output().find("tensorhub: --objective: "), std::string::npos) << output();
}

TEST_F(CliUsageTest, APercentEscapedHubPathIsDecoded) {
  const std::string escaped = "sqlite://" + (dir / "my%20hub.db").string();
  ASSERT_EQ(tensorhub({"task", "create", "--hub", escaped, "--task-name", "t", "--command", "true"}), 0) << output();
  EXPECT_TRUE(std::filesystem::exists(dir / "my hub.db"));
  ASSERT_EQ(tensorhub({"task", "list", "--hub", escaped}), 0) << output();
  EXPECT_NE(output().find("pending"), std::string::npos) << output();
}

}  // namespace
}  // namespace tensorhub
