// tensorhub slurm submit | scale | status: runners as the elements of Slurm job arrays
// (queue/slurm.h has the batch script, sbatch and squeue).
#include <csignal>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "commands.h"
#include "table.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/queue/slurm.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

// What submit and scale share: the hub, the job's shape and the runners' flags.
struct SlurmArgs {
  HubFlags hub;
  SlurmJobOptions job;
  std::string output_dir = "tensorhub-slurm";
  std::string program;
  bool dry_run = false;
  // scale
  int max_runners = 0;
  double interval_s = 10;
  bool once = false;
  // status
  bool json = false;
};

std::atomic<bool> g_stop{false};
extern "C" void on_scale_stop_signal(int) { g_stop.store(true); }

// --hub as every node can reach it: a relative SQLite path is made absolute (with a warning,
// since the runners do not start in this directory); any SQLite hub gets a note that other
// nodes need a shared file system.
std::string hub_for_nodes(const HubFlags& hub) {
  check_hub_options(hub);
  if (!hub.hub.starts_with("sqlite://")) return hub.hub;
  const std::string path = sqlite_path_of_uri(hub.hub);
  std::string uri = hub.hub;
  if (!hub.hub.starts_with("sqlite:///")) {
    uri = "sqlite://" + percent_encode_path(path);
    std::cerr << "tensorhub: warning: --hub " << hub.hub << " is a relative SQLite path; the runners use " << uri
              << std::endl;
  }
  std::cerr << "tensorhub: note: runners on other nodes reach a SQLite hub only through a shared file system at "
            << path << "; a PostgreSQL hub (postgresql://...) is the one for a cluster" << std::endl;
  return uri;
}

// Fills args->job with what the flags leave to this program: hub, project, program, output dir.
void complete_job(SlurmArgs& args) {
  args.job.hub_uri = hub_for_nodes(args.hub);
  args.job.project = args.hub.project;
  args.job.program = args.program.empty() ? executable_dir() + "/tensorhub" : args.program;
  // std::filesystem::absolute("") throws filesystem_error, which would reach the user as an
  // "unexpected error" with exit status 1 instead of a usage error.
  if (args.output_dir.empty())
    throw UsageError("--output-dir must not be empty: the batch script and each runner's output go there (default "
                     "./tensorhub-slurm)");
  args.job.output_dir = std::filesystem::absolute(args.output_dir).lexically_normal();
  try {
    args.job.validate();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw UsageError(e.message());
  }
}

// The batch script's file: <output dir>/<job name>-<UTC time>.sbatch, kept beside the outputs.
std::filesystem::path script_path(const SlurmJobOptions& job) {
  std::string stamp = format_time(now_micros());
  for (char& c : stamp)
    if (c == ':') c = '-';
  return job.output_dir / (job.job_name + "-" + stamp + ".sbatch");
}

// Submits `job` (after complete_job); returns the job id. Makes the output directory first.
std::string submit_job(const SlurmJobOptions& job) {
  std::error_code ec;
  std::filesystem::create_directories(job.output_dir, ec);
  if (ec) throw Unavailable("cannot create --output-dir " + job.output_dir.string() + ": " + ec.message());
  return slurm_submit(slurm_batch_script(job), script_path(job));
}

void add_job_options(CLI::App& cmd, SlurmArgs& args) {
  add_hub_options(cmd, args.hub);
  cmd.add_option("--partition", args.job.partition, "Slurm partition (sbatch --partition); default: the cluster's");
  cmd.add_option("--gres", args.job.gres, "generic resources per runner, e.g. gpu:1 (sbatch --gres)");
  cmd.add_option("--cpus-per-task", args.job.cpus_per_task,
                 "cores per runner (sbatch --cpus-per-task); the runner gives its tasks these")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--mem", args.job.mem, "memory per runner as Slurm reads it, e.g. 8G or 512M (sbatch --mem)");
  cmd.add_option("--time", args.job.time,
                 "time limit per runner as Slurm reads it: minutes, H:MM:SS or D-HH (sbatch --time)");
  cmd.add_option("--grace", args.job.grace_s,
                 "seconds before the time limit at which Slurm sends the runner SIGTERM (sbatch --signal=B:TERM@S): "
                 "it releases its tasks to other runners, without counting a failure")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd.add_option("--job-name", args.job.job_name, "the jobs' name; scale and status find our runners by it")
      ->capture_default_str();
  cmd.add_option("--exit-when-idle", args.job.exit_when_idle_s,
                 "each runner exits (its element ends) after this many seconds without a task")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  cmd.add_flag("--requeue", args.job.requeue,
               "let Slurm requeue an element that is preempted or whose node fails (sbatch --requeue)");
  cmd.add_option("--output-dir", args.output_dir,
                 "directory for the batch script and each runner's output (<job-name>-<job>_<index>.out); "
                 "every node must write it")
      ->capture_default_str();
  cmd.add_option("--program", args.program,
                 "path of tensorhub on the nodes (default: this program's path, so it must be installed there too)");
  cmd.add_option("runner_flags", args.job.runner_flags,
                 "after --: flags for each `tensorhub runner`, e.g. -- --task-name train --slots 2");
}

// The runner flag --task-name's value in `flags` ("" when absent): the tasks scale counts.
std::string runner_task_name(const std::vector<std::string>& flags) {
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == "--task-name" && i + 1 < flags.size()) return flags[i + 1];
    if (flags[i].starts_with("--task-name=")) return flags[i].substr(12);
  }
  return "";
}

void add_submit(CLI::App& slurm, const std::shared_ptr<SlurmArgs>& args) {
  auto* cmd = slurm.add_subcommand(
      "submit",
      "submit a Slurm job array whose elements are runners (sbatch --array); prints the job id. "
      "Usage: tensorhub slurm submit --runners N [flags] -- [runner flags]");
  cmd->add_option("--runners", args->job.runners, "runners to start: the array's elements")->required()
      ->check(CLI::Range(1, 100000));
  add_job_options(*cmd, *args);
  cmd->add_flag("--dry-run", args->dry_run, "print the batch script and submit nothing");
  cmd->callback([args]() {
    complete_job(*args);
    if (args->dry_run) {
      // The script as it would be submitted, with the hub's password masked on the terminal:
      // masked in the URI itself, since a password with a space or a quote is split by the
      // script's quoting where a mask of the whole text would no longer find all of it.
      SlurmJobOptions shown = args->job;
      shown.hub_uri = mask_uri_password(shown.hub_uri);
      std::cout << mask_passwords(slurm_batch_script(shown));
      return;
    }
    const std::string id = submit_job(args->job);
    std::cerr << "submitted " << args->job.runners << " runner(s) as Slurm job array " << id << " (outputs in "
              << args->job.output_dir.string() << ")" << std::endl;
    std::cout << id << std::endl;
  });
}

// What one runner of the submitted shape has (slurm_runner_capacity); a bad --mem is a usage error.
TaskResources runner_capacity(const SlurmJobOptions& job) {
  try {
    return slurm_runner_capacity(job);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw UsageError(e.message());
  }
}

// One round of scale: count, decide, submit. Returns the decision's reason line.
std::string scale_round(TaskQueue& queue, const SlurmArgs& args) {
  const std::string task_name = runner_task_name(args.job.runner_flags);
  Json filter = Json::object();
  if (!task_name.empty()) filter["task_name"] = task_name;
  TaskCounts counts = queue.count_tasks(filter);
  // Only the pending tasks a runner of this shape could take call for one.
  const std::int64_t all_pending = counts.pending;
  counts.pending = queue.count_pending_that_fit(runner_capacity(args.job), task_name);
  std::int64_t queued = 0, running = 0;
  for (const SlurmJob& job : slurm_list_jobs(args.job.job_name)) {
    if (job.pending()) ++queued;
    else if (job.running()) ++running;
  }
  const SlurmScaleDecision d = decide_slurm_scale(counts.pending, counts.running, queued, running, args.max_runners,
                                                  std::max<std::int64_t>(0, all_pending - counts.pending));
  std::string line = d.reason;
  if (d.submit > 0) {
    SlurmJobOptions job = args.job;
    job.runners = d.submit;
    line += ": job " + submit_job(job);
  }
  return line;
}

void add_scale(CLI::App& slurm, const std::shared_ptr<SlurmArgs>& args) {
  auto* cmd = slurm.add_subcommand(
      "scale",
      "keep the queued and running runner jobs in step with the pending tasks: submit runners while work waits, "
      "none once the queue drains; prints each decision. Ctrl-C stops it and leaves the runners to finish.");
  cmd->add_option("--max-runners", args->max_runners, "at most this many runner jobs queued and running at once")
      ->required()->check(CLI::Range(1, 100000));
  cmd->add_option("--interval", args->interval_s,
                  "seconds between rounds (sooner when the hub announces a change, on PostgreSQL)")
      ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  cmd->add_flag("--once", args->once, "decide and submit once, then exit");
  add_job_options(*cmd, *args);
  cmd->callback([args]() {
    complete_job(*args);
    Hub hub = open_hub(args->hub, OpenMode::kExisting);
    TaskQueue queue(hub);
    std::signal(SIGINT, on_scale_stop_signal);
    std::signal(SIGTERM, on_scale_stop_signal);
    std::string last;
    while (!g_stop.load()) {
      const std::string line = scale_round(queue, *args);
      // A decision is printed when it differs from the last one (or submits), not every round.
      if (line != last) std::cout << "scale: " << line << std::endl;
      last = line;
      if (args->once) break;
      // Sleep until the interval passes or Ctrl-C; on PostgreSQL a queue change cuts it short
      // (after at least a second, so a busy queue does not make squeue calls back to back).
      const auto start = std::chrono::steady_clock::now();
      const auto elapsed = [&]() {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      bool changed = false;
      while (!g_stop.load() && elapsed() < args->interval_s && !(changed && elapsed() >= 1.0))
        changed = queue.wait_for_change(std::min(0.5, args->interval_s - elapsed())) || changed;
    }
    if (g_stop.load()) std::cout << "scale: stopped; submitted runners keep running until the queue is idle" << std::endl;
  });
}

}  // namespace

void add_slurm_command(CLI::App& app) {
  auto args = std::make_shared<SlurmArgs>();
  auto* slurm = app.add_subcommand(
      "slurm", "run runners on a Slurm cluster: submit job arrays of runners, scale them with the queue, list them");
  slurm->require_subcommand(1);
  add_submit(*slurm, args);
  add_scale(*slurm, args);
  add_slurm_status_command(*slurm);
}

}  // namespace tensorhub
