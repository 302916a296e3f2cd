// The fields of /proc/PID/stat that queue/ reads (proc(5)): the runner's process tracking
// (task_cgroup.cpp, task_processes.cpp) and the fork server's command line (fork_server.cpp).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tensorhub {

struct ProcStat {
  char state = 0;          ///< field 3: R, S, D, Z, ...
  pid_t ppid = 0;          ///< field 4: the parent
  std::string start_time;  ///< field 22: clock ticks since boot, as text (an identity, never computed with)
  unsigned long long arg_start = 0;  ///< field 48: where the command line's memory starts (0: unknown)
  unsigned long long arg_end = 0;    ///< field 49: where it ends
};

/// The process's stat fields, or nothing when there is no such process.
std::optional<ProcStat> read_proc_stat(pid_t pid);

}  // namespace tensorhub
