// The fork server (queue/fork_server.h) with real processes: tests/fork_server_child.cpp as
// the server, whose entry functions print what a forked task sees; and a Runner whose spec
// tasks start through it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "process_util.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/fork_server.h"
#include "tensorhub/queue/runner.h"

namespace tensorhub {
namespace {

using namespace testing;

const std::string kChild = std::string(TENSORHUB_BIN_DIR) + "/fork_server_child";

// The process's state letter from /proc/PID/stat, or 0 when it is gone.
char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return 0;
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? 0 : text[close + 2];
}

class ForkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // as a runner is
    server = ForkServer::start({kChild, "serve"}, {"FOO=the server's", "PATH=/usr/bin:/bin"});
    out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(out, 0);
  }
  void TearDown() override { ::close(out); }

  // Starts `args` through the server and waits for it: its wait status.
  int run(const std::vector<std::string>& args, const std::vector<std::string>& env, pid_t* pid_out = nullptr) {
    const pid_t pid = server->spawn({args, env, out, -1});
    if (pid_out) *pid_out = pid;
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, 0), pid) << "the task is not our child: " << std::strerror(errno);
    return status;
  }

  TempDir dir;
  std::string log = (dir.path() / "task.log").string();
  std::unique_ptr<ForkServer> server;
  int out = -1;
};

TEST_F(ForkServerTest, ATaskIsOurChildLeadsItsGroupAndSeesOnlyTheRequestsEnvironment) {
  pid_t pid = -1;
  const int status = run({kChild, "show"}, {"FOO=bar"}, &pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string expected = "pid " + std::to_string(pid) + " ppid " + std::to_string(getpid()) + " pgid " +
                               std::to_string(pid) + " FOO=bar forked=1\n";
  EXPECT_EQ(read_text(log), expected);

  EXPECT_EQ(WEXITSTATUS(run({kChild, "show"}, {})), 0);  // the server's FOO does not leak in
  EXPECT_NE(read_text(log).find("FOO=(unset) forked=1"), std::string::npos) << read_text(log);
}

TEST_F(ForkServerTest, ExitCodesAndExceptionsOfTheEntryAreTheTasksExitStatus) {
  EXPECT_EQ(WEXITSTATUS(run({kChild, "exit", "7"}, {})), 7);
  EXPECT_EQ(WEXITSTATUS(run({kChild, "throw"}, {})), 1);
  EXPECT_NE(read_text(log).find("thrown by the task"), std::string::npos) << read_text(log);
  // Many tasks, one server: it stays usable.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(WEXITSTATUS(run({kChild, "exit", std::to_string(i)}, {})), i);
}

TEST_F(ForkServerTest, AKilledTaskIsKilledLikeAnyChild) {
  const pid_t pid = server->spawn({{kChild, "sleep"}, {}, out, -1});
  ASSERT_EQ(::kill(-pid, SIGKILL), 0);  // its process group, as the runner kills a task
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(ForkServerTest, ATaskShowsItsOwnCommandLineNotTheServers) {
  const pid_t pid = server->spawn({{kChild, "sleep"}, {}, out, -1});
  // The task writes its command line before it runs its entry: wait for it to change.
  const std::string expected = kChild + std::string(1, '\0') + "sleep" + std::string(1, '\0');
  std::string cmdline;
  for (int i = 0; i < 500 && cmdline != expected; ++i) {
    std::this_thread::sleep_for(10ms);
    cmdline = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  }
  EXPECT_EQ(cmdline, expected);
  ::kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST_F(ForkServerTest, AGoneServerMakesSpawnUnavailable) {
  ASSERT_EQ(::kill(server->pid(), SIGKILL), 0);
  const std::string msg = error_message_of(
      ErrorKind::kUnavailable, [&] { server->spawn({{kChild, "show"}, {}, out, -1}); }, "spawn through a dead server");
  EXPECT_NE(msg.find("gone"), std::string::npos) << msg;
}

TEST(ForkServerStartTest, AServerWithThreadsRefusesToStart) {
  const std::string msg = error_message_of(
      ErrorKind::kUnavailable, [] { ForkServer::start({kChild, "serve-threaded"}, {}); }, "a threaded server");
  EXPECT_NE(msg.find("has 2 threads"), std::string::npos) << msg;
}

TEST(ForkServerStartTest, AProgramThatIsNoServerIsUnavailable) {
  const std::string msg =
      error_message_of(ErrorKind::kUnavailable, [] { ForkServer::start({"/bin/true"}, {}); }, "/bin/true as a server");
  EXPECT_NE(msg.find("did not start"), std::string::npos) << msg;
}

// A runner killed with SIGKILL takes its forked tasks along, as its executed ones.
TEST(ForkServerStartTest, ATaskDiesWhenItsRunnerIsKilled) {
  TempDir dir;
  Process holder = Process::spawn({kChild, "hold", dir.path().string()}, {});
  const auto pid_file = dir.path() / "task.pid";
  for (int i = 0; i < 500 && !std::filesystem::exists(pid_file); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(std::filesystem::exists(pid_file));
  const pid_t task = std::stoi(read_text(pid_file.string()));
  ASSERT_NE(state_of(task), 0);
  holder.signal(SIGKILL);
  holder.wait();
  char state = state_of(task);
  for (int i = 0; i < 500 && state != 0 && state != 'Z'; ++i) {
    std::this_thread::sleep_for(10ms);
    state = state_of(task);
  }
  EXPECT_TRUE(state == 0 || state == 'Z') << "the task still runs, state " << state;
}

// A Runner's spec tasks start through its fork server; when the server dies, the runner
// executes them instead and they still finish.
class RunnerForkServerTest : public ::testing::Test, public SqliteHubFiles {
 protected:
  RunnerOptions options(bool with_server) {
    RunnerOptions o;
    o.hub_uri = uri;
    o.project_name = "p";
    o.poll_s = 0.02;
    o.exit_when_idle_s = 0.2;
    o.task_cgroups = false;
    o.spec_command = {kChild, "spec"};
    if (with_server) o.fork_server = {kChild, "serve"};
    o.log = [this](const std::string& line) { lines.push_back(line); };
    return o;
  }
  std::int64_t spec_task() {
    TaskSpec s;
    s.task_name = "spec";
    s.train_spec = {{"model", "unused by fork_server_child"}};
    s.max_attempts = 1;
    return queue.create_task(s);
  }
  std::vector<std::string> lines;
};

TEST_F(RunnerForkServerTest, SpecTasksAreForksOfTheServerAndExecutedWithoutOne) {
  const auto forked = spec_task();
  Runner(options(true)).run();
  const Task a = queue.get_task(forked);
  ASSERT_EQ(a.status, TaskStatus::kFinished) << a.error;
  EXPECT_EQ(a.result["forked"], true);

  const auto executed = spec_task();
  Runner(options(false)).run();
  const Task b = queue.get_task(executed);
  ASSERT_EQ(b.status, TaskStatus::kFinished) << b.error;
  EXPECT_EQ(b.result["forked"], false);
}

// The pid of the fork server this process's runner started (fork_server_child serve), or -1.
pid_t find_server() {
  const std::string server = kChild + std::string(1, '\0') + "serve" + std::string(1, '\0');
  for (const pid_t pid : pids_whose_cmdline([&](const std::string& cmdline) { return cmdline == server; })) {
    if (getppid() == pid) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    const auto close = text.rfind(')');
    if (close != std::string::npos && std::stoi(text.substr(close + 4)) == getpid()) return pid;  // our child
  }
  return -1;
}

TEST_F(RunnerForkServerTest, ADeadServerIsReplacedAndAfterThreeDeathsTasksAreExecuted) {
  RunnerOptions o = options(true);
  o.exit_when_idle_s = -1;
  std::mutex mu;
  o.log = [&](const std::string& line) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  };
  auto logged = [&](const std::string& text) {
    std::lock_guard lock(mu);
    for (const auto& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  };
  Runner runner(o);
  std::thread t([&] { runner.run(); });
  auto finish = [&](std::int64_t id) {
    Task task;
    for (int i = 0; i < 1000 && (task = queue.get_task(id)).status != TaskStatus::kFinished; ++i) std::this_thread::sleep_for(10ms);
    return task;
  };
  for (int death = 1; death <= 3; ++death) {
    const Task a = finish(spec_task());
    ASSERT_EQ(a.status, TaskStatus::kFinished) << a.error;
    EXPECT_EQ(a.result["forked"], true) << "round " << death;
    const pid_t server = find_server();
    ASSERT_GT(server, 0);
    ::kill(server, SIGKILL);
    const std::string said = "warning: the fork server (pid " + std::to_string(server) + ") was killed by signal 9";
    for (int i = 0; i < 500 && !logged(said); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(logged(said)) << said;
    for (int i = 0; i < 100 && find_server() == server; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_NE(state_of(server), 'Z') << "the dead server was left a zombie";
  }
  const Task b = finish(spec_task());
  runner.request_stop();
  t.join();
  ASSERT_EQ(b.status, TaskStatus::kFinished) << b.error;
  EXPECT_EQ(b.result["forked"], false);
  EXPECT_TRUE(logged("it died 3 times, so each spec task is a new process from now on"));
}

}  // namespace
}  // namespace tensorhub
