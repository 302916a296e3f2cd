// What a runner has (runner_resources.h).
#include "runner_resources.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "file_text.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/runner.h"

namespace tensorhub::detail {
namespace {

namespace fs = std::filesystem;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// A Slurm variable as a positive number; nothing when unset. Slurm writes counts as integers,
// SLURM_CPUS_ON_NODE sometimes as "4(x2)" per node: the leading number is this node's.
std::optional<double> slurm_number(const char* name) {
  const char* v = env(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || !(x > 0) || !std::isfinite(x))
    throw InvalidArgument(std::string(name) + "=\"" + v + "\" is not a positive number; unset it or give the runner --cpus/--memory");
  return x;
}

// One "controllers -> mount" entry of mountinfo: the mount point for a cgroup filesystem whose
// super options name `controller` (v1), or the cgroup2 mount for controller "".
struct Mount {
  fs::path point;
  std::string root;
};

std::optional<Mount> find_mount(const std::string& mountinfo, const std::string& controller) {
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    const auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream head(line.substr(0, sep)), tail(line.substr(sep + 3));
    std::string f[5], type, source, options;
    for (auto& x : f) head >> x;
    tail >> type >> source >> options;
    if (controller.empty() ? type != "cgroup2" : type != "cgroup") continue;
    if (!controller.empty()) {
      std::istringstream opts(options);
      bool has = false;
      for (std::string o; std::getline(opts, o, ',');) has = has || o == controller;
      if (!has) continue;
    }
    return Mount{f[4], f[3]};
  }
  return std::nullopt;
}

fs::path join(const Mount& m, std::string path) {
  if (m.root != "/" && path.starts_with(m.root)) path = path.substr(m.root.size());
  fs::path out = m.point;
  if (!path.empty() && path != "/") out /= fs::path(path).relative_path();
  return out;
}

}  // namespace

CgroupDirs cgroup_dirs(const std::string& proc_cgroup, const std::string& mountinfo) {
  CgroupDirs dirs;
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      if (auto m = find_mount(mountinfo, "")) dirs.v2 = join(*m, path);
      continue;
    }
    std::istringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');) {
      if (c == "memory") {
        if (auto m = find_mount(mountinfo, "memory")) dirs.v1_memory = join(*m, path);
      } else if (c == "cpu") {
        if (auto m = find_mount(mountinfo, "cpu")) dirs.v1_cpu = join(*m, path);
      }
    }
  }
  return dirs;
}

CgroupDirs own_cgroup_dirs() { return cgroup_dirs(read_file("/proc/self/cgroup"), read_file("/proc/self/mountinfo")); }

std::optional<std::int64_t> cgroup_memory_limit(const CgroupDirs& dirs) {
  // v1 reports "no limit" as PAGE_COUNTER_MAX pages (about 2^63); anything above 2^60 is that.
  constexpr long long kUnlimited = 1LL << 60;
  for (const fs::path& file : {dirs.v2.empty() ? fs::path() : dirs.v2 / "memory.max",
                               dirs.v1_memory.empty() ? fs::path() : dirs.v1_memory / "memory.limit_in_bytes"}) {
    if (file.empty()) continue;
    const std::string text = read_file(file);
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str() && v > 0 && v < kUnlimited) return v;
  }
  return std::nullopt;
}

std::int64_t meminfo_total(const fs::path& meminfo) {
  std::ifstream in(meminfo);
  for (std::string key; in >> key;) {
    long long kib = 0;
    if (key == "MemTotal:" && in >> kib) return kib * 1024;
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

double detect_cpus() {
  if (auto n = slurm_number("SLURM_CPUS_PER_TASK")) return *n;
  if (auto n = slurm_number("SLURM_CPUS_ON_NODE")) return *n;
  return available_cores();
}

std::int64_t detect_memory_bytes(double cpus, const CgroupDirs& dirs, const fs::path& meminfo, std::string* source) {
  auto said = [&](const char* s) {
    if (source) *source = s;
  };
  constexpr std::int64_t kMiB = 1 << 20;
  if (auto mib = slurm_number("SLURM_MEM_PER_NODE")) {
    said("SLURM_MEM_PER_NODE");
    return static_cast<std::int64_t>(*mib) * kMiB;
  }
  if (auto mib = slurm_number("SLURM_MEM_PER_CPU")) {
    said("SLURM_MEM_PER_CPU");
    return static_cast<std::int64_t>(*mib * cpus) * kMiB;
  }
  const std::int64_t total = meminfo_total(meminfo);
  const auto limit = cgroup_memory_limit(dirs);
  if (limit && (total == 0 || *limit < total)) {
    said("cgroup");
    return *limit;
  }
  said("MemTotal");
  return total;
}

std::vector<int> parse_gpu_ids(const std::string& text, const std::string& what) {
  std::vector<int> ids;
  std::set<int> seen;
  std::istringstream parts(text);
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 1 << 20 || !std::isdigit(static_cast<unsigned char>(s[0])))
      throw InvalidArgument(what + " \"" + text + "\": \"" + s +
                            "\" is not a GPU id; give device numbers separated by commas, e.g. 0,1,2,3");
    return static_cast<int>(v);
  };
  for (std::string part; std::getline(parts, part, ',');) {
    const auto dash = part.find('-');
    if (dash == 0)  // "-1": a negative id, not a range
      throw InvalidArgument(what + " \"" + text + "\": \"" + part +
                            "\" is not a GPU id; give device numbers >= 0 separated by commas, e.g. 0,1,2,3");
    const int first = number(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : number(part.substr(dash + 1));
    if (last < first)
      throw InvalidArgument(what + " \"" + text + "\": the range \"" + part + "\" runs backwards; write it " +
                            std::to_string(last) + "-" + std::to_string(first));
    for (int id = first; id <= last; ++id) {
      if (!seen.insert(id).second)
        throw InvalidArgument(what + " \"" + text + "\" names GPU " + std::to_string(id) +
                              " twice; each GPU can be handed out once");
      ids.push_back(id);
    }
  }
  return ids;
}

std::vector<int> detect_gpus(std::string* source) {
  if (source) source->clear();
  if (const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES")) {
    if (source) *source = "CUDA_VISIBLE_DEVICES";
    try {
      return parse_gpu_ids(cuda, "CUDA_VISIBLE_DEVICES");
    } catch (const Error&) {
      if (source) *source = "CUDA_VISIBLE_DEVICES (not integer ids: not read)";
      return {};  // UUIDs, MIG names, "-1": nothing we can hand out by number
    }
  }
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"})
    if (const char* v = env(name)) {
      if (source) *source = name;
      return parse_gpu_ids(v, name);
    }
  return {};
}

std::string detect_slurm_job_id() {
  const char* array = env("SLURM_ARRAY_JOB_ID");
  const char* index = env("SLURM_ARRAY_TASK_ID");
  if (array && index) return std::string(array) + "_" + index;
  const char* job = env("SLURM_JOB_ID");
  return job ? job : "";
}

std::string gpu_id_list(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

GpuLocks::GpuLocks(const fs::path& fallback, bool use_run_lock) {
  if (const char* dir = env("TENSORHUB_GPU_LOCK_DIR")) dir_ = dir;
  else dir_ = use_run_lock && ::access("/run/lock", W_OK) == 0 ? fs::path("/run/lock") : fallback;
}

GpuLocks::~GpuLocks() {
  for (const auto& [id, fd] : fds_) ::close(fd);
}

bool GpuLocks::try_lock(int id) {
  if (held(id)) return false;
  const fs::path file = dir_ / ("tensorhub-gpu-" + std::to_string(id) + ".lock");
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  fds_[id] = fd;
  return true;
}

void GpuLocks::unlock(int id) {
  const auto it = fds_.find(id);
  if (it == fds_.end()) return;
  ::close(it->second);  // closing the only descriptor of the open file drops its flock
  fds_.erase(it);
}

}  // namespace tensorhub::detail
