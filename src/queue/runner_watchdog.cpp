// A runner's watchdog (runner_watchdog.h).
#include "runner_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "proc_stat.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// One message: 'A' (add), 'R' (remove) or 'Q' (quit), the attempt's process group, and for
// 'A' its cgroup directory, NUL-terminated ("" for none). Fixed size, sent whole.
struct Message {
  char op;
  pid_t pgid;
  char cgroup[RunnerWatchdog::kMaxPath + 1];
};

// Attempts the watchdog can hold at once (a runner has one per slot).
constexpr int kMaxAttempts = 1024;

// The watchdog's table, in static storage so that the child allocates nothing.
struct Held {
  pid_t pgid;
  char cgroup[RunnerWatchdog::kMaxPath + 1];
};
Held held[kMaxAttempts];
int held_count = 0;

// --- the watchdog's side: async-signal-safe calls only ------------------------------------

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// `dir` + "/" + `name` into `out` (kMaxPath + 32 bytes); false if it does not fit.
bool join(char* out, std::size_t size, const char* dir, const char* name) {
  const std::size_t a = std::strlen(dir), b = std::strlen(name);
  if (a + 1 + b + 1 > size) return false;
  std::memcpy(out, dir, a);
  out[a] = '/';
  std::memcpy(out + a + 1, name, b + 1);
  return true;
}

bool write_file(const char* path, const char* text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, text, std::strlen(text));
  ::close(fd);
  return n == static_cast<ssize_t>(std::strlen(text));
}

// SIGKILL to each pid listed in `procs` (a cgroup.procs file); how many were listed.
int kill_listed(const char* procs) {
  const int fd = ::open(procs, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  int listed = 0;
  long pid = -1;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
      } else if (pid >= 0) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        ++listed;
        pid = -1;
      }
    }
  }
  if (pid >= 0) ::kill(static_cast<pid_t>(pid), SIGKILL), ++listed;
  ::close(fd);
  return listed;
}

// Empties the cgroup `dir` (cgroup.kill, else SIGKILL to what cgroup.procs lists, until it
// lists nothing, for at most ~2 s) and removes it and, if then empty, its runner directory.
void kill_cgroup(const char* dir) {
  char path[RunnerWatchdog::kMaxPath + 32];
  if (join(path, sizeof path, dir, "cgroup.kill")) write_file(path, "1");
  if (!join(path, sizeof path, dir, "cgroup.procs")) return;
  for (int i = 0; i < 400 && kill_listed(path) > 0; ++i) sleep_ms(5);
  // rmdir fails while a killed process is not yet gone: retry for a moment.
  for (int i = 0; i < 200 && ::rmdir(dir) != 0 && errno == EBUSY; ++i) sleep_ms(5);
  std::strncpy(path, dir, sizeof path - 1);
  path[sizeof path - 1] = '\0';
  if (char* slash = std::strrchr(path, '/'); slash && slash != path) {
    *slash = '\0';
    ::rmdir(path);  // the runner's directory: fails (fine) while another attempt's is inside
  }
}

void say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

// The runner is gone: kill every registered attempt's tree.
[[noreturn]] void kill_all() {
  if (held_count > 0) say("tensorhub runner watchdog: the runner died; killing its running tasks\n");
  for (int i = 0; i < held_count; ++i) ::kill(-held[i].pgid, SIGKILL);
  for (int i = 0; i < held_count; ++i)
    if (held[i].cgroup[0]) kill_cgroup(held[i].cgroup);
  for (int i = 0; i < held_count; ++i) ::kill(-held[i].pgid, SIGKILL);  // anything forked meanwhile
  ::_exit(0);
}

void apply(const Message& m) {
  if (m.op == 'Q') ::_exit(0);
  if (m.op == 'A' && held_count < kMaxAttempts) {
    held[held_count].pgid = m.pgid;
    std::memcpy(held[held_count].cgroup, m.cgroup, sizeof m.cgroup);
    held[held_count].cgroup[RunnerWatchdog::kMaxPath] = '\0';
    ++held_count;
  } else if (m.op == 'R') {
    for (int i = 0; i < held_count; ++i)
      if (held[i].pgid == m.pgid) {
        held[i] = held[--held_count];
        break;
      }
  }
}

// The watchdog's name where `ps` and process scans look: its command line (the memory between
// arg_start and arg_end, read by the runner before the fork) becomes `kCommandLine`, NUL-padded,
// so that nothing that looks for runners by their command line ("tensorhub runner --hub ...")
// takes the watchdog, a fork of the runner, for one; its comm becomes "th-watchdog".
constexpr char kCommandLine[] = "tensorhub-runner-watchdog";

void rename(char* arg_start, char* arg_end) {
  ::prctl(PR_SET_NAME, "th-watchdog", 0, 0, 0);
  if (!arg_start || arg_end <= arg_start) return;
  const std::size_t size = static_cast<std::size_t>(arg_end - arg_start);
  std::memset(arg_start, 0, size);
  std::memcpy(arg_start, kCommandLine, std::min(size - 1, sizeof kCommandLine - 1));
}

// The watchdog's life: its own session (a terminal's Ctrl-C or a kill of the runner's process
// group must not take it along), no descriptor but its socket end and stdio, then messages
// until the end of the stream.
[[noreturn]] void watch(int fd, char* arg_start, char* arg_end) {
  ::setsid();
  rename(arg_start, arg_end);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);  // the runner's stop sends it to tasks, never to us; EOF ends us
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  if (fd != 3) {
    if (::dup2(fd, 3) != 3) ::_exit(1);
    fd = 3;
  }
  ::close_range(4, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (;;) {
    Message m;
    const ssize_t n = ::recv(fd, &m, sizeof m, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) kill_all();  // 0: the runner's end closed; an error: no runner to serve either
    if (n == static_cast<ssize_t>(sizeof m)) apply(m);
  }
}

}  // namespace

RunnerWatchdog::RunnerWatchdog(std::function<void(const std::string&)> log) : log_(std::move(log)) { spawn(); }

RunnerWatchdog::~RunnerWatchdog() {
  if (pid_ < 0) return;
  send('Q', 0, "");
  ::close(fd_);
  for (int i = 0; i < 200; ++i) {  // it exits at once; a hung one is not worth a hung runner
    const pid_t r = waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) return;
    usleep(5000);
  }
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

void RunnerWatchdog::spawn() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw Unavailable(std::string("cannot create the runner watchdog's socket pair: ") + std::strerror(errno));
  const auto stat = read_proc_stat(::getpid());  // before the fork: the child only copies memory
  char* arg_start = stat ? reinterpret_cast<char*>(stat->arg_start) : nullptr;
  char* arg_end = stat ? reinterpret_cast<char*>(stat->arg_end) : nullptr;
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(sv[0]);  // only the runner holds its end: its death is our end of stream
    watch(sv[1], arg_start, arg_end);
  }
  const int fork_errno = errno;
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    throw Unavailable(std::string("cannot fork the runner watchdog: ") + std::strerror(fork_errno));
  }
  pid_ = pid;
  fd_ = sv[0];
}

bool RunnerWatchdog::send(char op, pid_t pgid, const std::string& cgroup) {
  if (fd_ < 0) return false;
  Message m{};
  m.op = op;
  m.pgid = pgid;
  if (cgroup.size() <= kMaxPath) std::memcpy(m.cgroup, cgroup.c_str(), cgroup.size() + 1);
  ssize_t n;
  do n = ::send(fd_, &m, sizeof m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof m);
}

void RunnerWatchdog::add(const std::string& attempt, pid_t pgid, const std::string& cgroup) {
  if (pgid <= 0) return;
  attempts_[attempt] = {pgid, cgroup};
  if (!send('A', pgid, cgroup)) check();  // a dead watchdog: the new one gets every attempt
}

void RunnerWatchdog::remove(const std::string& attempt) {
  const auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return;
  const pid_t pgid = it->second.pgid;
  attempts_.erase(it);
  send('R', pgid, "");
}

void RunnerWatchdog::check() {
  std::string what;
  if (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return;
    what = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                               : "exited with status " + std::to_string(WEXITSTATUS(status));
    ::close(fd_);
    fd_ = -1;
    pid_ = -1;
  }
  try {
    spawn();
  } catch (const Error& e) {
    log_("warning: the runner watchdog " + (what.empty() ? "is not running" : what) + " and " + e.message() +
         "; tasks would outlive a killed runner until it starts again");
    return;
  }
  for (const auto& [attempt, e] : attempts_) send('A', e.pgid, e.cgroup);
  log_("warning: the runner watchdog " + (what.empty() ? "was not running" : what) + "; started another (pid " +
       std::to_string(pid_) + ") that watches " + std::to_string(attempts_.size()) + " running task(s)");
}

}  // namespace tensorhub
