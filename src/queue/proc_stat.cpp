// /proc/PID/stat (proc_stat.h).
#include "proc_stat.h"

#include <fstream>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace tensorhub {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');  // the command name (field 2) may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> fields = {"", "", ""};  // fields[i] is field i (1-based); 1 and 2 skipped
  for (std::string f; rest >> f;) fields.push_back(f);
  if (fields.size() <= 22) return std::nullopt;
  ProcStat out;
  out.state = fields[3].empty() ? 0 : fields[3][0];
  out.ppid = static_cast<pid_t>(std::strtol(fields[4].c_str(), nullptr, 10));
  out.start_time = fields[22];
  if (fields.size() > 49) {  // kernels since 3.5
    out.arg_start = std::strtoull(fields[48].c_str(), nullptr, 10);
    out.arg_end = std::strtoull(fields[49].c_str(), nullptr, 10);
  }
  return out;
}

}  // namespace tensorhub
