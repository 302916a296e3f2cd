// A fork server: a process that has loaded a program's libraries once and forks a copy of
// itself for each task, so a task starts in milliseconds instead of paying the program's
// start-up (for `tensorhub train-spec`, loading libtorch: about 0.75-1 s per process).
//
// The pattern is Python's multiprocessing "forkserver" and Android's zygote: the server is
// started early, single-threaded, before it has run anything that starts threads (a fork
// copies only the calling thread, so forking a process with threads can copy a lock held by
// another thread); it forks on request and the child calls the program's entry function with
// the task's argv, as if the program had been executed with it.
//
// The runner keeps supervising a forked task exactly as one it executed: the server forks
// twice (server -> intermediate -> task) and the intermediate exits at once, so the task is
// re-parented to the nearest child subreaper above it, the runner (task_processes.h sets
// PR_SET_CHILD_SUBREAPER); the runner then waits for it, kills its process group and reads its
// pidfd as for any child. The task joins its attempt's cgroup, leads its own process group,
// writes to the task log and gets SIGKILL when the runner dies (PR_SET_PDEATHSIG, set once it
// is the runner's child), like an executed task (runner.cpp, fork_task).
//
// Protocol (a private socketpair, the server's end as its fd 3): each message is a 4-byte
// little-endian length and that many bytes of JSON. A request, {"args": [...], "env":
// ["K=V", ...], "reaper": pid, "cgroup": bool}, carries the task log's descriptor and, with
// "cgroup", an open cgroup.procs of the attempt's cgroup (SCM_RIGHTS); the answer is
// {"pid": N} or {"error": "..."}. The server exits when the socket closes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tensorhub {

/// One task to start through a fork server.
struct ForkRequest {
  std::vector<std::string> args;  ///< argv for the entry function; args[0] is the program
  std::vector<std::string> env;   ///< the task's whole environment, "NAME=value" each
  int output_fd = -1;             ///< the task's stdout and stderr (required; not closed)
  int cgroup_procs_fd = -1;       ///< an open cgroup.procs the task writes itself to; -1: none
};

/// The runner's side: a started fork server and the socket to it. Not thread-safe; one
/// request at a time. Destroying it closes the socket (the server exits) and reaps the server;
/// tasks it started are the caller's children and are not touched.
class ForkServer {
 public:
  /// Starts `command` (a program and its arguments; the program must call
  /// serve_fork_requests(3, ...)) with `env` as its environment, the socket as its fd 3 and
  /// SIGKILL as its parent-death signal, and waits for its greeting (at most `timeout_s`
  /// seconds): the server says it is ready only while it has a single thread.
  /// Throws Unavailable when it cannot be started, exits, is not ready in time or has threads.
  /// The caller must be a child subreaper (PR_SET_CHILD_SUBREAPER) for spawn() to work.
  static std::unique_ptr<ForkServer> start(const std::vector<std::string>& command, const std::vector<std::string>& env,
                                           double timeout_s = 30);
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  /// Starts a task; returns its pid, a child of the caller (waitpid works on it) that leads its
  /// own process group. Throws Unavailable when the server is gone or could not fork (the
  /// server's reason in the message); the server stays usable after a failed fork.
  pid_t spawn(const ForkRequest& request);

  /// The server's pid.
  pid_t pid() const noexcept { return pid_; }

  /// Whether the server has exited; if so, reaps it (once) and returns its wait status (as
  /// waitpid's), else nullopt. A caller that reaps its children itself calls this first.
  std::optional<int> poll_exit();

 private:
  ForkServer(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  pid_t pid_;
  int fd_;
  std::optional<int> exit_status_;  // once reaped
};

/// The server's side: answers requests on `fd` until the socket closes, then returns 0.
/// Each task is a fork of this process that calls `entry(args)` with the request's argv and
/// environment, its output on the request's descriptor, and exits with entry's return value
/// (1 if entry throws) after flushing stdio and iostreams, without running static destructors
/// or atexit handlers (_exit: they belong to the server's copy of the program). Call it from
/// the main thread before anything has started a thread; it returns 1 at once, after saying
/// why on stderr, if the process has more than one thread.
int serve_fork_requests(int fd, const std::function<int(const std::vector<std::string>& args)>& entry);

}  // namespace tensorhub
