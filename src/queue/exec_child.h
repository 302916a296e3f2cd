// The last steps of a forked child before exec, shared by the runner's tasks (runner.cpp) and
// its fork server (fork_server.cpp). Async-signal-safe calls only: the parent may have threads.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace tensorhub::detail {

/// In a forked child: stdin from /dev/null, SIGTERM and SIGINT back to their defaults (the
/// runner handles them), then execve(argv[0], argv, envp); exits 127 if the exec fails.
[[noreturn]] inline void exec_child(char* const argv[], char* const envp[]) {
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

}  // namespace tensorhub::detail
