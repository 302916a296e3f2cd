// tensorhub demo: the main job in one command. Starts N runners and the dispatcher
// (examples/database/dispatch_tasks) as child processes on one hub, then prints the
// leaderboard of the trained models.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "commands.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/process.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

// `tensorhub demo --help`'s description.
struct DemoArgs {
  HubFlags hub;
  int epochs = 5;
  int runners = 2;
  std::string data = "/usr/share/datasets/fashion-mnist";
};

// If the demo dies (kill, crash), its runners and dispatcher get SIGTERM too: runners release
// their tasks instead of running on forever. They stay in the demo's process group, so a
// Ctrl-C in the terminal reaches them as well.
Process spawn(const std::vector<std::string>& argv) {
  ProcessOptions options;
  options.own_process_group = false;
  options.terminate_with_parent = true;
  return Process::spawn(argv, options);
}

// SIGTERM to each runner (they release their tasks), then wait for all of them.
void stop_runners(std::vector<Process>& runners) {
  for (auto& p : runners) p.signal(SIGTERM);
  for (auto& p : runners) p.wait();
}

std::string require_binary(const std::string& dir, const std::string& name) {
  const auto path = std::filesystem::path(dir) / name;
  if (!std::filesystem::exists(path))
    throw FailedPrecondition(path.string() + " is missing; build it with `cmake --build build` (scripts/demo does)");
  return path.string();
}

// The dispatcher's exit code. It waits for its tasks, which only the runners run: when every
// runner has exited (a wrong hub, a crash, a kill), the dispatcher is stopped too and this
// throws FailedPrecondition instead of waiting for ever.
int wait_for_dispatcher(Process& dispatcher, std::vector<Process>& runners) {
  for (;;) {
    if (const auto code = dispatcher.wait_for(std::chrono::milliseconds(500))) return *code;
    int runner_code = 0;
    bool all_exited = !runners.empty();
    for (auto& r : runners) {
      const auto c = r.wait_for(std::chrono::milliseconds(0));
      all_exited = all_exited && c.has_value();
      if (c) runner_code = *c;
    }
    if (!all_exited) continue;
    dispatcher.stop(std::chrono::seconds(5));
    throw FailedPrecondition("every runner exited (the last with status " + std::to_string(runner_code) +
                             ") before the tasks were done: their messages are above");
  }
}

void print_leaderboard(const DemoArgs& args) {
  Hub hub(args.hub.hub, args.hub.project);
  const auto models = hub.find_models({{"model_name", "mlp"}}, {{"test_accuracy", -1}});
  std::vector<nlohmann::json> rows;
  for (const auto& m : models)
    rows.push_back({{"rank", rows.size() + 1},
                    {"model id", m.id},
                    {"name", m.tags.value("name", "")},
                    {"test_accuracy", m.tags.value("test_accuracy", 0.0)},
                    {"epochs", m.tags.value("epochs", 0)},
                    {"train_seconds", m.tags.value("train_seconds", 0.0)}});
  std::cout << "\nleaderboard (model mlp, by test_accuracy):\n";
  print_table(rows, {"rank", "name", "test_accuracy", "epochs", "train_seconds", "model id"});
}

// Where to go from here. The server and the dashboard are tensorhub-torch's, which the demo's
// build leaves out (scripts/demo builds only what the main job runs).
void print_next_steps(const DemoArgs& args, const std::string& dir) {
  const std::string where = " --hub " + mask_passwords(args.hub.hub) + " --project " + args.hub.project;
  std::cout << "\nnext: the dashboard   tensorhub ui" << where << "\n"
            << "      serve the best  tensorhub serve --hub_model mlp" << where << std::endl;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tensorhub-torch"))
    std::cout << "      (both are in tensorhub-torch, not built yet: scripts/build tensorhub-torch)" << std::endl;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  auto* cmd = app.add_subcommand(
      "demo",
      "the main job end to end: save Fashion-MNIST to the hub, queue 3 MLP trainings with different "
      "hyperparameters, run them on N runners, pick and reload the best model");
  add_hub_options(*cmd, args->hub);
  args->hub.project = "tutorial";
  cmd->get_option("--project")->default_str("tutorial");
  cmd->add_option("--epochs", args->epochs, "epochs per training (the original used 20)")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--runners", args->runners, "runner processes; each task gets cores / runners threads")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--data", args->data, "MNIST-format directory (train-images-idx3-ubyte[.gz], ...)")
      ->capture_default_str();
  cmd->callback([args]() {
    const std::string dir = executable_dir();
    const std::string self = require_binary(dir, "tensorhub");
    const std::string dispatcher = require_binary(dir, "dispatch_tasks");
    const std::string task = require_binary(dir, "task_script");
    const int threads = std::max(1, available_cores() / args->runners);
    std::cout << "tensorhub demo: hub " << mask_passwords(args->hub.hub) << ", project " << args->hub.project << ", "
              << args->runners << " runner(s) with " << threads << " thread(s) each, " << args->epochs
              << " epoch(s) per model" << std::endl;
    // On Ctrl-C the terminal signals the whole process group: runners release their tasks.
    std::vector<Process> runners;
    int code = 1;
    try {
      for (int i = 0; i < args->runners; ++i)
        runners.push_back(spawn({self, "runner", "--hub", args->hub.hub, "--project", args->hub.project,
                                 "--task-name", "mnist", "--threads", std::to_string(threads), "--poll", "0.2"}));
      Process dispatch = spawn({dispatcher, "--hub", args->hub.hub, "--project", args->hub.project, "--data",
                                args->data, "--epochs", std::to_string(args->epochs), "--task-program", task});
      code = wait_for_dispatcher(dispatch, runners);
    } catch (...) {
      stop_runners(runners);
      throw;
    }
    stop_runners(runners);
    if (code != 0) throw FailedPrecondition("the dispatcher exited with status " + std::to_string(code));
    print_leaderboard(*args);
    print_next_steps(*args, dir);
  });
}

}  // namespace tensorhub
