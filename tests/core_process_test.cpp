// tensorhub::Process with real /bin/sh children: argv and environment, output files, exit
// codes and signals, timeouts, the process group, exec failures; shell_quote through a real
// shell; free_loopback_port by binding it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/core/process.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts `args` in a group of its own with stdout and stderr written to `log`.
Process spawn_logged(const std::filesystem::path& log, const std::vector<std::string>& args) {
  ProcessOptions options;
  options.output = log;
  return Process::spawn(args, options);
}

// The first line written to `log`, without its newline (polls up to 10 s; empty if none came).
std::string first_line(const std::filesystem::path& log) {
  for (int i = 0; i < 200; ++i) {
    const std::string out = read_file(log);
    if (const auto end = out.find('\n'); end != std::string::npos) return out.substr(0, end);
    std::this_thread::sleep_for(50ms);
  }
  return {};
}

// True once no process `pid` exists (polls up to 10 s: an orphan is reaped by init).
bool gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(Process, PassesArgvAndEnvironmentAndWritesOutputToTheFile) {
  TempDir dir;
  ProcessOptions options;
  options.env = {{"TENSORHUB_PROCESS_TEST", "a value with spaces"}};
  options.output = dir / "out.log";
  auto p = Process::spawn({"/bin/sh", "-c", "echo \"$TENSORHUB_PROCESS_TEST|$0|$1\"; echo to-stderr >&2; exit 3",
                           "zero", "first arg"},
                          options);
  EXPECT_GT(p.pidfd(), 2);
  EXPECT_EQ(p.wait(), 3);
  EXPECT_EQ(p.wait(), 3) << "a second wait returns the same code";
  EXPECT_EQ(read_file(dir / "out.log"), "a value with spaces|zero|first arg\nto-stderr\n");
}

TEST(Process, InheritsTheEnvironmentItDoesNotOverride) {
  TempDir dir;
  ::setenv("TENSORHUB_PROCESS_INHERITED", "from-parent", 1);
  ProcessOptions options;
  options.output = dir / "out.log";
  EXPECT_EQ(Process::spawn({"/bin/sh", "-c", "echo $TENSORHUB_PROCESS_INHERITED"}, options).wait(), 0);
  ::unsetenv("TENSORHUB_PROCESS_INHERITED");
  EXPECT_EQ(read_file(dir / "out.log"), "from-parent\n");
}

TEST(Process, AppendsOrTruncatesTheOutputFile) {
  TempDir dir;
  ProcessOptions options;
  options.output = dir / "out.log";
  EXPECT_EQ(Process::spawn({"/bin/echo", "one"}, options).wait(), 0);
  EXPECT_EQ(Process::spawn({"/bin/echo", "two"}, options).wait(), 0);
  EXPECT_EQ(read_file(dir / "out.log"), "one\ntwo\n");
  options.append_output = false;
  EXPECT_EQ(Process::spawn({"/bin/echo", "three"}, options).wait(), 0);
  EXPECT_EQ(read_file(dir / "out.log"), "three\n");
}

TEST(Process, LooksUpANameInPathAndRunsInTheGivenDirectory) {
  TempDir dir;
  ProcessOptions options;
  options.output = dir / "out.log";
  options.cwd = dir.path();
  EXPECT_EQ(Process::spawn({"sh", "-c", "pwd -P"}, options).wait(), 0);
  EXPECT_EQ(read_file(dir / "out.log"), std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(Process, AMissingProgramIsNotFoundWithThePath) {
  TempDir dir;
  testing::expect_error([&] { Process::spawn({(dir / "no-such-program").string()}); }, ErrorKind::kNotFound,
                        {"cannot start", (dir / "no-such-program").string(), "No such file"});
  testing::expect_error([&] { Process::spawn({}); }, ErrorKind::kInvalidArgument, {"argv is empty"});
}

TEST(Process, WaitForTimesOutWhileTheChildRunsAndStopEndsItWithSigterm) {
  auto p = Process::spawn({"/bin/sleep", "300"});
  EXPECT_EQ(p.wait_for(100ms), std::nullopt);
  EXPECT_EQ(p.stop(10s), 128 + SIGTERM);
  EXPECT_EQ(p.wait_for(0ms), 128 + SIGTERM);
}

TEST(Process, StopKillsAChildThatIgnoresSigterm) {
  TempDir dir;
  // The trap is set before `ready` is written, so the SIGTERM cannot come before it.
  auto p = spawn_logged(dir / "out.log", {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 300"});
  ASSERT_EQ(first_line(dir / "out.log"), "ready");
  EXPECT_EQ(p.stop(300ms), 128 + SIGKILL);
}

TEST(Process, SignalReachesTheWholeProcessGroup) {
  TempDir dir;
  auto p = spawn_logged(dir / "out.log", {"/bin/sh", "-c", "sleep 300 & echo $!; wait"});
  EXPECT_EQ(::getpgid(p.pid()), p.pid()) << "the child leads a group of its own";
  const std::string line = first_line(dir / "out.log");
  ASSERT_FALSE(line.empty());
  const pid_t grandchild = std::stoi(line);
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(::getpgid(grandchild), p.pid());
  EXPECT_EQ(p.stop(10s), 128 + SIGTERM);
  EXPECT_TRUE(gone(grandchild)) << "the sleep started by the shell ended with its group";
}

TEST(Process, WithoutAGroupOfItsOwnTheChildStaysInOurs) {
  ProcessOptions options;
  options.own_process_group = false;
  auto p = Process::spawn({"/bin/sleep", "300"}, options);
  EXPECT_EQ(::getpgid(p.pid()), ::getpgrp());
  EXPECT_EQ(p.stop(10s), 128 + SIGTERM);
}

TEST(Process, DestructionKillsARunningChildAndReleaseHandsItOver) {
  pid_t pid = 0;
  {
    auto p = Process::spawn({"/bin/sleep", "300"});
    pid = p.pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_NE(::kill(pid, 0), 0) << "killed and reaped by the destructor";

  pid_t released = 0;
  {
    auto p = Process::spawn({"/bin/sleep", "300"});
    released = p.release();
    EXPECT_EQ(p.pidfd(), -1);
  }
  EXPECT_EQ(::kill(released, 0), 0) << "a released child outlives its Process";
  ::kill(released, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(released, &status, 0), released);
  EXPECT_TRUE(WIFSIGNALED(status));
}

TEST(Process, MoveAssignmentEndsTheChildItReplaces) {
  auto a = Process::spawn({"/bin/sleep", "300"});
  const pid_t first = a.pid();
  a = Process::spawn({"/bin/true"});
  EXPECT_NE(::kill(first, 0), 0);
  EXPECT_EQ(a.wait(), 0);
}

TEST(ShellQuote, IsOneWordForTheShellWhateverItHolds) {
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  TempDir dir;
  const std::string nasty = "a b'c\"$HOME`id`;\\ \n*";
  ProcessOptions options;
  options.output = dir / "out.log";
  EXPECT_EQ(Process::spawn({"/bin/sh", "-c", "printf %s " + shell_quote(nasty)}, options).wait(), 0);
  EXPECT_EQ(read_file(dir / "out.log"), nasty);
}

TEST(FreeLoopbackPort, CanBeBound) {
  const int port = free_loopback_port();
  ASSERT_GT(port, 0);
  ASSERT_LT(port, 65536);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
}

}  // namespace
}  // namespace tensorhub
