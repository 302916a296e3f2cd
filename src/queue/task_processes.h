// Every process a runner's task starts, found and killed when the task's attempt ends.
//
// A task runs in its own process group, but a pipeline's member, a program that calls setsid or
// double-forks (a daemon) leaves that group, and a daemon's parent may exit so that the kernel
// gives it a new one. Two of the kernel's mechanisms keep hold of them:
// - The runner is a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER): an orphaned descendant
//   of a task becomes the runner's child, not init's. The runner recognises it by the
//   TENSORHUB_TASK_ID and TENSORHUB_ATTEMPT it inherited, kills it once that attempt has ended,
//   and reaps it.
// - Where the runner may create cgroups (task_cgroup.h), each attempt has its own: even a
//   process that changed its environment, or was left by a SIGKILLed runner, is killed with it
//   (by this runner at the attempt's end, or by the next runner that starts on the machine).
//
// Thread-safety: one TaskProcesses belongs to one runner thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>

namespace tensorhub {

class TaskCgroups;

class TaskProcesses {
 public:
  /// Makes the calling process a child subreaper and, with `use_cgroups`, opens the cgroups
  /// and kills what dead runners left in theirs. `log` gets one line on how trees are tracked
  /// and one per reaped leftover.
  TaskProcesses(bool use_cgroups, std::function<void(const std::string&)> log);
  ~TaskProcesses();
  TaskProcesses(const TaskProcesses&) = delete;
  TaskProcesses& operator=(const TaskProcesses&) = delete;

  /// The name of an attempt: "task-<id>-<attempt>".
  static std::string attempt_name(std::int64_t task_id, int attempt);

  /// Before forking an attempt's process: creates its cgroup and returns a close-on-exec
  /// descriptor the child writes "0" to (async-signal-safe) before exec; -1 without cgroups.
  /// The caller closes it after fork. Throws Unavailable if the cgroup cannot be made.
  int prepare(const std::string& attempt);

  /// After the attempt's main process `pid` (leader of process group `pid`) has ended or
  /// been killed: kills its process group, its cgroup and its orphans.
  void end(const std::string& attempt, pid_t pid);

  /// Kills orphans of attempts not in `running` and reaps those that died; call it now and
  /// then (the runner does once a second) to catch orphans that outlive their parents later.
  void collect_orphans(const std::set<std::string>& running);

  /// True when this process is a child subreaper (orphans of its tasks come to it), which a
  /// fork server's tasks need (fork_server.h).
  bool is_subreaper() const;

  /// The cgroup directory of `attempt` ("" without cgroups), for the runner's watchdog
  /// (runner_watchdog.h) and its accounting (attempt_usage.h).
  std::string cgroup_of(const std::string& attempt) const;

  /// True when attempts get cgroups.
  bool has_cgroups() const { return cgroups_ != nullptr; }

 private:
  std::unique_ptr<TaskCgroups> cgroups_;
  std::set<pid_t> orphans_;  // our children that belong to attempts; reaped when they die
};

}  // namespace tensorhub
