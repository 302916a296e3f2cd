// tensorhub task create|list|show|wait|cancel|delete
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_context.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/train/spec.h"

namespace tensorhub::cli {
namespace {

struct TaskArgs {
  HubOptions hub;
  TaskSpec spec;
  std::string hyper_parameters = "{}";
  std::string tags = "{}";
  std::string spec_file;
  std::string filter;
  std::string sort;
  std::int64_t limit = 0;
  std::int64_t id = 0;
  double timeout_s = 0;
  bool json = false;
  bool all = false;
};

nlohmann::json parse_object(const std::string& text, const std::string& flag) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw InvalidArgument(flag + " must be a JSON object, e.g. '{\"n_units1\": 800}'; got " + text);
  return j;
}

nlohmann::json row_of(const Task& t) {
  return {{"id", t.id},           {"task_name", t.spec.task_name}, {"status", to_string(t.status)},
          {"attempt", t.attempt}, {"failures", t.failures},        {"hyper_parameters", t.spec.hyper_parameters},
          {"result", t.result},   {"error", t.error}};
}

void print_failures(TaskQueue& queue, const nlohmann::json& filter) {
  nlohmann::json f = filter;
  f["status"] = nlohmann::json{{"$in", {"failed", "cancelled"}}};
  for (const auto& t : queue.find_tasks(f)) {
    std::cerr << "task " << t.id << " " << to_string(t.status)
              << (t.error.empty() ? std::string() : ": " + t.error) << "\n";
    if (!t.log_tail.empty()) std::cerr << "  last output:\n" << t.log_tail << "\n";
  }
}

}  // namespace

void add_task_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("task", "create, list, wait for, cancel or delete tasks");
  cmd->require_subcommand(1);
  auto args = std::make_shared<TaskArgs>();

  auto* create = cmd->add_subcommand("create", "put a task on the queue; prints its id");
  add_hub_options(*create, args->hub);
  create->add_option("--task-name", args->spec.task_name, "runners claim tasks by this name")->required();
  auto* command = create->add_option("--command", args->spec.command,
                                     "shell command to run; {name} is replaced by hyperparameter name");
  create->add_option("--spec", args->spec_file,
                     "instead of --command: a spec JSON file, a declarative training job that runners train "
                     "with `tensorhub train-spec` (${name} is replaced by hyperparameter name)")
      ->excludes(command);
  create->add_option("--hyper-parameters", args->hyper_parameters, "JSON object, e.g. '{\"n_units1\": 800}'");
  create->add_option("--saved-result-keys", args->spec.saved_result_keys,
                     "result keys the task must report, e.g. test_accuracy");
  create->add_option("--max-attempts", args->spec.max_attempts, "failed attempts before the task fails")
      ->capture_default_str();
  create->add_option("--timeout", args->spec.timeout_s, "seconds per attempt before it is killed (0: none)")
      ->capture_default_str();
  create->add_option("--priority", args->spec.priority, "higher runs first")->capture_default_str();
  create->add_option("--tags", args->tags, "JSON object of free-form tags");
  create->callback([args]() {
    args->spec.hyper_parameters = parse_object(args->hyper_parameters, "--hyper-parameters");
    args->spec.tags = parse_object(args->tags, "--tags");
    if (args->spec.command.empty() == args->spec_file.empty())
      throw InvalidArgument("task create needs --command or --spec FILE");
    if (!args->spec_file.empty()) {
      std::ifstream in(args->spec_file);
      if (!in) throw Unavailable("cannot read spec file " + args->spec_file);
      std::stringstream text;
      text << in.rdbuf();
      args->spec.spec = parse_object(text.str(), "--spec file " + args->spec_file);
      // A typo or an unknown placeholder is reported now, not by a runner later.
      train::parse_train_spec(args->spec.spec, args->spec.hyper_parameters);
    }
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    std::cout << queue.create_task(args->spec) << std::endl;
  });

  auto* list = cmd->add_subcommand("list", "list tasks as a table (--json for JSON)");
  add_hub_options(*list, args->hub);
  list->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"status": "failed"}')");
  list->add_option("--sort", args->sort, "sort keys, e.g. time:-1 (default oldest first)");
  list->add_option("--limit", args->limit, "at most this many (0: all)");
  list->add_flag("--json", args->json, "print JSON instead of a table");
  list->callback([args]() {
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    queue.count_tasks();  // reap expired leases so the listing is current
    const auto tasks = queue.find_tasks(parse_filter(args->filter), parse_sort(args->sort), args->limit);
    if (args->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& t : tasks) out.push_back(t.to_json());
      std::cout << out.dump(2) << std::endl;
      return;
    }
    std::vector<nlohmann::json> rows;
    for (const auto& t : tasks) rows.push_back(row_of(t));
    print_table(rows, {"id", "task_name", "status", "attempt", "failures", "hyper_parameters", "result", "error"});
  });

  auto* show = cmd->add_subcommand("show", "show one task as JSON, with its error and log tail");
  add_hub_options(*show, args->hub);
  show->add_option("id", args->id, "task id")->required();
  show->callback([args]() {
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    std::cout << queue.get_task(args->id).to_json().dump(2) << std::endl;
  });

  auto* wait = cmd->add_subcommand("wait", "wait until no matching task is pending or running");
  add_hub_options(*wait, args->hub);
  wait->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"task_name": "mnist"}')");
  wait->add_option("--timeout", args->timeout_s, "give up after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  wait->callback([args]() {
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    const bool tty = isatty(STDERR_FILENO);
    const auto filter = parse_filter(args->filter);
    const auto counts = queue.wait(filter, [tty](const TaskCounts& c) {
      std::cerr << (tty ? "\r\033[K" : "") << to_string(c) << (tty ? "" : "\n") << std::flush;
    }, 0.2, args->timeout_s);
    if (tty) std::cerr << "\n";
    if (counts.failed + counts.cancelled > 0) {
      print_failures(queue, filter);
      throw FailedPrecondition(std::to_string(counts.failed) + " task(s) failed and " +
                               std::to_string(counts.cancelled) + " were cancelled");
    }
  });

  auto* cancel = cmd->add_subcommand("cancel", "cancel pending or running tasks (runners stop them)");
  add_hub_options(*cancel, args->hub);
  cancel->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"id": 3}')");
  cancel->add_flag("--all", args->all, "cancel every unfinished task of the project");
  cancel->callback([args]() {
    if (!args->all && parse_filter(args->filter).empty()) throw InvalidArgument("give --filter or --all");
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    std::cout << "cancelled " << queue.cancel_tasks(parse_filter(args->filter)) << " tasks" << std::endl;
  });

  // For task programs in any language: what TaskContext::report_epoch does in C++.
  auto* report = cmd->add_subcommand(
      "report-epoch", "from inside a task: report one epoch's metrics (a tuner's early stopping reads them)");
  auto epoch = std::make_shared<int>(0);
  auto logs = std::make_shared<std::string>();
  report->add_option("--epoch", *epoch, "0-based epoch index, as Keras counts")->required();
  report->add_option("--logs", *logs, R"(the epoch's metrics, e.g. '{"loss": 0.41, "val_accuracy": 0.85}')")->required();
  report->callback([epoch, logs]() {
    auto ctx = TaskContext::from_environment();
    if (!ctx.under_runner()) std::cerr << "tensorhub: not under a runner (no TENSORHUB_TASK_ID); nothing reported" << std::endl;
    ctx.report_epoch(*epoch, parse_object(*logs, "--logs"));
  });

  auto* del = cmd->add_subcommand("delete", "delete tasks matching --filter (or --all)");
  add_hub_options(*del, args->hub);
  del->add_option("--filter", args->filter, "JSON filter of the tasks to delete");
  del->add_flag("--all", args->all, "delete every task of the project");
  del->callback([args]() {
    if (!args->all && parse_filter(args->filter).empty()) throw InvalidArgument("give --filter or --all");
    Hub hub(args->hub.hub, args->hub.project);
    TaskQueue queue(hub);
    std::cout << "deleted " << queue.delete_tasks(parse_filter(args->filter)) << " tasks" << std::endl;
  });
}

}  // namespace tensorhub::cli
