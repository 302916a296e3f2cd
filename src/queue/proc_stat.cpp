// /proc/PID/stat (proc_stat.h).
#include "proc_stat.h"

#include <fstream>
#include <sstream>

namespace tensorhub {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');  // the command name (field 2) may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  ProcStat out;
  if (!(rest >> out.state >> out.ppid)) return std::nullopt;
  std::string field;
  for (int i = 5; i <= 22 && rest >> field; ++i) {
  }
  out.start_time = field;
  return out;
}

}  // namespace tensorhub
