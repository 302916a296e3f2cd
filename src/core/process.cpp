#include "tensorhub/core/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tensorhub/core/error.h"

extern char** environ;

namespace tensorhub {
namespace {

// argv[0] itself when it holds a '/', else the first executable PATH entry of that name
// (argv[0] unchanged when none is: the exec then reports ENOENT).
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return name;
}

// The parent's environment with `overrides` set, as "NAME=value" strings.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (!overrides.contains(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The exit code of a waitpid status: the code, or 128 + the signal that ended the child.
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Runs in the child between fork and exec: async-signal-safe calls only. Writes errno to
// `error_fd` (close-on-exec) when a step fails.
[[noreturn]] void exec_child(const char* program, char* const* argv, char* const* envp, int output_fd,
                             int stderr_fd, const char* cwd, bool own_group, bool terminate_with_parent,
                             pid_t parent, int error_fd) {
  auto fail = [error_fd]() {
    const int err = errno;
    [[maybe_unused]] const auto n = ::write(error_fd, &err, sizeof err);
    ::_exit(127);
  };
  if (own_group && ::setpgid(0, 0) != 0) fail();
  if (terminate_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail();
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the parent ended before prctl
  }
  if (output_fd >= 0 && (::dup2(output_fd, STDOUT_FILENO) < 0 || ::dup2(output_fd, STDERR_FILENO) < 0)) fail();
  if (stderr_fd >= 0 && ::dup2(stderr_fd, STDERR_FILENO) < 0) fail();
  if (cwd && ::chdir(cwd) != 0) fail();
  ::execve(program, argv, envp);
  fail();
}

}  // namespace

Process Process::spawn(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw InvalidArgument("Process::spawn needs a program (argv is empty)");
  const std::string program = resolve_program(argv[0]);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(options.env);
  std::vector<char*> c_args = c_strings(args), c_env = c_strings(env);
  const std::string cwd = options.cwd.string();

  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.append_output ? O_APPEND : O_TRUNC);
  auto open_output = [&](const std::filesystem::path& path, const char* what) {
    if (path.empty()) return -1;
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0)
      throw Unavailable("cannot open " + path.string() + " for the " + what + " of " + argv[0] + ": " +
                        std::strerror(errno));
    return fd;
  };
  const int output_fd = open_output(options.output, "output");
  int stderr_fd = -1;
  try {
    stderr_fd = open_output(options.error_output, "stderr");
  } catch (...) {
    if (output_fd >= 0) ::close(output_fd);
    throw;
  }
  auto close_outputs = [&]() {
    if (output_fd >= 0) ::close(output_fd);
    if (stderr_fd >= 0) ::close(stderr_fd);
  };
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    close_outputs();
    throw Unavailable(std::string("pipe2 failed before starting ") + argv[0] + ": " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    exec_child(program.c_str(), c_args.data(), c_env.data(), output_fd, stderr_fd,
               cwd.empty() ? nullptr : cwd.c_str(), options.own_process_group, options.terminate_with_parent,
               parent, error_pipe[1]);
  const int fork_errno = errno;
  ::close(error_pipe[1]);
  close_outputs();
  if (pid < 0) {
    ::close(error_pipe[0]);
    throw Unavailable(std::string("fork failed for ") + argv[0] + ": " + std::strerror(fork_errno));
  }
  // Also from the parent, so that signal() reaches the group even before the child ran.
  if (options.own_process_group) ::setpgid(pid, pid);
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(error_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(error_pipe[0]);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw NotFound("cannot start " + program + ": " + std::strerror(child_errno) +
                   " (check the path and that it is executable)");
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int err = errno;
    ::kill(options.own_process_group ? -pid : pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw Unavailable(std::string("pidfd_open failed for ") + argv[0] + ": " + std::strerror(err));
  }
  return Process(pid, pidfd, options.own_process_group);
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_), pidfd_(other.pidfd_), own_group_(other.own_group_), exit_code_(other.exit_code_) {
  other.pid_ = -1;
  other.pidfd_ = -1;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    Process discarded(std::move(*this));  // kills and reaps what this held, if it still runs
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
    own_group_ = other.own_group_;
    exit_code_ = other.exit_code_;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !exit_code_) {
    signal(SIGKILL);
    wait();
  }
  close_pidfd();
}

void Process::close_pidfd() noexcept {
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
}

void Process::signal(int sig) const {
  // After the wait the pid may belong to another process: never signal it then.
  if (pid_ <= 0 || exit_code_) return;
  if (own_group_) ::kill(-pid_, sig);
  else ::syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0);
}

std::optional<int> Process::wait_for(std::chrono::milliseconds timeout) {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fd{pidfd_, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    int status = 0;
    pid_t got;
    while ((got = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    exit_code_ = got == pid_ ? exit_code_of(status) : 128 + SIGKILL;  // reaped elsewhere: unknown
    return exit_code_;
  }
}

int Process::wait() {
  while (!wait_for(std::chrono::hours(24))) {
  }
  return *exit_code_;
}

int Process::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (const auto code = wait_for(grace)) return *code;
  signal(SIGKILL);
  return wait();
}

pid_t Process::release() noexcept {
  const pid_t pid = pid_;
  pid_ = -1;
  close_pidfd();
  return pid;
}

std::string shell_quote(const std::string& s) {
  std::string quoted = "'";
  for (const char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Unavailable(std::string("socket() failed looking for a free port: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw Unavailable(std::string("no free port on 127.0.0.1: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace tensorhub
