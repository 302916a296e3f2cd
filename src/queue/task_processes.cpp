// Every process a runner's task starts (task_processes.h).
#include "task_processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "proc_stat.h"
#include "task_cgroup.h"

namespace tensorhub {
namespace {

// The value of `key` in a NUL-separated environment block, or "".
std::string env_value(const std::string& environ, const std::string& key) {
  const std::string needle = key + "=";
  for (std::size_t i = 0; i < environ.size();) {
    const std::size_t end = environ.find('\0', i);
    const std::size_t stop = end == std::string::npos ? environ.size() : end;
    if (environ.compare(i, needle.size(), needle) == 0) return environ.substr(i + needle.size(), stop - i - needle.size());
    i = stop + 1;
  }
  return "";
}

// The attempt a process was started for (its inherited TENSORHUB_TASK_ID and
// TENSORHUB_ATTEMPT), or "" for a process of no task.
std::string attempt_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string environ((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string task = env_value(environ, "TENSORHUB_TASK_ID");
  const std::string attempt = env_value(environ, "TENSORHUB_ATTEMPT");
  if (task.empty() || attempt.empty()) return "";
  return "task-" + task + "-" + attempt;
}

}  // namespace

TaskProcesses::TaskProcesses(bool use_cgroups, std::function<void(const std::string&)> log) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    log(std::string("cannot become a child subreaper (") + std::strerror(errno) + "): a task's orphans may survive it");
  if (!use_cgroups) {
    log("task cgroups off: orphans of a task are killed when they are found, a SIGKILLed runner's are not");
    return;
  }
  std::string why_not;
  cgroups_ = TaskCgroups::open(&why_not);
  if (!cgroups_) {
    log("no task cgroups (" + why_not + "): orphans of a task are killed when they are found, a SIGKILLed "
        "runner's are not");
    return;
  }
  log("each task runs in its own cgroup under " + cgroups_->dir().string());
  if (const int left = cgroups_->reap_dead_runners(); left > 0)
    log("killed the processes of " + std::to_string(left) + " task(s) left by runners that no longer run");
}

TaskProcesses::~TaskProcesses() {
  cgroups_.reset();  // kills what is left in this runner's cgroups
  for (const pid_t pid : orphans_) waitpid(pid, nullptr, WNOHANG);
}

bool TaskProcesses::is_subreaper() const {
  int on = 0;
  return prctl(PR_GET_CHILD_SUBREAPER, &on) == 0 && on != 0;
}

std::string TaskProcesses::attempt_name(std::int64_t task_id, int attempt) {
  return "task-" + std::to_string(task_id) + "-" + std::to_string(attempt);
}

std::string TaskProcesses::cgroup_of(const std::string& attempt) const {
  return cgroups_ ? (cgroups_->dir() / attempt).string() : "";
}

int TaskProcesses::prepare(const std::string& attempt) { return cgroups_ ? cgroups_->create(attempt) : -1; }

void TaskProcesses::end(const std::string& attempt, pid_t pid) {
  ::kill(-pid, SIGKILL);  // what is left of the task's process group
  if (!cgroups_) return;
  // Our children in the cgroup (orphans) become zombies when killed: note them to reap them.
  for (const int p : cgroups_->processes(attempt))
    if (const auto st = read_proc_stat(p); st && st->ppid == getpid()) orphans_.insert(p);
  cgroups_->kill_and_remove(attempt);
}

void TaskProcesses::collect_orphans(const std::set<std::string>& running) {
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    const auto st = read_proc_stat(pid);
    if (!st || st->ppid != self || st->state == 'Z') continue;
    // A running attempt's main process is our child too: it is the runner's to wait for.
    const std::string attempt = attempt_of(pid);
    if (attempt.empty() || running.count(attempt)) continue;
    ::kill(pid, SIGKILL);
    orphans_.insert(pid);
  }
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    const pid_t r = waitpid(*it, nullptr, WNOHANG);
    it = r == *it || (r < 0 && errno == ECHILD) ? orphans_.erase(it) : std::next(it);
  }
}

}  // namespace tensorhub
