// The fork server of the fork server tests (process_fork_server_test.cpp): a small program
// whose entry functions show what a forked task sees.
//   fork_server_child serve              serve fork requests on fd 3 (queue/fork_server.h)
//   fork_server_child serve-threaded     the same after starting a thread: must refuse
//   fork_server_child hold DIR           a subreaper that starts a fork server of this program,
//                                        forks `sleep` through it, writes the task's pid to
//                                        DIR/task.pid and waits to be killed
// Entry functions (argv[1] of a fork request; also runnable directly, as an executed task):
//   show              prints "pid P ppid Q pgid G FOO=<$FOO> forked=<0|1>", exits 0
//   exit N            exits with N
//   throw             throws std::runtime_error("thrown by the task")
//   sleep             sleeps until killed
//   spec              writes {"forked": <bool>, "pid": P} to $TENSORHUB_RESULT_FILE (a runner's
//                     spec task), exits 0
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/queue/fork_server.h"

namespace {

bool g_forked = false;  // set in the fork server's tasks only

int entry(const std::vector<std::string>& args) {
  const std::string what = args.size() > 1 ? args[1] : "";
  if (what == "show") {
    const char* foo = std::getenv("FOO");
    std::printf("pid %d ppid %d pgid %d FOO=%s forked=%d\n", getpid(), getppid(), getpgid(0), foo ? foo : "(unset)",
                g_forked ? 1 : 0);
    return 0;
  }
  if (what == "exit" && args.size() > 2) return std::atoi(args[2].c_str());
  if (what == "throw") throw std::runtime_error("thrown by the task");
  if (what == "sleep") {
    for (;;) pause();
  }
  if (what == "spec") {
    const char* result = std::getenv("TENSORHUB_RESULT_FILE");
    if (!result) return 3;
    std::ofstream(result) << "{\"forked\": " << (g_forked ? "true" : "false") << ", \"pid\": " << getpid() << "}";
    return 0;
  }
  std::fprintf(stderr, "fork_server_child: unknown entry %s\n", what.c_str());
  return 2;
}

int serve() {
  return tensorhub::serve_fork_requests(3, [](const std::vector<std::string>& args) {
    g_forked = true;
    return entry(args);
  });
}

int hold(const char* self, const std::filesystem::path& dir) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  auto server = tensorhub::ForkServer::start({self, "serve"}, env);
  std::FILE* out = std::fopen((dir / "task.log").c_str(), "w");
  const pid_t task = server->spawn({{self, "sleep"}, env, fileno(out), -1});
  std::ofstream((dir / "task.pid.tmp")) << task;
  std::filesystem::rename(dir / "task.pid.tmp", dir / "task.pid");
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve") return serve();
  if (mode == "serve-threaded") {
    std::thread([] { std::this_thread::sleep_for(std::chrono::hours(1)); }).detach();
    return serve();
  }
  if (mode == "hold" && argc > 2) return hold(argv[0], argv[2]);
  return entry(std::vector<std::string>(argv, argv + argc));
}
