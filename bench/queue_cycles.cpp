// Queue throughput on SQLite: create -> claim -> complete cycles per second.
//
// Two measurements, both with W workers (default 2) on one fresh SQLite hub file:
//  1. "api": W processes, each looping create_task -> claim -> complete through the
//     TaskQueue API: the queue's bookkeeping cost. The peer runs the same shape in the same
//     run: Optuna's ask -> tell with W processes on an RDBStorage in SQLite
//     (shared/peers/optuna_pg.py, Debian python3-optuna), and the ratio ours / optuna is printed.
//  2. "runners": N no-op tasks (`true`) created up front, then W `tensorhub runner` processes
//     run them to completion: the end-to-end rate including fork/exec of every task.
//
// Usage: bench_queue_cycles [--cycles N] [--workers W] [--peer SCRIPT] [--python PATH] [--no-peer]
// The last line is a JSON summary.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace {

using Clock = std::chrono::steady_clock;
using tensorhub::Hub;
using tensorhub::TaskQueue;
using tensorhub::TaskSpec;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tensorhub-bench-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// W forked workers, each running `per` create -> claim -> complete cycles.
double api_cycles_per_s(const std::string& uri, int workers, int per) {
  { Hub init(uri, "bench"); }  // create the schema before the workers race for it
  const auto start = Clock::now();
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        Hub hub(uri, "bench");
        TaskQueue queue(hub);
        TaskSpec spec;
        spec.task_name = "noop";
        spec.command = "true";
        spec.saved_result_keys = {"value"};
        const std::string owner = "worker-" + std::to_string(w);
        for (int i = 0; i < per; ++i) {
          queue.create_task(spec);
          auto task = queue.claim("noop", owner, 30);
          if (!task || !queue.complete(*task, {{"value", i}})) _exit(2);
        }
      } catch (const std::exception& e) {
        std::cerr << e.what() << std::endl;
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a worker failed");
  }
  return workers * per / since(start);
}

// N no-op tasks run by W real runner processes.
double runner_cycles_per_s(const std::string& tensorhub, const std::string& uri, int workers, int n) {
  Hub hub(uri, "bench-runners");
  TaskQueue queue(hub);
  TaskSpec spec;
  spec.task_name = "noop";
  spec.command = "true";
  for (int i = 0; i < n; ++i) queue.create_task(spec);
  const auto start = Clock::now();
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      freopen("/dev/null", "w", stderr);
      execl(tensorhub.c_str(), tensorhub.c_str(), "runner", "--hub", uri.c_str(), "--project", "bench-runners",
            "--task-name", "noop", "--exit-when-idle", "0", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  const double seconds = since(start);
  const auto counts = queue.count_tasks();
  if (counts.finished != n) throw std::runtime_error("runners finished " + std::to_string(counts.finished) + " of " + std::to_string(n));
  return n / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int cycles = 2000, workers = 2;
  bool run_peer = true;
  std::string peer = std::string(TENSORHUB_SOURCE_DIR) + "/../shared/peers/optuna_pg.py";
  std::string python = "/usr/bin/python3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--cycles") cycles = std::stoi(value());
    else if (a == "--workers") workers = std::stoi(value());
    else if (a == "--peer") peer = value();
    else if (a == "--python") python = value();
    else if (a == "--no-peer") run_peer = false;
    else {
      std::cerr << "usage: bench_queue_cycles [--cycles N] [--workers W] [--peer SCRIPT] [--python PATH] [--no-peer]\n";
      return 2;
    }
  }
  const std::string dir = temp_dir();
  const std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
  nlohmann::json summary = {{"workers", workers}, {"cycles", cycles}};

  const double api = api_cycles_per_s("sqlite://" + dir + "/api.db", workers, cycles / workers);
  std::printf("ours  api      (create -> claim -> complete, %d processes): %8.0f cycles/s\n", workers, api);
  summary["ours_api_cycles_per_s"] = api;

  const double runners = runner_cycles_per_s(tensorhub, "sqlite://" + dir + "/runners.db", workers, cycles / 4);
  std::printf("ours  runners  (%d no-op tasks, fork/exec each, %d runners): %8.0f tasks/s\n", cycles / 4,
              workers, runners);
  summary["ours_runner_tasks_per_s"] = runners;

  if (run_peer) {
    const std::string cmd = python + " " + peer + " --url sqlite:///" + dir + "/optuna.db --workers " +
                            std::to_string(workers) + " --trials " + std::to_string(cycles / 4);
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (pipe && fgets(buf, sizeof buf, pipe)) out = buf;  // keep the last line
    if (!pipe || pclose(pipe) != 0) {
      std::cerr << "peer failed: " << cmd << "\n";
      return 1;
    }
    const auto j = nlohmann::json::parse(out);
    const double optuna = j.at("cycles_per_s").get<double>();
    std::printf("optuna ask -> tell (RDBStorage on SQLite, %d processes): %8.1f cycles/s\n", workers, optuna);
    std::printf("ratio ours api / optuna: %.1fx\n", api / optuna);
    summary["optuna_cycles_per_s"] = optuna;
    summary["optuna_version"] = j.value("version", "");
    summary["ratio_api_over_optuna"] = api / optuna;
  }
  std::filesystem::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
