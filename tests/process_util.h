// Helpers for tests that run tensorhub binaries as real processes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../src/queue/task_cgroup.h"
#include "tensorhub/core/process.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub::testing {

using namespace std::chrono_literals;

inline const std::string kTensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";

/// A loopback TCP port nothing listens on now, for a server process the test starts: bound
/// to port 0, read, closed (another process may take it meanwhile; tests live with that).
/// Throws std::runtime_error when no socket can be bound.
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) close(fd);
  if (!ok) throw std::runtime_error("cannot find a free port");
  return ntohs(addr.sin_port);
}

/// A temporary directory with the URI of a SQLite hub in it (no file yet: the processes a test
/// starts create it) and a log file for those processes' output.
struct SqliteHubPaths {
  TempDir dir;
  std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  std::string log = (dir.path() / "processes.log").string();
};

/// A fresh SQLite hub file (project "p") with its queue: what the runner process tests share.
struct SqliteHubFiles : SqliteHubPaths {
  Hub hub{uri, "p"};
  TaskQueue queue{hub};
};

/// Starts argv[0] (core's Process: exec failures throw NotFound) with stdout and stderr
/// appended to `log_path`, in this process's group; the caller waits for the pid (wait_exit).
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  ProcessOptions options;
  options.output = log_path;
  options.own_process_group = false;
  return Process::spawn(args, options).release();
}

/// Waits for `pid`; its exit code, or 128 + signal.
inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Waits up to `limit` for `pid`: its exit code (or 128 + signal), or nullopt when it was
/// still running, in which case it is killed (SIGKILL) and reaped so that no test hangs on it.
inline std::optional<int> wait_exit_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Polls `pred` every 50 ms for up to `limit`; true if it held. Exceptions count as false
/// (a database restarting under the test).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 30000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto holds = [&] {
    try {
      return static_cast<bool>(pred());
    } catch (const std::exception&) {
      return false;
    }
  };
  while (std::chrono::steady_clock::now() < deadline) {
    if (holds()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return holds();
}

inline std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The pids of the processes (from /proc) whose command line, as /proc/PID/cmdline holds it
/// (each argument followed by a NUL byte), satisfies `match`.
template <typename Match>
std::vector<pid_t> pids_whose_cmdline(Match match) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (match(read_text(entry.path() / "cmdline"))) pids.push_back(std::stoi(name));
  }
  return pids;
}

/// True where this process may give each task attempt a cgroup v2 (task_cgroup.h): root, or
/// a delegated hierarchy. Tests of cgroup behaviour skip without it.
inline bool cgroups_available() {
  std::string why;
  return TaskCgroups::open(&why) != nullptr;
}

/// True while process `pid` runs: /proc/PID/stat exists and its state is not Z (a zombie has
/// ended, only its exit status is left).
inline bool alive(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

/// The parent pid of `pid` (field 4 of /proc/PID/stat), or -1 when it is gone.
inline pid_t parent_of(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid);
  return ppid;
}

/// The watchdog of runner `runner` (queue/runner_watchdog.h): its child whose command line
/// starts with "tensorhub-runner-watchdog"; -1 when it has none.
inline pid_t runner_watchdog_of(pid_t runner) {
  for (const pid_t p : pids_whose_cmdline([](const std::string& c) { return c.starts_with("tensorhub-runner-watchdog"); }))
    if (parent_of(p) == runner) return p;
  return -1;
}

/// The port a server started with port 0 prints in its log: the first group of `pattern` (e.g.
/// R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)"), waited for as eventually() does; 0 (and a
/// failed expectation showing the log) when it never appears.
inline int port_from_log(const std::filesystem::path& log, const std::string& pattern) {
  const std::regex listening(pattern);
  int port = 0;
  EXPECT_TRUE(eventually([&] {
    std::smatch m;
    const std::string text = read_text(log);
    if (!std::regex_search(text, m, listening)) return false;
    port = std::stoi(m[1]);
    return true;
  })) << read_text(log);
  return port;
}

}  // namespace tensorhub::testing
