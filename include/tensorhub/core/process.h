// tensorhub::Process: one child process started with an argv and an environment, for the
// demo, the benchmarks and the tests (the queue's runner keeps its own fork: it joins a
// cgroup between fork and exec).
//
// Everything the child needs (argv, envp, the output file) is prepared before fork, so the
// child only makes async-signal-safe calls, as a fork of a multi-threaded program must.
// The child's exit status is read through a pidfd: wait_for() sleeps in poll(), not in a loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorhub {

/// How spawn() starts a child.
struct ProcessOptions {
  /// Variables set (or replaced) in the child's environment; the rest is inherited.
  std::map<std::string, std::string> env;
  /// Where the child's stdout and stderr go; empty: this process's own.
  std::filesystem::path output;
  /// Append to `output` (true) or truncate it first (false).
  bool append_output = true;
  /// Where the child's stderr goes when it should not join stdout in `output` (a command
  /// whose stdout is parsed: sbatch --parsable, squeue); opened as `output` is. Empty: with
  /// stdout.
  std::filesystem::path error_output;
  /// The child's working directory; empty: this process's.
  std::filesystem::path cwd;
  /// The child leads a process group of its own, so signal() reaches its whole tree and a
  /// terminal's Ctrl-C does not. False: it stays in this process's group.
  bool own_process_group = true;
  /// The child gets SIGTERM when the thread that spawned it ends (PR_SET_PDEATHSIG): a
  /// benchmark or demo killed mid-run leaves no servers or runners behind.
  bool terminate_with_parent = false;
};

/// A started child. Destroying a Process that still runs kills it (SIGKILL to its group when
/// it leads one) and reaps it; release() hands the child over instead. Move-only.
class Process {
 public:
  /// Starts argv[0] (a path, or a name looked up in PATH) with `argv`.
  /// Throws InvalidArgument for an empty argv, NotFound when argv[0] cannot be executed
  /// (missing, not executable: the exec's errno in the message), Unavailable when fork,
  /// pidfd_open or opening `options.output` fails.
  static Process spawn(const std::vector<std::string>& argv, const ProcessOptions& options = {});

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const noexcept { return pid_; }
  /// A descriptor of the child (pidfd_open), readable once it has exited; -1 after release().
  int pidfd() const noexcept { return pidfd_; }

  /// Sends `signal` to the child's process group when it leads one, else to the child alone.
  /// Does nothing once the child has been waited for.
  void signal(int signal) const;

  /// Waits up to `timeout` for the child to exit; its exit code (128 + signal number when a
  /// signal ended it), or nullopt if it still runs. Repeated calls after the exit return the
  /// same code.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);

  /// Waits for the child to exit; its exit code, or 128 + signal number.
  int wait();

  /// SIGTERM (to the group), up to `grace` for the child to exit, then SIGKILL; the exit code.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  /// Gives up ownership: the destructor neither kills nor reaps the child. Returns its pid.
  pid_t release() noexcept;

 private:
  Process(pid_t pid, int pidfd, bool own_group) : pid_(pid), pidfd_(pidfd), own_group_(own_group) {}
  void close_pidfd() noexcept;

  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool own_group_ = false;
  std::optional<int> exit_code_;
};

/// Quotes `s` for /bin/sh: inside single quotes, each ' written as '\''. The result is one
/// word whatever `s` holds.
std::string shell_quote(const std::string& s);

/// A TCP port on 127.0.0.1 free at the time of the call (bound to port 0, read, closed).
/// Another process may take it before the caller binds it. Throws Unavailable when no socket
/// can be bound.
int free_loopback_port();

}  // namespace tensorhub
