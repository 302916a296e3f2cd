// Tasks per second through runners that Slurm starts (`tensorhub slurm submit --runners R`, a
// job array) against the same number of runners started by hand (`tensorhub runner`), on N
// no-op tasks (`true`), same hub, same run, alternating, median of --rounds. Each measurement
// runs from the submit (or the first spawn) until the last task is finished, so the Slurm side
// includes what a user waits for: sbatch, scheduling and each element's start.
//
// Needs a Slurm cluster: SLURM_CONF as scripts/slurm-cluster exports it, or, when unset, one
// started here with scripts/slurm-cluster and stopped at the end.
//
//   build/bin/bench_slurm_runners [--tasks 300] [--runners 3] [--rounds 3] [--hub URI]
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_util.h"
#include "tensorhub/queue/slurm.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/uri.h"

namespace tensorhub::bench {
namespace {

const std::string kTensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
// The same runner flags on both sides: no fork server (no spec tasks), quick idle exit.
const std::vector<std::string> kRunnerFlags = {"--no-fork-server", "--poll", "0.05"};

struct Options {
  int tasks = 300;
  int runners = 3;
  int rounds = 3;
  std::string hub;
};

// The cluster: SLURM_CONF, or one started here (stopped by the destructor).
struct Cluster {
  std::string dir;
  Cluster() {
    if (const char* c = std::getenv("SLURM_CONF"); c && *c) return;
    const std::filesystem::path out = std::filesystem::temp_directory_path() / "bench-slurm-cluster.env";
    ProcessOptions options;
    options.output = out;
    options.append_output = false;
    Process s = Process::spawn({std::string(TENSORHUB_SOURCE_DIR) + "/scripts/slurm-cluster", "start"}, options);
    if (s.wait() != 0) throw std::runtime_error("scripts/slurm-cluster start failed; is Slurm installed?");
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("export ")) continue;
      const auto eq = line.find('=');
      const std::string name = line.substr(7, eq - 7), value = line.substr(eq + 1);
      ::setenv(name.c_str(), value.c_str(), 1);
      if (name == "TENSORHUB_SLURM_DIR") dir = value;
    }
  }
  ~Cluster() {
    if (!dir.empty()) Process::spawn({std::string(TENSORHUB_SOURCE_DIR) + "/scripts/slurm-cluster", "stop", dir}).wait();
  }
};

void create_noop_tasks(TaskQueue& queue, int n) {
  for (int i = 0; i < n; ++i) {
    TaskSpec s;
    s.task_name = "noop";
    s.command = "true";
    queue.create_task(s);
  }
}

void wait_finished(TaskQueue& queue, int n) {
  while (queue.count_tasks().finished < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// Seconds for `o.runners` runners that Slurm starts to finish `o.tasks` no-op tasks of `project`.
double through_slurm(const Options& o, const std::string& project, const std::filesystem::path& out_dir) {
  Hub hub(o.hub, project);
  TaskQueue queue(hub);
  create_noop_tasks(queue, o.tasks);
  const std::string job_name = "bench-" + project;
  std::vector<std::string> argv = {kTensorhub, "slurm", "submit", "--runners", std::to_string(o.runners), "--hub",
                                   o.hub, "--project", project, "--job-name", job_name, "--output-dir",
                                   out_dir.string(), "--exit-when-idle", "1", "--mem", "200M", "--"};
  argv.insert(argv.end(), kRunnerFlags.begin(), kRunnerFlags.end());
  const auto t0 = Clock::now();
  const SlurmCommandResult submit = run_slurm_command(argv);
  if (submit.exit_code != 0) throw std::runtime_error("slurm submit failed: " + submit.err);
  wait_finished(queue, o.tasks);
  const double s = seconds_since(t0);
  // The next measurement starts on a machine without these runners.
  while (!slurm_list_jobs(job_name).empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return s;
}

// Seconds for `o.runners` runners started here to finish `o.tasks` no-op tasks of `project`.
double by_hand(const Options& o, const std::string& project, const std::filesystem::path& log) {
  Hub hub(o.hub, project);
  TaskQueue queue(hub);
  create_noop_tasks(queue, o.tasks);
  std::vector<Process> runners;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.runners; ++i) {
    std::vector<std::string> argv = {kTensorhub, "runner", "--hub", o.hub, "--project", project, "--exit-when-idle", "1"};
    argv.insert(argv.end(), kRunnerFlags.begin(), kRunnerFlags.end());
    runners.push_back(start(argv, log));
  }
  wait_finished(queue, o.tasks);
  const double s = seconds_since(t0);
  for (auto& r : runners) r.wait();
  return s;
}

}  // namespace
}  // namespace tensorhub::bench

int main(int argc, char** argv) {
  using namespace tensorhub;
  using namespace tensorhub::bench;
  Options o;
  CLI::App app{"tasks per second through Slurm-launched runners against runners started by hand"};
  app.add_option("--tasks", o.tasks, "no-op tasks per measurement")->capture_default_str()->check(at_least_one());
  app.add_option("--runners", o.runners, "runners on each side (Slurm: the array's elements)")
      ->capture_default_str()->check(at_least_one());
  app.add_option("--rounds", o.rounds, "measurements per side (median reported)")->capture_default_str()
      ->check(at_least_one());
  app.add_option("--hub", o.hub, "hub URI (default: a SQLite file in a temporary directory)");
  parse_or_exit(app, argc, argv);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("bench-slurm-runners-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  if (o.hub.empty()) o.hub = "sqlite://" + (dir / "hub.db").string();
  Cluster cluster;
  std::vector<double> slurm_s, hand_s;
  for (int round = 0; round < o.rounds; ++round) {
    const std::string suffix = std::to_string(::getpid()) + "-" + std::to_string(round);
    slurm_s.push_back(through_slurm(o, "slurm-" + suffix, dir / "out"));
    hand_s.push_back(by_hand(o, "hand-" + suffix, dir / "hand-runners.log"));
    std::printf("round %d: slurm %.2f s, by hand %.2f s\n", round + 1, slurm_s.back(), hand_s.back());
  }
  const double slurm_tps = o.tasks / median(slurm_s), hand_tps = o.tasks / median(hand_s);
  std::printf("%d no-op tasks, %d runners, hub %s\n", o.tasks, o.runners, mask_passwords(o.hub).c_str());
  std::printf("slurm array (submit to last task): %8.1f tasks/s (median %.2f s)\n", slurm_tps, median(slurm_s));
  std::printf("runners by hand (spawn to last):   %8.1f tasks/s (median %.2f s)\n", hand_tps, median(hand_s));
  print_ratio("slurm/hand tasks per second", slurm_tps / hand_tps);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
