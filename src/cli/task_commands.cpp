// tensorhub task create|list|show|wait|cancel|delete|report-epoch
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "commands.h"
#include "resource_flags.h"
#include "table.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/utf8.h"
#include "tensorhub/queue/task_context.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"

namespace tensorhub {
namespace {

struct TaskArgs {
  HubFlags hub;
  TaskSpec spec;
  std::string hyper_parameters = "{}";
  std::string tags = "{}";
  std::string spec_file;
  std::string script_file;
  std::string filter;
  std::string sort;
  std::int64_t limit = 0;
  std::int64_t id = 0;
  std::vector<std::int64_t> ids;
  double timeout_s = 0;
  bool json = false;
  bool all = false;
  ResourceFlags resources;  // task create's --cpus, --gpus, --memory
};

// Filters on task ids are split so that no query binds more than this many values.
constexpr std::size_t kIdsPerQuery = 500;

std::vector<Json> id_chunks(const std::vector<std::int64_t>& ids) {
  std::vector<Json> out;
  for (std::size_t i = 0; i < ids.size(); i += kIdsPerQuery) {
    Json chunk = Json::array();
    for (std::size_t j = i; j < std::min(ids.size(), i + kIdsPerQuery); ++j) chunk.push_back(ids[j]);
    out.push_back(Json{{"id", {{"$in", chunk}}}});
  }
  return out;
}

// Runs the filter once: an operator the store does not know (InvalidArgument) is a wrong
// command line, said before any work is done.
void check_task_filter(TaskQueue& queue, const Json& filter) {
  try {
    queue.find_tasks(filter, {}, 1);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw UsageError("--filter: " + e.message());
  }
}

// The refusal of cancel/delete without a choice of tasks: an empty --filter is not one.
UsageError no_tasks_chosen(const TaskArgs& a, const std::string& verb) {
  if (!a.filter.empty())
    return UsageError("--filter " + a.filter + " is empty and would " + verb + " every task of the project; give " +
                      "a filter that chooses tasks, or --all to " + verb + " every one");
  return UsageError("give --filter to choose the tasks to " + verb + ", or --all");
}

// ---- progress: the epoch reports of running tasks (TaskContext::report_epoch) ------------

// The epochs a task trains, when its spec says (fit.epochs, a number or a "${name}"
// placeholder of its hyperparameters); 0 when unknown (a command task).
int planned_epochs(const Task& t) {
  if (!t.spec.train_spec.is_object() || !t.spec.train_spec.contains("fit") || !t.spec.train_spec["fit"].is_object()) return 0;
  Json epochs = t.spec.train_spec["fit"].value("epochs", Json());
  if (epochs.is_string()) {
    const std::string text = epochs.get<std::string>();
    if (text.size() > 3 && text.starts_with("${") && text.back() == '}')
      epochs = t.spec.hyper_parameters.value(text.substr(2, text.size() - 3), Json());
  }
  return epochs.is_number_integer() ? epochs.get<int>() : 0;
}

// The last epoch report of each task's current attempt: {"attempt", "epoch" (0-based),
// "epochs" (planned; 0: unknown), "logs", "time"}. Reads the reports with an id above `after` only (0: all).
std::map<std::int64_t, Json> last_epochs(Hub& hub, const std::vector<Task>& tasks, std::int64_t after = 0,
                                         std::int64_t* last_report_id = nullptr) {
  std::map<std::int64_t, const Task*> by_id;
  std::vector<std::int64_t> ids;
  for (const auto& t : tasks) {
    by_id[t.id] = &t;
    ids.push_back(t.id);
  }
  std::map<std::int64_t, Json> out;
  for (const EpochReport& r : find_epoch_reports(hub, ids, after)) {
    if (last_report_id) *last_report_id = std::max(*last_report_id, r.id);
    const Task& t = *by_id.at(r.task_id);
    if (!r.of_attempt(t.attempt)) continue;  // a report of an earlier attempt, before a retry
    out[t.id] = {{"attempt", t.attempt},
                 {"epoch", r.epoch},
                 {"epochs", planned_epochs(t)},
                 {"logs", r.logs},
                 {"time", format_time(r.time)}};
  }
  return out;
}

// "epoch 4/10 loss=0.41 val_accuracy=0.85": epochs counted from 1, as Keras prints them.
std::string progress_text(const Json& last) {
  std::string out = "epoch " + std::to_string(last.value("epoch", 0) + 1);
  if (last.value("epochs", 0) > 0) out += "/" + std::to_string(last.value("epochs", 0));
  const Json logs = last.value("logs", Json::object());
  for (auto it = logs.begin(); it != logs.end(); ++it) out += " " + it.key() + "=" + cell_text(it.value());
  return out;
}

nlohmann::json row_of(const Task& t) {
  return {{"id", t.id},           {"task_name", t.spec.task_name}, {"status", to_string(t.status)},
          {"attempt", t.attempt}, {"failures", t.failures},        {"hyper_parameters", t.spec.hyper_parameters},
          {"result", t.result},   {"error", t.error}};
}

// ---- task wait ---------------------------------------------------------------------------

// The tasks `task wait` judges: the ids given, or the matching tasks pending or running now.
// Also says how many matching tasks had ended before, to mention them.
std::vector<std::int64_t> tasks_to_wait_for(TaskQueue& queue, const TaskArgs& a, const Json& filter,
                                            std::int64_t* ended_before) {
  queue.count_tasks();  // reap expired leases first, so a dead runner's task is not waited for
  if (!a.ids.empty()) {
    std::set<std::int64_t> found;
    for (const Json& chunk : id_chunks(a.ids))
      for (const auto& t : queue.find_tasks(chunk)) found.insert(t.id);
    for (const auto id : a.ids)
      if (!found.count(id))
        throw NotFound("task " + std::to_string(id) + " is not in project \"" + a.hub.project +
                       "\"; see `tensorhub task list`");
    return {found.begin(), found.end()};
  }
  // A filter on status is the caller's: apply it, then keep the unfinished tasks.
  Json f = filter;
  if (!f.contains("status")) f["status"] = {{"$in", {"pending", "running"}}};
  std::vector<std::int64_t> ids;
  for (const auto& t : queue.find_tasks(f, {{"id", 1}}))
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRunning) ids.push_back(t.id);
  const TaskCounts all = queue.count_tasks(filter);
  *ended_before = all.finished + all.failed + all.cancelled;
  return ids;
}

// The counts of the tasks of every chunk (TaskQueue::count_tasks reaps expired leases first).
TaskCounts count_of(TaskQueue& queue, const std::vector<Json>& chunks) {
  TaskCounts c;
  for (const Json& chunk : chunks) {
    const TaskCounts n = queue.count_tasks(chunk);
    c.pending += n.pending;
    c.running += n.running;
    c.finished += n.finished;
    c.failed += n.failed;
    c.cancelled += n.cancelled;
  }
  return c;
}

// The live line: counts, then the progress of up to three running tasks.
class WaitLine {
 public:
  WaitLine(Hub& hub, TaskQueue& queue) : hub_(hub), queue_(queue), tty_(isatty(STDERR_FILENO) == 1) {}

  void update(const TaskCounts& counts, const std::vector<Json>& chunks) {
    std::string line = to_string(counts);
    if (counts.running > 0) {
      std::vector<Task> running;
      for (Json chunk : chunks) {
        chunk["status"] = "running";
        for (auto& t : queue_.find_tasks(chunk)) running.push_back(std::move(t));
      }
      for (auto& [id, last] : last_epochs(hub_, running, last_report_id_, &last_report_id_)) progress_[id] = last;
      int shown = 0;
      for (const auto& t : running) {
        const auto it = progress_.find(t.id);
        if (it == progress_.end() || it->second.value("attempt", 0) != t.attempt) continue;
        if (++shown > 3) {
          line += "; ...";
          break;
        }
        line += "; task " + std::to_string(t.id) + " " + progress_text(it->second);
      }
    }
    if (line == last_) return;
    last_ = line;
    std::cerr << (tty_ ? "\r\033[K" : "") << line << (tty_ ? "" : "\n") << std::flush;
  }

  void end() {
    if (tty_ && !last_.empty()) std::cerr << "\n";
  }

 private:
  Hub& hub_;
  TaskQueue& queue_;
  bool tty_;
  std::string last_;
  std::int64_t last_report_id_ = 0;
  std::map<std::int64_t, Json> progress_;
};

// Prints each failed or cancelled task of `chunks` (id, status, error, output tail) and
// throws FailedPrecondition naming them; returns when every one finished.
void judge(TaskQueue& queue, const std::vector<Json>& chunks, std::size_t waited) {
  std::vector<Task> bad;
  for (Json chunk : chunks) {
    chunk["status"] = {{"$in", {"failed", "cancelled"}}};
    for (auto& t : queue.find_tasks(chunk, {{"id", 1}})) bad.push_back(std::move(t));
  }
  if (bad.empty()) return;
  std::string names;
  for (const auto& t : bad) {
    std::cerr << "task " << t.id << " " << to_string(t.status) << (t.error.empty() ? std::string() : ": " + t.error)
              << "\n";
    if (!t.log_tail.empty()) std::cerr << "  last output:\n" << t.log_tail << (t.log_tail.ends_with('\n') ? "" : "\n");
    names += (names.empty() ? "" : ", ") + std::to_string(t.id) + " (" + to_string(t.status) + ")";
  }
  throw FailedPrecondition(std::to_string(bad.size()) + " of the " + std::to_string(waited) +
                           " task(s) waited for did not finish: " + names + "; `tensorhub task show ID` has the details");
}

// Throws NotFound naming the tasks of `ids` that are no longer in the hub (deleted while
// waited for): a wait for them can neither succeed nor fail.
[[noreturn]] void throw_deleted(TaskQueue& queue, const std::vector<std::int64_t>& ids) {
  std::set<std::int64_t> found;
  for (const Json& chunk : id_chunks(ids))
    for (const auto& t : queue.find_tasks(chunk)) found.insert(t.id);
  std::string names;
  for (const auto id : ids)
    if (!found.count(id)) names += (names.empty() ? "" : ", ") + std::to_string(id);
  throw NotFound("task(s) " + names + " were deleted while waited for (no longer in the hub); their outcome is "
                 "unknown");
}

void run_wait(const TaskArgs& a) {
  const Json filter = parse_filter(a.filter);
  if (!a.ids.empty() && !filter.empty()) throw UsageError("give task ids or --filter, not both");
  Hub hub = open_hub_to_read(a.hub);
  TaskQueue queue(hub);
  check_task_filter(queue, filter);
  std::int64_t ended_before = 0;
  const auto ids = tasks_to_wait_for(queue, a, filter, &ended_before);
  if (ids.empty()) {
    std::cerr << "no pending or running task" << (filter.empty() ? "" : " matches " + filter.dump())
              << "; nothing to wait for";
    if (ended_before > 0)
      std::cerr << " (" << ended_before << " matching task(s) had ended before; `tensorhub task list` shows them, "
                << "and `tensorhub task wait ID...` judges given tasks whatever their state)";
    std::cerr << std::endl;
    return;
  }
  const auto chunks = id_chunks(ids);
  WaitLine line(hub, queue);
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const TaskCounts c = count_of(queue, chunks);
    if (c.total() < static_cast<std::int64_t>(ids.size())) {
      line.end();
      throw_deleted(queue, ids);
    }
    line.update(c, chunks);
    if (c.unfinished() == 0) break;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (a.timeout_s > 0 && waited > a.timeout_s) {
      line.end();
      throw Unavailable("tasks still unfinished after --timeout " + cell_text(a.timeout_s) + " s: " +
                        std::to_string(c.pending) + " pending, " + std::to_string(c.running) +
                        " running; is a runner started for them?");
    }
    queue.wait_for_change(0.2);
  }
  line.end();
  judge(queue, chunks, ids.size());
}

// Reads a spec file. Throws UsageError with the parser's message for invalid JSON.
Json read_spec_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--spec: cannot read the file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_object(text.str(), "--spec file " + path);
}

// Reads a script task's file into `spec` (script, script_name, script_sha256). Throws
// UsageError for a file that cannot be read, is empty, or is not UTF-8 text.
void read_script_file(const std::string& path, TaskSpec& spec) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UsageError("--script: " + path + (std::filesystem::exists(path, ec) ? " is not a file" : " does not exist"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("--script: cannot read the file " + path);
  spec.script.assign(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) throw UsageError("--script: cannot read the file " + path);
  if (spec.script.empty()) throw UsageError("--script: the file " + path + " is empty");
  if (const auto bad = first_invalid_utf8(spec.script))
    throw UsageError("--script: " + path + " is not UTF-8 text (byte " + std::to_string(*bad) +
                     " begins no UTF-8 character); a script task's source must be UTF-8 Python");
  spec.script_name = std::filesystem::path(path).filename().string();
  spec.script_sha256 = sha256_hex(spec.script);
}

// task create: checks everything typed before opening (maybe creating) the hub.
void add_create_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  auto* create = cmd.add_subcommand("create", "put a task on the queue; prints its id");
  add_hub_options(*create, args->hub);
  create->add_option("--task-name", args->spec.task_name, "runners claim tasks by this name")->required();
  auto* command = create->add_option("--command", args->spec.command,
                                     "shell command to run; {name} is replaced by hyperparameter name");
  create->add_option("--spec", args->spec_file,
                     "instead of --command: a spec JSON file, a declarative training job that runners train "
                     "with `tensorhub train-spec` (${name} is replaced by hyperparameter name)")
      ->excludes(command);
  create->add_option("--script", args->script_file,
                     "instead of --command: a Python script stored in the task (its bytes and SHA-256); runners "
                     "run it with the hyperparameters as its global variables and store its saved_result_keys "
                     "globals as the result, as TensorHub's create_task(script=...)")
      ->excludes(command)
      ->excludes("--spec");
  create->add_option("--python", args->spec.python,
                     "with --script: the interpreter runners run it with (default: the runner's --python)");
  create->add_option("--hyper-parameters", args->hyper_parameters, "JSON object, e.g. '{\"n_units1\": 800}'");
  create->add_option("--saved-result-keys", args->spec.saved_result_keys,
                     "result keys the task must report, e.g. test_accuracy");
  create->add_option("--max-attempts", args->spec.max_attempts, "failed attempts before the task fails")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  create->add_option("--timeout", args->spec.timeout_s, "seconds per attempt before it is killed (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e12));
  create->add_option("--priority", args->spec.priority, "higher runs first")->capture_default_str();
  create->add_option("--tags", args->tags, "JSON object of free-form tags");
  add_task_resource_options(*create, args->resources, "each attempt");
  create->callback([args]() {
    args->spec.resources = task_resources_of(args->resources);
    args->spec.hyper_parameters = parse_json_object(args->hyper_parameters, "--hyper-parameters");
    args->spec.tags = parse_json_object(args->tags, "--tags");
    if (args->spec.task_name.empty()) throw UsageError("--task-name must not be empty");
    if (!args->spec.command.empty() + !args->spec_file.empty() + !args->script_file.empty() != 1)
      throw UsageError("task create needs one of --command CMD, --spec FILE or --script FILE");
    if (!args->spec.python.empty() && args->script_file.empty())
      throw UsageError("--python is the interpreter of a --script task; give --script FILE");
    for (const auto& key : args->spec.saved_result_keys)
      if (key.empty())
        throw UsageError("--saved-result-keys: a key name is empty; give names such as test_accuracy, "
                         "or leave the flag out");
    if (!args->spec_file.empty()) {
      args->spec.train_spec = read_spec_file(args->spec_file);
      // A typo or an unknown placeholder is reported now, not by a runner later.
      check_train_spec(args->spec.train_spec, args->spec.hyper_parameters);
    }
    if (!args->script_file.empty()) read_script_file(args->script_file, args->spec);
    // Everything the user typed is checked before the hub is opened, which may create it.
    check_hub_options(args->hub);
    try {
      TaskQueue::validate(args->spec);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      throw UsageError(e.message());
    }
    Hub hub = open_hub(args->hub, OpenMode::kCreate);
    TaskQueue queue(hub);
    warn_if_no_runner_to_check(queue, args->spec);
    std::cout << queue.create_task(args->spec) << std::endl;
  });
}

void add_list_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  auto* list = cmd.add_subcommand(
      "list", "list tasks as a table (--json for JSON); running tasks show their last reported epoch");
  add_hub_options(*list, args->hub);
  list->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"status": "failed"}')");
  list->add_option("--sort", args->sort, "sort keys, e.g. time:-1 (default oldest first)");
  list->add_option("--limit", args->limit, "at most this many (0: all)");
  list->add_flag("--json", args->json, "print JSON instead of a table");
  list->callback([args]() {
    const Json filter = parse_filter(args->filter);
    const SortSpec sort = parse_sort_flag(args->sort);
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    TaskQueue queue(hub);
    check_task_filter(queue, filter);
    const auto tasks = queue.find_tasks(filter, sort, args->limit);
    std::vector<Task> running;
    for (const auto& t : tasks)
      if (t.status == TaskStatus::kRunning) running.push_back(t);
    const auto progress = last_epochs(hub, running);
    // Why a pending task fits no live runner ("needs 2 GPUs; largest live runner has 0").
    const auto waiting = queue.waiting_for(tasks);
    if (args->json) {
      // Each task's attempts (task_attempt.h), their usage without the GPU samples: one query.
      std::vector<std::int64_t> ids;
      for (const auto& t : tasks) ids.push_back(t.id);
      const auto attempts = queue.find_attempts(ids);
      nlohmann::json out = nlohmann::json::array();
      for (const auto& t : tasks) {
        out.push_back(t.to_json());
        out.back()["attempts"] = nlohmann::json::array();
        if (attempts.count(t.id))
          for (const auto& a : attempts.at(t.id)) out.back()["attempts"].push_back(a.to_json(false));
        if (progress.count(t.id)) out.back()["last_epoch"] = progress.at(t.id);
        if (waiting.count(t.id)) out.back()["waiting_for"] = waiting.at(t.id);
      }
      std::cout << out.dump(2) << std::endl;
    } else {
      std::vector<nlohmann::json> rows;
      for (const auto& t : tasks) {
        rows.push_back(row_of(t));
        if (progress.count(t.id)) rows.back()["progress"] = progress_text(progress.at(t.id));
        if (waiting.count(t.id)) rows.back()["waiting_for"] = waiting.at(t.id);
      }
      std::vector<std::string> columns = {"id", "task_name", "status", "attempt", "failures"};
      if (!progress.empty()) columns.push_back("progress");
      if (!waiting.empty()) columns.push_back("waiting_for");
      for (const char* c : {"hyper_parameters", "result", "error"}) columns.push_back(c);
      print_table(rows, columns);
    }
    const auto has_key = [&](const std::string& key) {
      return !queue.find_tasks({{key, {{"$exists", true}}}}, {}, 1).empty();
    };
    warn_unknown_sort_keys(sort, has_key, "task");
    warn_unknown_filter_keys(filter, has_key, "task");
    if (tasks.empty()) warn_if_project_empty(hub);
  });
}

// Checks a task id on the command line before CLI11 converts it, whose own error ("Could not
// convert: id = abc") does not say what an id is.
const CLI::Validator kTaskId(
    [](std::string& text) -> std::string {
      const bool digits = !text.empty() && text.size() < 19 &&
                          text.find_first_not_of("0123456789") == std::string::npos;
      if (digits) return "";
      return "a task id is a whole number, as `tensorhub task create` prints and `tensorhub task list` shows; got \"" +
             text + "\"";
    },
    "", "task id");

void add_show_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  auto* show = cmd.add_subcommand(
      "show", "show one task as JSON, with its error, log tail, last reported epoch (last_epoch) and its attempts "
              "(runner, host, outcome, wall_s, cpu_s, peak memory, GPUs and their utilisation samples)");
  add_hub_options(*show, args->hub);
  show->add_option("id", args->id, "task id")->required()->check(kTaskId);
  show->callback([args]() {
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    TaskQueue queue(hub);
    const Task t = queue.get_task(args->id);
    Json out = t.to_json();
    out["attempts"] = Json::array();  // what each attempt used (task_attempt.h), GPU samples included
    for (const auto& a : queue.find_attempts(t.id)) out["attempts"].push_back(a.to_json());
    const auto progress = last_epochs(hub, {t});
    if (progress.count(t.id)) out["last_epoch"] = progress.at(t.id);
    std::cout << out.dump(2) << std::endl;
  });
}

void add_wait_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  auto* wait = cmd.add_subcommand(
      "wait",
      "wait for tasks: the ids given, or else those matching --filter that are pending or running now "
      "(tasks created later are not waited for). Shows live counts and each running task's last epoch; "
      "exits 1 naming the tasks waited for that failed or were cancelled");
  add_hub_options(*wait, args->hub);
  wait->add_option("ids", args->ids, "task ids to wait for (task create prints them); judged whatever their state")
      ->check(kTaskId);
  wait->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"task_name": "mnist"}')");
  wait->add_option("--timeout", args->timeout_s, "give up after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  wait->callback([args]() { run_wait(*args); });
}

// What `task cancel` and `task delete` say and do to the tasks --filter (or --all) chooses.
struct BulkAction {
  std::string verb, description, filter_help, all_help, done;
  std::int64_t (TaskQueue::*act)(const Json&);
};

void add_bulk_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args, const BulkAction& action) {
  auto* sub = cmd.add_subcommand(action.verb, action.description);
  add_hub_options(*sub, args->hub);
  sub->add_option("--filter", args->filter, action.filter_help);
  sub->add_flag("--all", args->all, action.all_help);
  sub->callback([args, action]() {
    const Json filter = parse_filter(args->filter);
    if (!args->all && filter.empty()) throw no_tasks_chosen(*args, action.verb);
    Hub hub = open_hub(args->hub, OpenMode::kExisting);
    TaskQueue queue(hub);
    check_task_filter(queue, filter);
    std::cout << action.done << " " << (queue.*action.act)(filter) << " tasks" << std::endl;
  });
}

void add_cancel_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  add_bulk_command(cmd, args,
                   {"cancel", "cancel pending or running tasks (runners stop them)", R"(JSON filter, e.g. '{"id": 3}')",
                    "cancel every unfinished task of the project", "cancelled", &TaskQueue::cancel_tasks});
}

void add_report_epoch_command(CLI::App& cmd) {
  // For task programs in any language: what TaskContext::report_epoch does in C++.
  auto* report = cmd.add_subcommand(
      "report-epoch",
      "from inside a task: report one epoch's metrics (task list/show/wait show them; a tuner's early stopping "
      "reads them). Fails if the runner's task (TENSORHUB_TASK_ID) is not in the hub");
  auto epoch = std::make_shared<int>(0);
  auto logs = std::make_shared<std::string>();
  report->add_option("--epoch", *epoch, "0-based epoch index, as Keras counts")->required()->check(
      CLI::Validator([](std::string& v) { return v.starts_with("-") ? "must be 0 or more (epochs count from 0)" : ""; },
                     "0 or more"));
  report->add_option("--logs", *logs, R"(the epoch's metrics, e.g. '{"loss": 0.41, "val_accuracy": 0.85}')")->required();
  report->callback([epoch, logs]() {
    const Json metrics = parse_json_object(*logs, "--logs");
    auto ctx = TaskContext::from_environment();
    if (!ctx.under_runner()) std::cerr << "tensorhub: not under a runner (no TENSORHUB_TASK_ID); nothing reported" << std::endl;
    ctx.report_epoch(*epoch, metrics);
  });
}

void add_delete_command(CLI::App& cmd, const std::shared_ptr<TaskArgs>& args) {
  add_bulk_command(cmd, args,
                   {"delete", "delete tasks matching --filter (or --all)", "JSON filter of the tasks to delete",
                    "delete every task of the project", "deleted", &TaskQueue::delete_tasks});
}

}  // namespace

void add_task_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("task", "create, list, wait for, cancel or delete tasks");
  cmd->require_subcommand(1);
  auto args = std::make_shared<TaskArgs>();
  add_create_command(*cmd, args);
  add_list_command(*cmd, args);
  add_show_command(*cmd, args);
  add_wait_command(*cmd, args);
  add_cancel_command(*cmd, args);
  add_report_epoch_command(*cmd);
  add_delete_command(*cmd, args);
}

}  // namespace tensorhub
