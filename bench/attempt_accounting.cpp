// The cost of accounting per attempt (issue 25): N no-op tasks (`true`) through a runner with
// RunnerOptions::accounting (ours: a task_attempts row written at the start and completed at the
// end, with the cgroup's or wait4's figures) against the same runner without it (the peer),
// in alternating rounds on fresh hubs of the same backend; prints the median seconds per task
// of each and their ratio. Usage: bench_attempt_accounting [--tasks N] [--rounds R]
// [--postgres ADMIN_URI] (default: SQLite files in a temporary directory).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench_util.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace tensorhub;

// Seconds per task for `tasks` no-op tasks run by one runner on the fresh hub `uri`.
double run_round(const std::string& uri, int tasks, bool accounting) {
  Hub hub(uri, "bench");
  TaskQueue queue(hub);
  TaskSpec spec;
  spec.task_name = "noop";
  spec.command = "true";
  for (int i = 0; i < tasks; ++i) queue.create_task(spec);
  RunnerOptions o;
  o.hub_uri = uri;
  o.project_name = "bench";
  o.task_name = "noop";
  o.exit_when_idle_s = 0;
  o.poll_s = 0.01;
  o.accounting = accounting;
  o.log = [](const std::string&) {};
  const auto t0 = Clock::now();
  Runner runner(o);
  const RunnerStats st = runner.run();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (st.finished != tasks) throw std::runtime_error("only " + std::to_string(st.finished) + " tasks finished");
  if (accounting && queue.find_attempts(queue.find_tasks().front().id).size() != 1)
    throw std::runtime_error("no attempt row was written");
  return s / tasks;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"accounting per attempt: runner with RunnerOptions::accounting vs without"};
  int tasks = 200, rounds = 5;
  std::string postgres;
  app.add_option("--tasks", tasks, "no-op tasks per round")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds of each configuration, alternating")->capture_default_str();
  app.add_option("--postgres", postgres, "a PostgreSQL hub URI to use instead of SQLite files (each round "
                                         "uses its own project)");
  CLI11_PARSE(app, argc, argv);
  const auto dir = std::filesystem::temp_directory_path() / ("bench-accounting-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<double> ours, peer;
  for (int r = 0; r < rounds; ++r) {
    for (const bool accounting : {r % 2 == 0, r % 2 != 0}) {  // alternate which goes first
      std::string uri = "sqlite://" + (dir / ("hub-" + std::to_string(r) + (accounting ? "-a" : "-p") + ".db")).string();
      if (!postgres.empty()) {
        uri = postgres;
        Hub hub(uri, "bench");
        TaskQueue(hub).delete_tasks();  // a fresh queue each round
      }
      (accounting ? ours : peer).push_back(run_round(uri, tasks, accounting));
    }
  }
  std::filesystem::remove_all(dir);
  const double a = bench::median(ours), p = bench::median(peer);
  std::printf("attempt accounting, %d no-op tasks x %d rounds, one runner, %s\n", tasks, rounds,
              postgres.empty() ? "SQLite" : "PostgreSQL");
  std::printf("  ours (accounting on):  %.2f ms per task (median of rounds)\n", a * 1e3);
  std::printf("  peer (accounting off): %.2f ms per task\n", p * 1e3);
  std::printf("  ratio ours/peer: %.3f  (cost of accounting: %.2f ms per attempt)\n", a / p, (a - p) * 1e3);
  return 0;
}
