// A cgroup v2 per task attempt (task_cgroup.h).
#include "task_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "proc_stat.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

// The mount point of the cgroup v2 hierarchy, or "" (proc(5), /proc/PID/mountinfo: the
// filesystem type follows the " - " separator, the mount point is the fifth field).
fs::path cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const auto sep = line.find(" - ");
    if (sep == std::string::npos || line.compare(sep + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, sep));
    std::string field, mount_point;
    for (int i = 0; i < 5 && fields >> field; ++i) mount_point = field;
    return mount_point;
  }
  return {};
}

// A process's start time, which tells it from a later process given the same pid; "" if none.
std::string start_time(pid_t pid) {
  const auto st = read_proc_stat(pid);
  return st ? st->start_time : "";
}

bool write_text(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

bool populated(const fs::path& cgroup) {
  std::ifstream in(cgroup / "cgroup.events");
  for (std::string key, value; in >> key >> value;)
    if (key == "populated") return value != "0";
  return false;  // gone
}

// SIGKILL to every process listed in cgroup.procs: the way to empty a cgroup on kernels
// without cgroup.kill (before 5.14).
void kill_listed(const fs::path& cgroup) {
  std::ifstream in(cgroup / "cgroup.procs");
  for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
}

// Kills everything in `cgroup`, waits for it to empty, removes it. False if it did not empty.
bool kill_cgroup(const fs::path& cgroup, double timeout_s) {
  std::error_code ec;
  if (!fs::exists(cgroup, ec)) return true;
  const bool has_kill = write_text(cgroup / "cgroup.kill", "1");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (populated(cgroup)) {
    if (!has_kill) kill_listed(cgroup);  // also catches processes forked meanwhile
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::rmdir(cgroup.c_str()) == 0 || errno == ENOENT;
}

// Removes a runner directory and the task cgroups in it. Returns how many held processes.
int kill_runner_dir(const fs::path& dir, double timeout_s) {
  int occupied = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (populated(entry.path())) ++occupied;
    kill_cgroup(entry.path(), timeout_s);
  }
  ::rmdir(dir.c_str());
  return occupied;
}

}  // namespace

std::unique_ptr<TaskCgroups> TaskCgroups::open(std::string* why_not) {
  const fs::path mount = cgroup2_mount();
  if (mount.empty()) {
    if (why_not) *why_not = "no cgroup v2 hierarchy is mounted";
    return nullptr;
  }
  const fs::path root = mount / "tensorhub";
  const fs::path dir = root / ("runner-" + std::to_string(getpid()) + "-" + start_time(getpid()));
  for (const auto& d : {root, dir}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      if (why_not) *why_not = "cannot create " + d.string() + ": " + std::strerror(errno);
      return nullptr;
    }
  }
  return std::unique_ptr<TaskCgroups>(new TaskCgroups(root, dir));
}

TaskCgroups::~TaskCgroups() { kill_runner_dir(dir_, 2.0); }

int TaskCgroups::create(const std::string& name) {
  const fs::path cgroup = dir_ / name;
  kill_cgroup(cgroup, 2.0);  // a leftover of the same name (an earlier start of this attempt)
  if (::mkdir(cgroup.c_str(), 0755) != 0 && errno != EEXIST)
    throw Unavailable("cannot create the task's cgroup " + cgroup.string() + ": " + std::strerror(errno));
  const int fd = ::open((cgroup / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Unavailable("cannot open " + (cgroup / "cgroup.procs").string() + ": " + std::strerror(errno));
  return fd;
}

bool TaskCgroups::kill_and_remove(const std::string& name, double timeout_s) {
  return kill_cgroup(dir_ / name, timeout_s);
}

std::vector<int> TaskCgroups::processes(const std::string& name) const {
  std::vector<int> out;
  std::ifstream in(dir_ / name / "cgroup.procs");
  for (int pid; in >> pid;) out.push_back(pid);
  return out;
}

int TaskCgroups::reap_dead_runners() {
  int occupied = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.path() == dir_ || !name.starts_with("runner-")) continue;
    // runner-<pid>-<start time>: alive only if that pid still has that start time.
    const auto dash = name.find('-', 7);
    if (dash == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + 7, nullptr, 10));
    if (pid > 0 && start_time(pid) == name.substr(dash + 1)) continue;
    occupied += kill_runner_dir(entry.path(), 2.0);
  }
  return occupied;
}

}  // namespace tensorhub
