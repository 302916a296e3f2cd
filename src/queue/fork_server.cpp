// A fork server for task processes (fork_server.h).
#include "tensorhub/queue/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "exec_child.h"
#include "proc_stat.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using nlohmann::json;

constexpr int kServerFd = 3;                        // the socket's number in the server
constexpr std::uint32_t kMaxMessage = 64u << 20;    // a request larger than this is refused

// Writes all of `data`; false on error (EPIPE: the peer is gone).
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes; false at end of stream or on error.
bool read_all(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string length_prefix(std::size_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  return {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff), static_cast<char>((n >> 16) & 0xff),
          static_cast<char>((n >> 24) & 0xff)};
}

std::uint32_t read_length(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<std::uint32_t>(u[3]) << 24);
}

// Sends one message; `fds` ride on its first byte (SCM_RIGHTS).
bool send_message(int fd, const json& message, const std::vector<int>& fds = {}) {
  const std::string body = message.dump();
  const std::string frame = length_prefix(body.size()) + body;
  std::size_t sent = 0;
  if (!fds.empty()) {
    char control[CMSG_SPACE(sizeof(int) * 2)] = {};
    iovec iov{const_cast<char*>(frame.data()), 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    ssize_t n;
    do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != 1) return false;
    sent = 1;
  }
  return write_all(fd, frame.data() + sent, frame.size() - sent);
}

// Receives one message and the descriptors that came with it; nullopt at end of stream.
// Throws InvalidArgument for a message that is not JSON or too large.
std::optional<json> receive_message(int fd, std::vector<int>* fds = nullptr) {
  char head[4];
  char control[CMSG_SPACE(sizeof(int) * 2)] = {};
  iovec iov{head, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fds) fds->push_back(received);
      else ::close(received);
    }
  }
  if (!read_all(fd, head + 1, 3)) return std::nullopt;
  const std::uint32_t size = read_length(head);
  if (size > kMaxMessage) throw InvalidArgument("fork server message of " + std::to_string(size) + " bytes");
  std::string body(size, '\0');
  if (!read_all(fd, body.data(), size)) return std::nullopt;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InvalidArgument("fork server message is not a JSON object");
  return j;
}

// Threads of this process (/proc/self/status), or -1 if unknown.
int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("Threads:")) return std::atoi(line.c_str() + 8);
  return -1;
}

// Waits up to `timeout_s` for `fd` to be readable; false on timeout.
bool wait_readable(int fd, double timeout_s) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
  while (r < 0 && errno == EINTR);
  return r > 0;
}

// --- the server's side ---

// Writes `args` over this process's command line (the memory /proc/PID/cmdline shows, between
// arg_start and arg_end of /proc/self/stat, fields 48-49 of proc(5)), cut to its length, so
// `ps` and the runner's task scans show a forked task as what it runs ("<dir>/tensorhub-torch train-spec"),
// not as the server it was forked from.
void set_command_line(const std::vector<std::string>& args) {
  const auto stat = read_proc_stat(::getpid());
  if (!stat) return;
  const unsigned long long start = stat->arg_start, end = stat->arg_end;
  if (start == 0 || end <= start + 1) return;
  std::string line;
  for (const auto& a : args) line += a + '\0';
  const std::size_t size = end - start;
  line.resize(size, '\0');
  line[size - 1] = '\0';
  std::memcpy(reinterpret_cast<char*>(start), line.data(), size);
}

struct Request {
  std::vector<std::string> args, env;
  pid_t reaper = -1;
  int output_fd = -1, cgroup_fd = -1;
};

// The forked task: becomes the request's process and never returns.
[[noreturn]] void become_task(const Request& r, int go_fd,
                              const std::function<int(const std::vector<std::string>&)>& entry) {
  if (r.cgroup_fd >= 0 && ::write(r.cgroup_fd, "0", 1) != 1) _exit(126);  // join the attempt's cgroup first
  setpgid(0, 0);  // own process group, so a kill reaches the task's children too
  // Wait until the intermediate has exited and we are the runner's child, then die with it.
  char go = 0;
  ssize_t n;
  do n = ::read(go_fd, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) _exit(125);  // the server gave up on us
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != r.reaper) _exit(125);  // the runner died in between
  dup2(r.output_fd, STDOUT_FILENO);
  dup2(r.output_fd, STDERR_FILENO);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  ::close_range(3, ~0U, 0);  // the server's socket, the request's descriptors, the pipes
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  set_command_line(r.args);
  clearenv();
  for (const auto& kv : r.env) putenv(strdup(kv.c_str()));  // the environment owns its strings
  int code = 1;
  try {
    code = entry(r.args);
  } catch (const std::exception& e) {
    std::cerr << "tensorhub: unexpected error: " << e.what() << std::endl;
  } catch (...) {
    std::cerr << "tensorhub: unexpected error" << std::endl;
  }
  // Flush what the task wrote, then _exit: exit() would also destroy the task's copy of every
  // static object of the server, and libtorch's destructors deregister each of its operators
  // (about 0.1 s per task, spent writing to copy-on-write pages for nothing).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

// Forks the task through an intermediate that exits at once, so the task is re-parented to
// the runner (a child subreaper). Returns the task's pid; throws Unavailable.
pid_t fork_task(const Request& r, const std::function<int(const std::vector<std::string>&)>& entry) {
  int go[2], report[2];
  if (::pipe(go) != 0) throw Unavailable(std::string("pipe: ") + std::strerror(errno));
  if (::pipe(report) != 0) {
    ::close(go[0]), ::close(go[1]);
    throw Unavailable(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t mid = fork();
  if (mid == 0) {
    ::close(go[1]);
    ::close(report[0]);
    const pid_t task = fork();
    if (task == 0) {
      ::close(report[1]);
      become_task(r, go[0], entry);
    }
    const int answer[2] = {task, task < 0 ? errno : 0};
    (void)!::write(report[1], answer, sizeof answer);
    _exit(0);
  }
  const int fork_errno = errno;
  ::close(go[0]);
  ::close(report[1]);
  int answer[2] = {-1, fork_errno};
  if (mid > 0) {
    while (waitpid(mid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (::read(report[0], answer, sizeof answer) != static_cast<ssize_t>(sizeof answer)) answer[0] = -1;
  }
  ::close(report[0]);
  const pid_t task = answer[0];
  if (task <= 0) {
    ::close(go[1]);
    throw Unavailable(std::string("fork failed: ") + std::strerror(answer[1]));
  }
  // The intermediate is reaped, so the task has its new parent: check it is the runner.
  const auto st = read_proc_stat(task);
  if (!st || st->ppid != r.reaper) {
    ::kill(task, SIGKILL);
    ::close(go[1]);
    throw Unavailable("the forked task's parent is not the runner (pid " + std::to_string(r.reaper) +
                      "), which must be a child subreaper (PR_SET_CHILD_SUBREAPER)");
  }
  (void)!::write(go[1], "g", 1);
  ::close(go[1]);
  return task;
}

Request parse_request(const json& j, const std::vector<int>& fds) {
  Request r;
  r.args = j.at("args").get<std::vector<std::string>>();
  r.env = j.at("env").get<std::vector<std::string>>();
  r.reaper = j.at("reaper").get<pid_t>();
  const bool cgroup = j.value("cgroup", false);
  if (r.args.empty()) throw InvalidArgument("a fork request without args");
  if (fds.size() != (cgroup ? 2u : 1u)) throw InvalidArgument("a fork request with " + std::to_string(fds.size()) + " descriptors");
  r.output_fd = fds[0];
  if (cgroup) r.cgroup_fd = fds[1];
  return r;
}

}  // namespace

int serve_fork_requests(int fd, const std::function<int(const std::vector<std::string>& args)>& entry) {
  if (const int threads = thread_count(); threads != 1) {
    const std::string why = "the fork server has " + std::to_string(threads) + " threads; it forks only with one";
    std::cerr << "tensorhub: " << why << std::endl;
    send_message(fd, {{"error", why}});
    return 1;
  }
  signal(SIGINT, SIG_IGN);  // a terminal's Ctrl-C is the runner's to handle; the socket's end stops us
  if (!send_message(fd, {{"ready", true}})) return 0;
  for (;;) {
    std::vector<int> fds;
    json answer;
    try {
      const auto message = receive_message(fd, &fds);
      if (!message) return 0;  // the runner closed the socket
      answer = {{"pid", fork_task(parse_request(*message, fds), entry)}};
    } catch (const Error& e) {
      answer = {{"error", e.message()}};
    } catch (const json::exception& e) {
      answer = {{"error", std::string("a malformed fork request: ") + e.what()}};
    }
    for (const int f : fds) ::close(f);
    if (!send_message(fd, answer)) return 0;
  }
}

std::unique_ptr<ForkServer> ForkServer::start(const std::vector<std::string>& command,
                                              const std::vector<std::string>& env, double timeout_s) {
  if (command.empty()) throw InvalidArgument("a fork server needs a command");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw Unavailable(std::string("socketpair: ") + std::strerror(errno));
  std::vector<std::string> args = command, vars = env;
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : vars) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the runner
    // dup2 clears FD_CLOEXEC on the copy; a socket that is already fd 3 keeps it: clear it.
    if (sv[1] == kServerFd ? ::fcntl(kServerFd, F_SETFD, 0) != 0 : dup2(sv[1], kServerFd) != kServerFd) _exit(127);
    detail::exec_child(argv.data(), envp.data());
  }
  const int fork_errno = errno;
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    throw Unavailable(std::string("fork failed: ") + std::strerror(fork_errno));
  }
  std::unique_ptr<ForkServer> server(new ForkServer(pid, sv[0]));
  std::optional<json> hello;
  try {
    if (wait_readable(sv[0], timeout_s)) hello = receive_message(sv[0]);
  } catch (const Error&) {
  }
  if (!hello || !hello->value("ready", false)) {
    const std::string why = hello ? hello->value("error", std::string("no greeting")) : "it exited or did not answer in time";
    throw Unavailable("the fork server " + command[0] + " did not start: " + why);  // ~ForkServer reaps it
  }
  return server;
}

std::optional<int> ForkServer::poll_exit() {
  if (!exit_status_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) exit_status_ = status;
  }
  return exit_status_;
}

ForkServer::~ForkServer() {
  ::close(fd_);
  if (exit_status_) return;  // reaped: its pid may be another process's by now
  // The server exits on the socket's end; a server that hangs is not worth a hung runner.
  for (int i = 0; i < 100; ++i) {
    const pid_t r = waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) return;
    usleep(10000);
  }
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

pid_t ForkServer::spawn(const ForkRequest& request) {
  if (request.output_fd < 0) throw InvalidArgument("a fork request needs an output descriptor");
  const json message = {{"args", request.args},
                        {"env", request.env},
                        {"reaper", ::getpid()},
                        {"cgroup", request.cgroup_procs_fd >= 0}};
  std::vector<int> fds = {request.output_fd};
  if (request.cgroup_procs_fd >= 0) fds.push_back(request.cgroup_procs_fd);
  if (!send_message(fd_, message, fds)) throw Unavailable("the fork server (pid " + std::to_string(pid_) + ") is gone");
  std::optional<json> answer;
  try {
    answer = receive_message(fd_);
  } catch (const Error& e) {
    throw Unavailable("the fork server answered nonsense: " + e.message());
  }
  if (!answer) throw Unavailable("the fork server (pid " + std::to_string(pid_) + ") is gone");
  if (answer->contains("error")) throw Unavailable("the fork server could not start the task: " + answer->value("error", ""));
  const pid_t pid = answer->value("pid", -1);
  if (pid <= 0) throw Unavailable("the fork server answered without a pid");
  setpgid(pid, pid);  // also from here, so it holds before we might signal the group
  return pid;
}

}  // namespace tensorhub
