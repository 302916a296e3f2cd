// A runner's watchdog: one small process per runner that kills the runner's running attempts
// when the runner dies by any signal (SIGKILL, the OOM killer, a crash), within a moment and
// without waiting for a successor on the machine, so a task whose lease will pass to another
// runner is never left running beside its next attempt.
//
// How: the runner forks the watchdog when it starts, before it runs tasks. The two share a
// private AF_UNIX SOCK_SEQPACKET socket pair; only the runner holds its end (close-on-exec, so
// no executed task or fork server inherits it; the watchdog closes every other descriptor it
// inherited). A socket pair rather than pipe(2): the end of the stream is seen the same way
// (the kernel closes the runner's end when it dies, however it dies, and the watchdog reads 0
// bytes), but send(MSG_NOSIGNAL) lets the runner find a dead watchdog without SIGPIPE, and
// each message arrives whole. The runner sends one message per attempt started (its process
// group and, where it has one, its cgroup) and one per attempt ended. At the end of the stream
// the watchdog kills every attempt still registered: cgroup.kill (Linux 5.14; else SIGKILL to
// each pid of cgroup.procs until none is left) where the attempt has a cgroup, and SIGKILL to
// its process group always; then it removes the emptied cgroups and exits. A runner that exits
// cleanly sends "quit" first and the watchdog exits without a word.
//
// Why not PR_SET_PDEATHSIG alone: the kernel sends it when the *thread* that forked the child
// exits (not the process), so a runner with threads can lose a task for nothing, and it reaches
// only the direct child, not a pipeline's members or a daemon (the runner's tasks do set it, as a
// first line). Why not a supervisor per attempt: one process per runner, not per task, and it
// costs one message per attempt, not a fork.
//
// Without cgroups (RunnerOptions::task_cgroups = false, or none writable), only the attempts'
// process groups die with the runner: a process that left its group (setsid, a daemon) escapes,
// as it escapes the runner's own kill at the end of an attempt; the next runner on the machine
// does not find it either.
//
// Its command line reads "tensorhub-runner-watchdog" (not the runner's, which it was forked with).
//
// The watchdog runs only async-signal-safe calls (it is forked from a process that may have
// threads): recv, open, read, write, kill, rmdir, nanosleep, prctl, memcpy, _exit; no allocation.
//
// Thread-safety: one RunnerWatchdog belongs to one runner thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace tensorhub {

class RunnerWatchdog {
 public:
  /// Longest cgroup path the watchdog takes (a longer one is registered by process group only).
  static constexpr std::size_t kMaxPath = 500;

  /// Forks the watchdog. Throws Unavailable when the socket pair or the fork fails. `log` gets
  /// a line when the watchdog dies and is restarted.
  explicit RunnerWatchdog(std::function<void(const std::string&)> log);
  /// Tells the watchdog to exit without killing anything, and reaps it.
  ~RunnerWatchdog();
  RunnerWatchdog(const RunnerWatchdog&) = delete;
  RunnerWatchdog& operator=(const RunnerWatchdog&) = delete;

  /// Registers a running attempt: its process group `pgid` (> 0) and its cgroup directory (""
  /// without one). Killed if the runner dies before remove(attempt).
  void add(const std::string& attempt, pid_t pgid, const std::string& cgroup);
  /// The attempt ended (its processes are the runner's to kill): forgets it.
  void remove(const std::string& attempt);

  /// Whether the watchdog died (killed by someone); if so, reaps it, logs it, starts another
  /// and registers the running attempts with it. Call it now and then (the runner does on
  /// each supervise round). Never throws: a watchdog that cannot be restarted is logged and
  /// tried again on the next call.
  void check();

  /// The watchdog's pid (-1 while there is none).
  pid_t pid() const { return pid_; }

 private:
  struct Entry {
    pid_t pgid;
    std::string cgroup;
  };
  void spawn();
  bool send(char op, pid_t pgid, const std::string& cgroup);

  std::function<void(const std::string&)> log_;
  std::map<std::string, Entry> attempts_;  // what the watchdog holds now
  pid_t pid_ = -1;
  int fd_ = -1;  // the runner's end of the socket pair
};

}  // namespace tensorhub
