// The fields of /proc/PID/stat that the runner's process tracking reads (proc(5)); internal
// to queue/ (task_cgroup.cpp, task_processes.cpp).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tensorhub {

struct ProcStat {
  char state = 0;          ///< field 3: R, S, D, Z, ...
  pid_t ppid = 0;          ///< field 4: the parent
  std::string start_time;  ///< field 22: clock ticks since boot, as text (an identity, never computed with)
};

/// The process's stat fields, or nothing when there is no such process.
std::optional<ProcStat> read_proc_stat(pid_t pid);

}  // namespace tensorhub
