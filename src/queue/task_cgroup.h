// A cgroup v2 per task attempt: every process a task starts (a pipeline, a program that
// daemonises with setsid or a double fork) stays in its cgroup, so the runner can kill the
// whole tree when the attempt ends, and the next runner on the machine can kill what a
// SIGKILLed runner left behind. Linux's cgroup v2 (Documentation/admin-guide/cgroup-v2.rst):
// a process joins a cgroup by writing "0" to its cgroup.procs, `cgroup.kill` (Linux 5.14)
// kills every process inside, `cgroup.events` says whether any is left.
//
// Layout under the cgroup v2 mount (found in /proc/self/mountinfo):
//   tensorhub/runner-<pid>-<start time>/task-<id>-<attempt>
// The runner directory names its owner by pid and start time (field 22 of /proc/PID/stat), so
// a reused pid is never mistaken for a live runner.
//
// Thread-safety: one TaskCgroups belongs to one runner thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tensorhub {

class TaskCgroups {
 public:
  /// Makes this process's runner directory. Returns nullptr, with the reason in *why_not,
  /// where no cgroup v2 hierarchy is mounted or it is not writable (not root, no delegation):
  /// the runner then still kills a task's process group and the orphans it collects as
  /// subreaper, but a SIGKILLed runner's daemons are not found again.
  static std::unique_ptr<TaskCgroups> open(std::string* why_not);

  /// Kills what is left in this runner's cgroups and removes them.
  ~TaskCgroups();
  TaskCgroups(const TaskCgroups&) = delete;
  TaskCgroups& operator=(const TaskCgroups&) = delete;

  /// Creates the cgroup `name` (e.g. "task-3-1") and returns an open, close-on-exec descriptor
  /// of its cgroup.procs: a forked child writes "0" to it before exec to join. Throws
  /// Unavailable naming the directory if it cannot be created.
  int create(const std::string& name);

  /// Kills every process in cgroup `name`, waits up to `timeout_s` for it to empty and
  /// removes it. Returns false if processes were still inside at the deadline (it is then
  /// retried by the destructor). A name that does not exist is a no-op.
  bool kill_and_remove(const std::string& name, double timeout_s = 2.0);

  /// The processes now in cgroup `name` (empty if it does not exist).
  std::vector<int> processes(const std::string& name) const;

  /// Kills and removes every cgroup of runners that no longer run (their pid is gone or has
  /// another start time). Returns how many task cgroups held processes.
  int reap_dead_runners();

  /// This runner's directory, e.g. /sys/fs/cgroup/tensorhub/runner-42-1234.
  const std::filesystem::path& dir() const { return dir_; }

 private:
  TaskCgroups(std::filesystem::path root, std::filesystem::path dir) : root_(std::move(root)), dir_(std::move(dir)) {}
  std::filesystem::path root_, dir_;
};

}  // namespace tensorhub
