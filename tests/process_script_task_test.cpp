// Script tasks (issue 23): a Python script stored in the task, run by a real `tensorhub runner`
// process with a real Python interpreter (Debian's /usr/bin/python3, no virtual environment),
// its hyperparameters bound as globals and its saved_result_keys globals stored as the result.
// On SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

// Debian's interpreter, with python3-numpy (scripts/setup --test installs it).
const std::string kPython = "/usr/bin/python3";

class ScriptTaskTest : public BackendTest {
 protected:
  void set_up() override {
    if (::access(kPython.c_str(), X_OK) != 0) GTEST_SKIP() << kPython << " is missing (scripts/setup --test)";
    uri = db_->uri();
    hub = std::make_unique<Hub>(uri, "p");
    queue = std::make_unique<TaskQueue>(*hub);
  }

  TaskSpec script_task(const std::string& script, std::vector<std::string> keys, Json hyper_parameters = Json::object()) {
    TaskSpec s;
    s.task_name = "t";
    s.script = script;
    s.script_name = "task_script.py";
    s.saved_result_keys = std::move(keys);
    s.hyper_parameters = std::move(hyper_parameters);
    s.max_attempts = 1;
    return s;
  }

  // Runs a runner (with `extra` flags) until the queue is idle; its exit code.
  int run_runner(std::vector<std::string> extra = {"--python", kPython}, std::vector<std::string> prefix = {}) {
    std::vector<std::string> args = prefix;
    for (const auto& a : std::vector<std::string>{kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name",
                                                  "t", "--poll", "0.05", "--exit-when-idle", "0.5"})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return wait_exit(spawn(args, log));
  }
  std::string runner_log() { return read_text(log); }

  std::string uri;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  TempDir dir;
  std::string log = (dir / "runner.log").string();
};

TEST_P(ScriptTaskTest, HyperParametersAreGlobalsAndSavedResultKeysAreTheResult) {
  // TensorHub's task_script.py shape: top-level code reading its hyperparameters as globals.
  const std::string script =
      "import sys\n"
      "import numpy as np\n"
      "test_accuracy = np.float32(n_units1) / 1000  # a numpy scalar: stored through .item()\n"
      "name_seen = name\n"
      "in_venv = sys.prefix != sys.base_prefix\n"
      "interpreter = sys.executable\n"
      "diverged = float('nan')\n"
      "print('trained', name)\n";
  const auto id = queue->create_task(script_task(
      script, {"test_accuracy", "name_seen", "in_venv", "interpreter", "diverged"},
      {{"n_units1", 500}, {"name", "500-500"}}));
  ASSERT_EQ(run_runner(), 0) << runner_log();
  const Task t = queue->get_task(id);
  ASSERT_EQ(t.status, TaskStatus::kFinished) << t.error << "\n" << t.log_tail << "\n" << runner_log();
  EXPECT_EQ(t.result["test_accuracy"], 0.5);
  EXPECT_EQ(t.result["name_seen"], "500-500");
  EXPECT_EQ(t.result["in_venv"], false);
  EXPECT_EQ(t.result["interpreter"], kPython);
  ASSERT_TRUE(t.result["diverged"].is_number_float()) << t.result.dump();  // NaN kept, as TaskContext keeps it
  EXPECT_TRUE(std::isnan(t.result["diverged"].get<double>()));
  EXPECT_NE(t.log_tail.find("trained 500-500"), std::string::npos) << t.log_tail;
  EXPECT_NE(runner_log().find("task_script.py (sha256 "), std::string::npos) << runner_log();
}

TEST_P(ScriptTaskTest, AScriptThatRaisesFailsWithTheExceptionAndItsLine) {
  const auto id = queue->create_task(script_task(
      "def train(lr):\n    if lr > 1:\n        raise ValueError('learning rate ' + str(lr) + ' is too high')\n"
      "train(learning_rate)\n",
      {"test_accuracy"}, {{"learning_rate", 5}}));
  ASSERT_EQ(run_runner(), 0) << runner_log();
  const Task t = queue->get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_EQ(t.error, "the task exited with status 1; its last output line: tensorhub: task_script.py line 3 raised "
                     "ValueError: learning rate 5 is too high") << t.log_tail;
  EXPECT_NE(t.log_tail.find("Traceback (most recent call last)"), std::string::npos) << t.log_tail;
  EXPECT_EQ(t.log_tail.find("runpy"), std::string::npos) << "the bootstrap's frames are left out: " << t.log_tail;
}

TEST_P(ScriptTaskTest, AMissingOrNonJsonSavedKeyFailsNamingIt) {
  const auto missing = queue->create_task(script_task("accuracy = 0.9\n", {"test_accuracy"}));
  const auto array = queue->create_task(script_task("import numpy as np\nweights = np.zeros(3)\n", {"weights"}));
  ASSERT_EQ(run_runner(), 0) << runner_log();
  const Task m = queue->get_task(missing);
  EXPECT_EQ(m.status, TaskStatus::kFailed);
  EXPECT_NE(m.error.find("saved_result_keys test_accuracy: the script has no global variable of that name"),
            std::string::npos) << m.error;
  const Task a = queue->get_task(array);
  EXPECT_EQ(a.status, TaskStatus::kFailed);
  EXPECT_NE(a.error.find("saved_result_keys entry 'weights': weights is a numpy.ndarray, which is not JSON data"),
            std::string::npos) << a.error;
}

TEST_P(ScriptTaskTest, TheScriptComesBackByteEqualWithItsSha256AndTaskShowNamesIt) {
  // UTF-8 beyond ASCII, Windows line ends and no final newline: kept byte for byte.
  const std::string script = "# café ☕\r\nresult = 'ok'\r\nprint('données')";
  const auto file = dir / "my_script.py";
  std::ofstream(file, std::ios::binary) << script;
  const auto out = dir / "out.log";
  ASSERT_EQ(wait_exit(spawn({kTensorhub, "task", "create", "--task-name", "t", "--script", file.string(),
                             "--saved-result-keys", "result", "--hub", uri, "--project", "p"},
                            out.string())), 0) << read_text(out);
  const std::int64_t id = std::stoll(read_text(out));
  const Task t = queue->get_task(id);
  EXPECT_EQ(t.spec.script, script);
  EXPECT_EQ(t.spec.script_name, "my_script.py");
  EXPECT_EQ(t.spec.script_sha256, sha256_hex(script));
  EXPECT_EQ(t.spec.script_sha256.size(), 64u);
  EXPECT_TRUE(t.spec.command.empty());

  ASSERT_EQ(wait_exit(spawn({kTensorhub, "task", "show", std::to_string(id), "--hub", uri, "--project", "p"},
                            (dir / "show.log").string())), 0);
  const Json shown = Json::parse(read_text(dir / "show.log"));
  EXPECT_EQ(shown["script_name"], "my_script.py");
  EXPECT_EQ(shown["script_sha256"], sha256_hex(script));
  EXPECT_EQ(shown["script_bytes"], script.size());

  ASSERT_EQ(run_runner(), 0) << runner_log();
  EXPECT_EQ(queue->get_task(id).result, Json({{"result", "ok"}})) << queue->get_task(id).error;
}

TEST_P(ScriptTaskTest, TaskCreateRefusesAMissingOrNonUtf8ScriptAndCreatesNothing) {
  const auto latin1 = dir / "latin1.py";
  std::ofstream(latin1, std::ios::binary) << "# caf\xe9\nx = 1\n";
  const auto out = dir / "out.log";
  auto create = [&](const std::string& file) {
    return wait_exit(spawn({kTensorhub, "task", "create", "--task-name", "t", "--script", file, "--hub", uri,
                            "--project", "p"}, out.string()));
  };
  EXPECT_EQ(create((dir / "nope.py").string()), 2);
  EXPECT_NE(read_text(out).find("--script: " + (dir / "nope.py").string() + " does not exist"), std::string::npos)
      << read_text(out);
  EXPECT_EQ(create(latin1.string()), 2);
  EXPECT_NE(read_text(out).find("is not UTF-8 text (byte 5 begins no UTF-8 character)"), std::string::npos)
      << read_text(out);
  EXPECT_EQ(queue->count_tasks().total(), 0);

  // The queue checks the same for any caller, and the hash when one is given.
  TaskSpec s = script_task("x = 1\n", {});
  s.script_sha256 = std::string(64, '0');
  const std::string message = error_message_of(ErrorKind::kInvalidArgument, [&] { queue->create_task(s); }, "sha");
  EXPECT_NE(message.find("do not have the SHA-256 given"), std::string::npos) << message;
  s.script_sha256.clear();
  s.command = "true";
  error_message_of(ErrorKind::kInvalidArgument, [&] { queue->create_task(s); }, "command and script");
}

TEST_P(ScriptTaskTest, PythonIsLookedUpOnPathAndATimeoutKillsTheScript) {
  // A `python3` wrapper first on the runner's PATH, as a virtual environment's bin/ would be.
  const auto bin = dir / "bin";
  std::filesystem::create_directories(bin);
  const auto marker = dir / "wrapper-ran";
  std::ofstream(bin / "python3") << "#!/bin/sh\necho ran >> " << marker.string() << "\nexec " << kPython
                                 << " \"$@\"\n";
  std::filesystem::permissions(bin / "python3", std::filesystem::perms::owner_all);
  const auto ok = queue->create_task(script_task("value = 42\n", {"value"}));
  TaskSpec slow = script_task("import time\ntime.sleep(60)\n", {});
  slow.timeout_s = 0.5;
  const auto killed = queue->create_task(slow);
  ASSERT_EQ(run_runner({}, {"/usr/bin/env", "PATH=" + bin.string() + ":/usr/bin:/bin"}), 0) << runner_log();
  EXPECT_EQ(queue->get_task(ok).result, Json({{"value", 42}})) << queue->get_task(ok).error;
  EXPECT_EQ(read_lines(marker).size(), 2u);
  const Task k = queue->get_task(killed);
  EXPECT_EQ(k.status, TaskStatus::kFailed);
  EXPECT_EQ(k.error, "the task ran past its timeout_s of 0.5 s and was killed");

  // An interpreter path that is not there stops the runner at once, naming it.
  EXPECT_EQ(run_runner({"--python", (dir / "no-python").string()}), 1);
  EXPECT_NE(runner_log().find("the Python interpreter " + (dir / "no-python").string() +
                              " for script tasks is not an executable file"), std::string::npos) << runner_log();
}

INSTANTIATE_TEST_SUITE_P(Backends, ScriptTaskTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
