// The command line's start-up: `tensorhub task list` and a task's `tensorhub task report-epoch`
// (what a Python or shell task calls once per epoch) run by `tensorhub`, which links no
// libtorch, against the same commands run by `tensorhub-torch`, the whole command line with
// libtorch, which is what every command loaded before the two were split (src/cli/commands.h).
// Same hub (SQLite, a task running), same commands, alternating runs; per program the median
// wall time and peak resident memory (ru_maxrss of the finished child, wait4) over --runs runs.
//
// Usage: bench_cli_startup [--runs N]. The last line is a JSON summary.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "bench_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace {

using tensorhub::bench::Clock;

struct Run {
  double seconds;
  double max_rss_mb;
};

// Runs argv with `env` added, output to /dev/null; its wall time and peak RSS. Throws when it fails.
Run run_once(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  std::fflush(nullptr);  // or the child's copy of our buffered output is written again
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  const double seconds = tensorhub::bench::seconds_since(t0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(argv[0] + " " + argv[1] + " " + argv[2] + " failed");
  return {seconds, usage.ru_maxrss / 1024.0};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  CLI::App app{"Start-up of `tensorhub` commands without libtorch against tensorhub-torch", "bench_cli_startup"};
  app.add_option("--runs", runs, "runs of each command by each program")->capture_default_str()
      ->check(tensorhub::bench::at_least_one());
  tensorhub::bench::parse_or_exit(app, argc, argv);

  const auto dir = std::filesystem::temp_directory_path() / ("tensorhub-cli-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string uri = "sqlite://" + (dir / "hub.db").string();
  std::int64_t task_id = 0;
  int attempt = 0;
  {
    tensorhub::Hub hub(uri, "bench");
    tensorhub::TaskQueue queue(hub);
    tensorhub::TaskSpec spec;
    spec.task_name = "t";
    spec.command = "true";
    for (int i = 0; i < 20; ++i) queue.create_task(spec);  // a listing of some length
    const auto task = queue.claim("t", "bench", 3600);
    task_id = task->id;
    attempt = task->attempt;
  }
  const std::string bin = TENSORHUB_BIN_DIR;
  const std::map<std::string, std::string> task_env = {{"TENSORHUB_URI", uri},
                                                       {"TENSORHUB_PROJECT", "bench"},
                                                       {"TENSORHUB_TASK_ID", std::to_string(task_id)},
                                                       {"TENSORHUB_ATTEMPT", std::to_string(attempt)}};
  struct Command {
    std::string name;
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
  };
  const std::vector<Command> commands = {
      {"task list", {"task", "list", "--hub", uri, "--project", "bench"}, {}},
      {"task report-epoch", {"task", "report-epoch", "--epoch", "0", "--logs", "{\"loss\": 0.5}"}, task_env},
  };
  nlohmann::json summary = {{"runs", runs}};
  std::printf("command start-up, median of %d runs (SQLite hub, 20 tasks)\n", runs);
  for (const auto& c : commands) {
    std::map<std::string, std::vector<double>> seconds, rss;
    for (int i = 0; i < runs; ++i) {
      for (const std::string program : {"tensorhub", "tensorhub-torch"}) {
        std::vector<std::string> argv_ = {bin + "/" + program};
        argv_.insert(argv_.end(), c.args.begin(), c.args.end());
        const Run r = run_once(argv_, c.env);
        seconds[program].push_back(r.seconds);
        rss[program].push_back(r.max_rss_mb);
      }
    }
    const double ours = tensorhub::bench::median(seconds["tensorhub"]);
    const double torch = tensorhub::bench::median(seconds["tensorhub-torch"]);
    const double ours_mb = tensorhub::bench::median(rss["tensorhub"]);
    const double torch_mb = tensorhub::bench::median(rss["tensorhub-torch"]);
    std::printf("%-18s tensorhub %7.1f ms %6.1f MB   tensorhub-torch %7.1f ms %6.1f MB   time ratio %.3f\n",
                c.name.c_str(), ours * 1e3, ours_mb, torch * 1e3, torch_mb, ours / torch);
    summary[c.name] = {{"tensorhub_ms", ours * 1e3}, {"tensorhub_mb", ours_mb},
                       {"tensorhub_torch_ms", torch * 1e3}, {"tensorhub_torch_mb", torch_mb}};
  }
  std::filesystem::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
