// Per-attempt memory and CPU limits in cgroups (task_limits.h).
#include "task_limits.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "file_text.h"
#include "proc_stat.h"
#include "runner_resources.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using detail::read_file;

namespace fs = std::filesystem;

bool write_file(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

void must_write(const fs::path& path, const std::string& text) {
  if (!write_file(path, text))
    throw Unavailable("cannot write \"" + text + "\" to " + path.string() + ": " + std::strerror(errno));
}

// The value of `key` in a "key value" per line file (memory.events, memory.oom_control); -1 if absent.
long long keyed_value(const fs::path& file, const std::string& key) {
  std::istringstream in(read_file(file));
  for (std::string k, v; in >> k >> v;)
    if (k == key) return std::atoll(v.c_str());
  return -1;
}

std::string start_time(pid_t pid) {
  const auto st = read_proc_stat(pid);
  return st ? st->start_time : "";
}

// Kills the processes listed in a v1 cgroup until it is empty (up to 2 s), then removes it.
void kill_and_rmdir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (true) {
    std::istringstream procs(read_file(dir / "cgroup.procs"));
    bool any = false;
    for (pid_t pid; procs >> pid;) {
      ::kill(pid, SIGKILL);
      any = true;
    }
    if (!any || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // A cgroup whose last process just died may refuse rmdir (EBUSY) for a moment.
  for (int i = 0; i < 100 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void remove_runner_dir(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) kill_and_rmdir(entry.path());
  ::rmdir(dir.c_str());
}

// Removes the runner directories under `parent` whose runner no longer runs (pid gone or with
// another start time), as task_cgroup.cpp does for v2.
void reap_dead_runners(const fs::path& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "tensorhub-runner-";
    if (!name.starts_with(prefix)) continue;
    const auto dash = name.find('-', prefix.size());
    if (dash == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + prefix.size(), nullptr, 10));
    if (pid > 0 && start_time(pid) == name.substr(dash + 1)) continue;
    remove_runner_dir(entry.path());
  }
}

// This runner's directory under a v1 hierarchy's own cgroup `own`, made; "" if it cannot be.
fs::path make_v1_dir(const fs::path& own, const char* limit_file, std::string* why_not) {
  if (own.empty() || !fs::exists(own / limit_file)) {
    if (why_not) *why_not = "no cgroup v1 hierarchy with " + std::string(limit_file);
    return {};
  }
  reap_dead_runners(own);
  const fs::path dir = own / ("tensorhub-runner-" + std::to_string(getpid()) + "-" + start_time(getpid()));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    if (why_not) *why_not = "cannot create " + dir.string() + ": " + std::strerror(errno);
    return {};
  }
  return dir;
}

// Enables `controller` for the children of `dir` and of its ancestors up to the mount (v2's
// rule: a controller is usable in a cgroup only if its parent enables it in subtree_control).
bool enable_v2(const fs::path& runner_dir, const std::string& controller) {
  std::vector<fs::path> chain;
  for (fs::path p = runner_dir; !p.empty() && fs::exists(p / "cgroup.subtree_control"); p = p.parent_path()) {
    chain.insert(chain.begin(), p);
    if (p == p.parent_path()) break;
  }
  for (const auto& p : chain) write_file(p / "cgroup.subtree_control", "+" + controller);
  std::istringstream enabled(read_file(runner_dir / "cgroup.subtree_control"));
  for (std::string c; enabled >> c;)
    if (c == controller) return true;
  return false;
}

}  // namespace

std::unique_ptr<TaskLimits> TaskLimits::open(const fs::path& v2_runner_dir, std::string* why_not) {
  std::unique_ptr<TaskLimits> limits(new TaskLimits());
  if (!v2_runner_dir.empty() && enable_v2(v2_runner_dir, "memory")) {
    limits->v2_dir_ = v2_runner_dir;
    limits->v2_cpu_ = enable_v2(v2_runner_dir, "cpu");
    return limits;
  }
  const detail::CgroupDirs own = detail::own_cgroup_dirs();
  std::string why_v1;
  limits->v1_memory_ = make_v1_dir(own.v1_memory, "memory.limit_in_bytes", &why_v1);
  if (limits->v1_memory_.empty()) {
    if (why_not)
      *why_not = (v2_runner_dir.empty() ? std::string("no cgroup v2 directory for tasks")
                                        : "the cgroup v2 memory controller cannot be enabled under " +
                                              v2_runner_dir.string()) +
                 ", and " + why_v1;
    return nullptr;
  }
  limits->v1_cpu_ = make_v1_dir(own.v1_cpu, "cpu.cfs_quota_us", nullptr);
  return limits;
}

TaskLimits::~TaskLimits() {
  if (!v1_memory_.empty()) remove_runner_dir(v1_memory_);
  if (!v1_cpu_.empty()) remove_runner_dir(v1_cpu_);
}

std::vector<int> TaskLimits::apply(const std::string& name, const TaskResources& r) {
  // The kernel refuses a quota under 1000 us (EINVAL, v1 and v2 alike): a task asking for less
  // than 0.01 cpus gets that least quota instead of failing to start.
  const auto quota = [&](double period) {
    return std::to_string(std::max(1000LL, static_cast<long long>(std::ceil(r.cpus * period))));
  };
  if (!v2_dir_.empty()) {
    const fs::path dir = v2_dir_ / name;
    if (r.memory_bytes > 0) {
      must_write(dir / "memory.max", std::to_string(r.memory_bytes));
      write_file(dir / "memory.swap.max", "0");  // absent without swap accounting
    }
    if (r.cpus > 0 && v2_cpu_) must_write(dir / "cpu.max", quota(100000) + " 100000");
    limited_[name] = r.memory_bytes;
    return {};
  }
  std::vector<int> fds;
  auto make = [&](const fs::path& runner_dir) {
    const fs::path dir = runner_dir / name;
    kill_and_rmdir(dir);  // a leftover of an earlier start of this attempt
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw Unavailable("cannot create the task's cgroup " + dir.string() + ": " + std::strerror(errno));
    return dir;
  };
  auto join = [&](const fs::path& dir) {
    const int fd = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw Unavailable("cannot open " + (dir / "cgroup.procs").string() + ": " + std::strerror(errno));
    fds.push_back(fd);
  };
  if (r.memory_bytes > 0) {
    const fs::path dir = make(v1_memory_);
    must_write(dir / "memory.limit_in_bytes", std::to_string(r.memory_bytes));
    // memory+swap must be >= memory alone, so it is written second.
    if (fs::exists(dir / "memory.memsw.limit_in_bytes"))
      must_write(dir / "memory.memsw.limit_in_bytes", std::to_string(r.memory_bytes));
    join(dir);
    limited_[name] = r.memory_bytes;
  }
  if (r.cpus > 0 && !v1_cpu_.empty()) {
    const fs::path dir = make(v1_cpu_);
    must_write(dir / "cpu.cfs_period_us", "100000");
    must_write(dir / "cpu.cfs_quota_us", quota(100000));
    join(dir);
  }
  return fds;
}

long long TaskLimits::oom_kills(const std::string& name, bool killed_by_sigkill) const {
  if (!limited_.count(name) || limited_.at(name) == 0) return 0;
  if (!v2_dir_.empty()) return std::max(0LL, keyed_value(v2_dir_ / name / "memory.events", "oom_kill"));
  const fs::path dir = v1_memory_ / name;
  const long long kills = keyed_value(dir / "memory.oom_control", "oom_kill");
  if (kills >= 0) return kills;
  return killed_by_sigkill && std::atoll(read_file(dir / "memory.failcnt").c_str()) > 0 ? 1 : 0;
}

fs::path TaskLimits::memory_v1_dir(const std::string& name) const {
  if (v1_memory_.empty() || !limited_.count(name)) return {};
  std::error_code ec;
  const fs::path dir = v1_memory_ / name;
  return fs::is_directory(dir, ec) ? dir : fs::path();
}

void TaskLimits::remove(const std::string& name) {
  limited_.erase(name);
  if (!v2_dir_.empty()) return;
  if (!v1_memory_.empty()) kill_and_rmdir(v1_memory_ / name);
  if (!v1_cpu_.empty()) kill_and_rmdir(v1_cpu_ / name);
}

std::string TaskLimits::describe() const {
  if (!v2_dir_.empty())
    return "cgroup v2 under " + v2_dir_.string() + (v2_cpu_ ? " (memory and cpu)" : " (memory only; no cpu controller)");
  return "cgroup v1: memory under " + v1_memory_.string() +
         (v1_cpu_.empty() ? " (no cpu quota: no v1 cpu hierarchy)" : ", cpu under " + v1_cpu_.string());
}

}  // namespace tensorhub
