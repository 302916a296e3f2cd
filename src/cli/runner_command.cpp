// tensorhub runner: claims and runs tasks until stopped (SIGTERM/SIGINT) or idle.
#include <unistd.h>

#include <limits>
#include <csignal>
#include <iostream>
#include <memory>

#include "commands.h"
#include "logging.h"
#include "resource_flags.h"
#include "tensorhub/queue/runner.h"

namespace tensorhub {
namespace {

// `tensorhub runner --help`'s description.
constexpr const char* kHelp =
    "claim tasks from the queue and run each as a child process; several runners, here or on other "
    "machines sharing the hub, share the queue. SIGTERM: stop, releasing running tasks.";

std::atomic<Runner*> g_runner{nullptr};
// A stop signal that came while the Runner was being built (its start-up scan of dead
// runners' cgroups takes a moment): the runner stops as soon as it exists.
std::atomic<bool> g_stop_requested{false};

extern "C" void on_runner_stop_signal(int) {
  // Flag first, then the runner: with the callback's store-then-check below, one of the two
  // sides always sees the other (both seq_cst), so no stop is lost.
  g_stop_requested.store(true);
  if (Runner* r = g_runner.load()) r->request_stop();
}

struct RunnerArgs {
  HubFlags hub;
  RunnerOptions options;
  bool oldest_first = false;
  bool no_fork_server = false;
  ResourceFlags resources;  // --cpus, --memory, --gpus
  std::string log_level = "info";
};

}  // namespace

void add_runner_command(CLI::App& app) {
  auto args = std::make_shared<RunnerArgs>();
  auto* cmd = app.add_subcommand("runner", kHelp);
  add_hub_options(*cmd, args->hub);
  cmd->add_option("--task-name", args->options.task_name, "claim only tasks with this task_name (default: any)");
  cmd->add_option("--slots", args->options.slots, "tasks to run at once")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--threads", args->options.threads_per_task,
                  "intra-op threads per task (OMP_NUM_THREADS) that asks for no --cpus; 0: the runner's cpus / slots")->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--lease", args->options.lease_s,
                  "lease seconds; a runner that stops heartbeating loses its task after this")
      ->capture_default_str()->check(CLI::Range(0.01, 1e7));
  cmd->add_option("--poll", args->options.poll_s,
                  "seconds between claims while idle (on PostgreSQL runners wake on NOTIFY; this is the fallback)")
      ->capture_default_str()->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--exit-when-idle", args->options.exit_when_idle_s,
                  "exit after this many seconds with no task (default: run until stopped)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--max-tasks", args->options.max_claims,
                  "claim at most this many tasks, run them to their end and exit (a batch job that runs "
                  "one task: --max-tasks 1 --exit-when-idle 0); default: no limit")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  cmd->add_flag("--no-notify", [args](std::int64_t) { args->options.notifications = false; },
                "poll every --poll seconds instead of waking on PostgreSQL NOTIFY");
  cmd->add_flag("--oldest-first", args->oldest_first, "claim the oldest pending task first (default newest)");
  cmd->add_flag("--no-task-cgroups", [args](std::int64_t) { args->options.task_cgroups = false; },
                "do not give each task a cgroup (by default, where the runner may create cgroups, a task's "
                "daemons die with it and a SIGKILLed runner's are killed by the next runner)");
  cmd->add_option("--work-dir", args->options.work_dir, "where task logs and result files go (default: a temp dir)");
  cmd->add_option("--trainer", args->options.spec_command,
                  "program and arguments that train spec tasks (default: this tensorhub's train-spec)")
      ->expected(1, 16);
  cmd->add_option("--python", args->options.python,
                  "the Python interpreter of script tasks that name none (a path, e.g. a virtual environment's "
                  "bin/python, or a name looked up on PATH)")
      ->capture_default_str();
  cmd->add_flag("--no-fork-server", args->no_fork_server,
                "start each spec task as a new process (by default they are forks of a fork server that has "
                "loaded libtorch once: ~0.01 s to start a task instead of ~0.6 s)");
  add_runner_resource_options(*cmd, args->resources);
  add_log_level_option(*cmd, args->log_level);
  cmd->callback([args]() {
    apply_runner_resource_flags(args->resources, args->options.cpus, args->options.memory_bytes, args->options.gpus);
    setup_logging(args->log_level);
    args->options.log = info_log();
    args->options.hub_uri = args->hub.hub;
    args->options.project_name = args->hub.project;
    args->options.order = args->oldest_first ? ClaimOrder::kOldestFirst : ClaimOrder::kNewestFirst;
    // Spec tasks are trained by `tensorhub-torch train-spec` beside this program unless --trainer
    // says otherwise, forked from a `tensorhub-torch fork-server`, which has loaded libtorch once.
    // A build of the main job alone (scripts/demo) has no tensorhub-torch: the runner still runs
    // command and script tasks, and fails a spec task it claims with the hint below.
    args->options.trainer_hint = "give the runner --trainer /path/to/tensorhub-torch train-spec";
    if (args->options.spec_command.empty()) {
      if (::access(torch_binary().c_str(), X_OK) == 0) {
        args->options.spec_command = {torch_binary(), "train-spec"};
        if (!args->no_fork_server) args->options.fork_server = {torch_binary(), "fork-server"};
      } else {
        args->options.trainer_hint = torch_binary() + " is not built (scripts/build tensorhub-torch), or " +
                                     args->options.trainer_hint;
      }
    }
    // Tasks can call `tensorhub task report-epoch` without knowing where tensorhub is installed.
    args->options.path_prepend = executable_dir();
    std::signal(SIGTERM, on_runner_stop_signal);  // before the Runner: its start-up is not instant
    std::signal(SIGINT, on_runner_stop_signal);
    Runner runner(args->options);
    g_runner.store(&runner);
    if (g_stop_requested.load()) runner.request_stop();
    runner.run();
    g_runner.store(nullptr);
  });
}

}  // namespace tensorhub
