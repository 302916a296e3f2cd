// tensorhub tune: a hyperparameter search whose trials runners take from the queue, and
// tensorhub tune results: what a stored search found.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "logging.h"
#include "resource_flags.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/train/spec.h"
#include "tensorhub/tune/pareto.h"
#include "tensorhub/tune/tuner.h"

namespace tensorhub {
namespace {

struct TuneArgs {
  HubFlags hub;
  std::string log_level = "info";
  std::string name = "default";
  std::string space_file;
  std::string oracle = "random";
  std::string objective = "val_loss";
  std::string spec_file;
  std::vector<std::string> command;
  std::string task_name = "trial";
  // The oracle's (add_oracle_options).
  int max_trials = 0;
  int max_epochs = 20, min_epochs = 1, factor = 3, hyperband_iterations = 1;  // hyperband, asha
  int num_initial_points = 0;
  std::string acquisition = "ei";  // bayesian
  int population_size = 50;         // nsga2
  double mutation_prob = 0, crossover_prob = 0.9, swapping_prob = 0.5;
  int population = 8, perturbation_interval = 2;  // pbt
  double quantile = 0.25, resample_probability = 0.25;
  std::uint64_t seed = 0;
  PrunerOptions pruner;  // add_pruner_options
  // The tuner's.
  int parallel = 2;
  int max_retries = 0, max_consecutive_failures = 3;
  double timeout_s = 0, poll_s = 0.5, lease_s = 30;
  bool overwrite = false;
  bool json = false;
  ResourceFlags resources;  // each trial's --cpus, --gpus, --memory
};

struct ResultsArgs {
  HubFlags hub;
  std::string name = "default";
  std::size_t top = 0;
  bool json = false;
  bool pareto = false;
};

Tuner* g_tuner = nullptr;
extern "C" void on_stop_signal(int) {
  if (g_tuner) g_tuner->request_stop();
}

Json read_json_file(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) throw UsageError(std::string(flag) + ": cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), std::string(flag) + " file '" + path + "'");
}

// The oracles' stop reasons name their options as C++ spells them ("max_trials (9) reached");
// on the command line they are flags.
std::string with_flag_names(std::string text) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"max_trials", "--max-trials"}, {"max_epochs", "--max-epochs"}, {"min_epochs", "--min-epochs"},
      {"hyperband_iterations", "--hyperband-iterations"}, {"num_initial_points", "--num-initial-points"}};
  for (const auto& [name, flag] : kFlags)
    for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + std::strlen(flag)))
      if (at == 0 || text[at - 1] != '-') text.replace(at, std::strlen(name), flag);
  return text;
}

// Refuses `-- 'echo {x} > out'`: one quoted word with spaces is run as a program of that
// name, which is never what was meant (unless a file has that very name).
void check_command_words(const std::vector<std::string>& words) {
  if (words.size() != 1 || words[0].find(' ') == std::string::npos) return;
  std::error_code ec;
  if (std::filesystem::exists(words[0], ec)) return;
  throw UsageError("the trial command after -- is one word with spaces, '" + words[0] +
                   "', which would run as a program of that name: each word after -- is one argument, so "
                   "write it unquoted (-- ./train --units {units}), or for shell syntax -- sh -c '...' with "
                   "\"$TENSORHUB_HP_name\" for a value ({name} is refused inside sh -c)");
}

// Joins argv words into one shell command; words with shell characters are single-quoted.
std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                         "_-./=:,+{}@%") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// One table row per trial: id, status, score, the trial's own hyperparameters, its task.
Json trial_row(const TrialView& v) {
  Json row = {{"trial", v.trial.trial_id}, {"status", to_string(v.trial.status)}};
  row["score"] = v.trial.score ? Json(*v.trial.score) : Json("");
  for (auto it = v.trial.hyper_parameters.begin(); it != v.trial.hyper_parameters.end(); ++it) {
    if (it.key() == "tuner/epochs") row["epochs"] = it.value();
    else if (it.key().rfind("tuner/", 0) != 0) row[it.key()] = it.value();
  }
  row["task"] = v.task_id;
  row["task_status"] = v.task_status;
  return row;
}

std::vector<Json> rows_of(const SearchSummary& s, std::size_t top) {
  std::vector<Json> rows;
  for (const auto& v : s.trials) {
    if (top && rows.size() >= top) break;
    rows.push_back(trial_row(v));
  }
  return rows;
}

// Columns in reading order: the trial, its score, its hyperparameters, then its task.
std::vector<std::string> columns_of(const std::vector<Json>& rows) {
  std::vector<std::string> cols = {"trial", "status", "score"};
  const std::vector<std::string> tail = {"epochs", "task", "task_status"};
  for (const auto& row : rows)
    for (auto it = row.begin(); it != row.end(); ++it)
      if (std::find(cols.begin(), cols.end(), it.key()) == cols.end() &&
          std::find(tail.begin(), tail.end(), it.key()) == tail.end())
        cols.push_back(it.key());
  for (const auto& c : tail)
    for (const auto& row : rows)
      if (row.contains(c)) {
        cols.push_back(c);
        break;
      }
  return cols;
}

void print_trials(const SearchSummary& s, std::size_t top) {
  const auto rows = rows_of(s, top);
  print_table(rows, columns_of(rows));
}

// `tune results --pareto`: the front's trials with one column per objective.
void print_pareto_front(const SearchSummary& s) {
  if (s.objectives.empty()) {
    std::cout << "search '" << s.search_name << "' has one objective (" << s.objective.to_string()
              << "): its front is its best trial" << std::endl;
  }
  std::vector<Json> rows;
  std::vector<std::string> cols = {"trial"};
  for (const auto& o : s.objectives) cols.push_back(o.to_string());
  for (const auto& v : s.pareto_front) {
    Json row = {{"trial", v.trial.trial_id}};
    for (std::size_t i = 0; i < s.objectives.size() && i < v.trial.values.size(); ++i)
      row[s.objectives[i].to_string()] = v.trial.values[i];
    for (auto it = v.trial.hyper_parameters.begin(); it != v.trial.hyper_parameters.end(); ++it)
      if (it.key().rfind("tuner/", 0) != 0) {
        row[it.key()] = it.value();
        if (std::find(cols.begin(), cols.end(), it.key()) == cols.end()) cols.push_back(it.key());
      }
    row["task"] = v.task_id;
    rows.push_back(std::move(row));
  }
  cols.push_back("task");
  if (!s.objectives.empty()) {
    std::cout << "Pareto front of search '" << s.search_name << "': " << s.pareto_front.size()
              << " trials that no other completed trial beats in every objective" << std::endl;
  }
  if (!rows.empty()) print_table(rows, cols);
}

// The score is the objective's best epoch (Keras Tuner's rule) but the model is saved after the
// trial's last epoch: when the two epochs differ, say so, with the saved model's own value.
std::string model_note(const TrialView& best, const std::string& objective) {
  const auto history = best.result.find("history");
  if (history == best.result.end() || !history->is_array() || history->empty() || !best.trial.score) return "";
  const Json& last = history->back();
  const auto value = last.is_object() ? last.find(objective) : last.end();
  if (value == last.end() || !value->is_number() || value->get<double>() == *best.trial.score) return "";
  std::size_t best_epoch = 0;
  for (std::size_t i = 0; i < history->size(); ++i) {
    const Json& e = (*history)[i];
    if (e.is_object() && e.contains(objective) && e[objective].is_number() &&
        e[objective].get<double>() == *best.trial.score)
      best_epoch = i + 1;
  }
  return " (saved after the trial's last epoch, " + std::to_string(history->size()) + ", with " + objective +
         " = " + cell_text(*value) + "; the score is epoch " + std::to_string(best_epoch) + "'s)";
}

void print_summary(const SearchSummary& s, std::size_t top, bool json) {
  if (json) {
    std::cout << s.to_json().dump(2) << std::endl;
    return;
  }
  print_trials(s, top);
  if (s.best) {
    std::cout << "\nbest trial " << s.best->trial.trial_id << ": " << s.objective.name << " = "
              << cell_text(*s.best->trial.score) << "\nhyperparameters: " << s.best->trial.hyper_parameters.dump();
    if (s.best->result.is_object() && s.best->result.contains("model_id"))
      std::cout << "\nmodel: id " << s.best->result["model_id"].dump() << model_note(*s.best, s.objective.name);
    std::cout << std::endl;
  } else {
    std::cout << "\nno completed trial yet" << std::endl;
  }
  if (!s.reason.empty()) std::cout << (s.done ? "done: " : "stopped: ") << with_flag_names(s.reason) << std::endl;
}

// The live view: on a terminal the table is redrawn in place; in a log, one line per change.
class LiveView {
 public:
  explicit LiveView(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}
  void operator()(const SearchSummary& s) {
    if (quiet_) return;
    int completed = 0, running = 0, pending = 0, failed = 0, pruned = 0;
    for (const auto& v : s.trials) {
      completed += v.trial.status == TrialStatus::kCompleted || v.trial.status == TrialStatus::kStopped;
      failed += v.trial.status == TrialStatus::kFailed;
      pruned += v.trial.status == TrialStatus::kPruned;
      if (v.trial.status != TrialStatus::kRunning) continue;
      // The oracle counts a trial running from its creation; its task says whether a runner has it.
      (v.task_status == "running" ? running : pending) += 1;
    }
    std::ostringstream line;
    line << "search " << s.search_name << ": " << completed << " completed, " << running << " running, " << pending
         << " waiting for a runner, " << failed << " failed";
    if (pruned > 0) line << ", " << pruned << " pruned";
    if (s.best) line << "; best " << s.objective.name << " " << cell_text(*s.best->trial.score) << " (trial "
                     << s.best->trial.trial_id << ")";
    if (!tty_) {
      std::cerr << line.str() << std::endl;
      return;
    }
    // Redraw: move up over the previous frame, clear to the end, print the new one.
    if (lines_ > 0) std::cerr << "\033[" << lines_ << "F\033[J";
    std::ostringstream frame;
    std::streambuf* old = std::cout.rdbuf(frame.rdbuf());
    print_trials(s, 20);
    std::cout.rdbuf(old);
    const std::string text = frame.str() + line.str() + "\n";
    std::cerr << text << std::flush;
    lines_ = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

 private:
  bool quiet_, tty_;
  int lines_ = 0;
};

// Checks a spec trial before any trial is queued (as `task create --spec` does), with the
// space's default values and the tuner's own keys, so a typo fails here and not on a runner.
void check_trial_spec(const Json& spec, const SearchSpace& space, const OracleOptions& o) {
  Json hp = space.default_values();
  hp.update(Json{{"tuner/epochs", o.max_epochs}, {"tuner/initial_epoch", 0}, {"tuner/bracket", 0}, {"tuner/round", 0}});
  try {
    parse_train_spec(spec, hp);
  } catch (const Error& e) {
    throw InvalidArgument("--spec: " + e.message() + " (checked with the space's default values " + hp.dump() + ")");
  }
  const bool has_validation = spec.is_object() && spec.contains("data") && spec["data"].is_object() &&
                              spec["data"].contains("validation");
  if (o.objective.name.rfind("val_", 0) == 0 && !has_validation) {
    throw InvalidArgument("--objective " + o.objective.name + " needs validation data, and the spec's data has no "
                          "\"validation\": {\"x\": ..., \"y\": ...}; add it or optimise a training metric");
  }
}

int run_tune(const TuneArgs& a) {
  check_hub_options(a.hub);  // a wrong --hub or empty project is a wrong command line (exit 2)
  setup_logging(a.log_level);
  TunerOptions o;
  o.log = info_log();
  o.hub_uri = a.hub.hub;
  o.project_name = a.hub.project;
  o.search_name = a.name;
  o.overwrite = a.overwrite;
  o.oracle = a.oracle;
  o.space = SearchSpace::from_json(read_json_file(a.space_file, "--space"));
  try {
    const auto objectives = parse_objectives(a.objective);
    o.oracle_options.objective = objectives.front();
    if (objectives.size() > 1) o.oracle_options.objectives = objectives;
  } catch (const Error& e) {
    throw UsageError("--objective: " + e.message());  // the command line is wrong: exit 2
  }
  if (o.oracle_options.multi_objective() && a.oracle != "random" && a.oracle != "grid" && a.oracle != "nsga2")
    throw UsageError("--objective with several objectives needs --oracle nsga2, random or grid; " + a.oracle +
                     " optimises one");
  o.oracle_options.population_size = a.population_size;
  o.oracle_options.mutation_prob = a.mutation_prob;
  o.oracle_options.crossover_prob = a.crossover_prob;
  o.oracle_options.swapping_prob = a.swapping_prob;
  o.oracle_options.population = a.population;
  o.oracle_options.perturbation_interval = a.perturbation_interval;
  o.oracle_options.quantile = a.quantile;
  o.oracle_options.resample_probability = a.resample_probability;
  o.oracle_options.max_trials = a.max_trials;
  o.oracle_options.seed = a.seed;
  o.oracle_options.max_epochs = a.max_epochs;
  o.oracle_options.min_epochs = a.min_epochs;
  o.oracle_options.factor = a.factor;
  o.oracle_options.hyperband_iterations = a.hyperband_iterations;
  o.oracle_options.num_initial_points = a.num_initial_points;
  o.oracle_options.acquisition = a.acquisition;
  o.pruner = a.pruner;
  if (o.pruner.name == "median" && a.pruner.percentile != 50)
    throw UsageError("--percentile is the percentile pruner's: --pruner percentile --percentile " +
                     std::to_string(a.pruner.percentile));
  if (o.pruner.enabled() && (a.oracle == "hyperband" || a.oracle == "asha" || a.oracle == "pbt"))
    throw UsageError("--pruner works with --oracle random, grid or bayesian; " + a.oracle +
                     " stops trials by its own schedule");
  if (a.min_epochs > a.max_epochs)
    throw UsageError("--min-epochs " + std::to_string(a.min_epochs) + " is more than --max-epochs " +
                     std::to_string(a.max_epochs));
  if (!a.spec_file.empty() && !a.command.empty())
    throw UsageError("give the trial as --spec FILE or as a command after --, not both");
  if (a.spec_file.empty() && a.command.empty())
    throw UsageError("give the trial as --spec FILE or as a command after --, e.g. "
                          "tensorhub tune ... -- ./train --units {units}");
  if (!a.spec_file.empty()) {
    o.spec = read_json_file(a.spec_file, "--spec");
    check_trial_spec(o.spec, o.space, o.oracle_options);
  } else {
    check_command_words(a.command);
    o.command = shell_join(a.command);
  }
  o.task_name = a.task_name;
  o.max_parallel_trials = a.parallel;
  o.max_retries_per_trial = a.max_retries;
  o.max_consecutive_failed_trials = a.max_consecutive_failures;
  o.trial_timeout_s = a.timeout_s;
  o.trial_resources = task_resources_of(a.resources);
  o.poll_s = a.poll_s;
  o.lease_s = a.lease_s;

  Tuner tuner(o);
  g_tuner = &tuner;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  LiveView view(a.json);
  const auto summary = tuner.search(std::ref(view));
  g_tuner = nullptr;
  if (!a.json) std::cout << std::endl;
  print_summary(summary, 0, a.json);
  if (!summary.done) {
    std::cerr << "search '" << a.name << "' paused; its queued trials stay on the queue and runners keep "
              << "training them. Run the same command again to resume it." << std::endl;
    return 130;  // as a shell reports a program stopped by Ctrl-C
  }
  if (!summary.best) {
    std::cerr << "search '" << a.name << "' ended without a completed trial; `tensorhub task show ID` shows a "
              << "trial's error and output" << std::endl;
    return 1;
  }
  return 0;
}

// An option shown with its default and checked by `check` (a CLI11 validator): a wrong value
// is a usage error (exit 2) naming the flag.
template <typename T>
void add_checked_option(CLI::App& app, const std::string& name, T& value, const std::string& help,
                        const CLI::Validator& check) {
  app.add_option(name, value, help)->capture_default_str()->check(check);
}

// "> 0" / ">= 0" checks whose error reads as such: CLI11's PositiveNumber and
// NonNegativeNumber print their range up to the largest double, 300 digits long.
CLI::Validator sign_check(bool zero_allowed) {
  const std::string what = zero_allowed ? "at least 0" : "greater than 0";
  return CLI::Validator(
      [zero_allowed, what](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool ok = end && end != text.c_str() && *end == '\0' && (zero_allowed ? v >= 0 : v > 0);
        return ok ? "" : "must be " + what + ", got " + text;
      },
      "", what);
}
const CLI::Validator kPositive = sign_check(false);
const CLI::Validator kNonNegative = sign_check(true);

// The options of the oracles (tune/oracle.h's OracleOptions): how many trials, the schedules of
// hyperband and asha, bayesian's start and acquisition, the seed.
void add_oracle_options(CLI::App& tune, TuneArgs& a) {
  add_checked_option(tune, "--max-trials", a.max_trials, "stop after this many trials (asha: configurations, its promotions not counted; 0: the oracle's own end)",
                     kNonNegative);
  add_checked_option(tune, "--max-epochs", a.max_epochs, "hyperband/asha/pbt: most epochs one model trains",
                     kPositive);
  add_checked_option(tune, "--min-epochs", a.min_epochs, "asha: epochs of the first rung", kPositive);
  add_checked_option(tune, "--factor", a.factor, "hyperband/asha: reduction factor", CLI::Range(2, 1000000));
  add_checked_option(tune, "--hyperband-iterations", a.hyperband_iterations,
                     "hyperband: iterations of the whole schedule", kPositive);
  add_checked_option(tune, "--num-initial-points", a.num_initial_points,
                     "bayesian: random trials first (0: 3 x parameters)", kNonNegative);
  tune.add_option("--acquisition", a.acquisition, "bayesian: ei or ucb")
      ->check(CLI::IsMember({"ei", "ucb"}))
      ->capture_default_str();
  add_checked_option(tune, "--population-size", a.population_size, "nsga2: trials per generation",
                     CLI::Range(2, 1000000));
  add_checked_option(tune, "--mutation-prob", a.mutation_prob,
                     "nsga2: chance that a parameter of a child is drawn anew (0: 1 / number of parameters)",
                     CLI::Range(0.0, 1.0));
  add_checked_option(tune, "--crossover-prob", a.crossover_prob, "nsga2: chance that a child has two parents",
                     CLI::Range(0.0, 1.0));
  add_checked_option(tune, "--swapping-prob", a.swapping_prob,
                     "nsga2: chance that a parameter comes from the second parent", CLI::Range(0.0, 1.0));
  add_checked_option(tune, "--population", a.population, "pbt: members trained side by side", CLI::Range(2, 100000));
  add_checked_option(tune, "--perturbation-interval", a.perturbation_interval,
                     "pbt: epochs between a member's exploit / explore steps", kPositive);
  add_checked_option(tune, "--quantile", a.quantile,
                     "pbt: the bottom fraction takes the weights of the top fraction", CLI::Range(0.01, 0.5));
  add_checked_option(tune, "--resample-probability", a.resample_probability,
                     "pbt: chance that an explored parameter is drawn anew instead of x0.8 / x1.2",
                     CLI::Range(0.0, 1.0));
  tune.add_option("--seed", a.seed, "seed of the oracle (0: random)")->capture_default_str();
}

// The pruner's options, with Optuna's names and defaults (tune/pruner.h).
void add_pruner_options(CLI::App& tune, TuneArgs& a) {
  tune.add_option("--pruner", a.pruner.name,
                  "stop running trials that fall behind: median (Optuna's MedianPruner) or percentile; random, grid "
                  "and bayesian only")
      ->check(CLI::IsMember({"none", "median", "percentile"}))
      ->capture_default_str();
  add_checked_option(tune, "--percentile", a.pruner.percentile,
                     "percentile pruner: keep trials in the top PERCENT at each epoch", CLI::Range(0.0, 100.0));
  add_checked_option(tune, "--n-startup-trials", a.pruner.n_startup_trials,
                     "pruner: no pruning until this many trials completed", kNonNegative);
  add_checked_option(tune, "--n-warmup-steps", a.pruner.n_warmup_steps,
                     "pruner: no pruning before this epoch (0-based, as reported)", kNonNegative);
  add_checked_option(tune, "--interval-steps", a.pruner.interval_steps,
                     "pruner: check every this many epochs after the warm-up", kPositive);
  add_checked_option(tune, "--n-min-trials", a.pruner.n_min_trials,
                     "pruner: no pruning at an epoch fewer completed trials reached", kPositive);
}

// tensorhub tune results: the trials of a stored search, best first.
void add_results_command(CLI::App& tune) {
  auto* results = tune.add_subcommand("results", "trials of a stored search, best first");
  auto r = std::make_shared<ResultsArgs>();
  add_hub_options(*results, r->hub);
  results->add_option("--name", r->name, "search name")->capture_default_str();
  results->add_option("--top", r->top, "show only the best N trials (0: all)")->capture_default_str();
  results->add_flag("--json", r->json, "print as JSON");
  results->add_flag("--pareto", r->pareto,
                    "only the Pareto front of a search of several objectives (with --json: its trials)");
  results->callback([r] {
    open_hub(r->hub, OpenMode::kReadOnly);  // a mistyped --hub is an error, not a new empty hub
    SearchSummary s = load_search_summary(r->hub.hub, r->hub.project, r->name);
    if (!r->pareto) return print_summary(s, r->top, r->json);
    if (!r->json) return print_pareto_front(s);
    s.trials = s.pareto_front;
    std::cout << s.to_json().dump(2) << std::endl;
  });
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", torch_command_description("tune"));
  tune->require_subcommand(0, 1);
  auto a = std::make_shared<TuneArgs>();
  add_hub_options(*tune, a->hub);
  tune->add_option("--name", a->name, "search name; the same name resumes a stopped search")->capture_default_str();
  tune->add_option("--space", a->space_file, "search space JSON file (Keras Tuner's Choice/Int/Float/Boolean/Fixed)");
  tune->add_option("--oracle", a->oracle, "grid | random | hyperband | bayesian | asha | nsga2 | pbt")
      ->check(CLI::IsMember({"grid", "random", "hyperband", "bayesian", "asha", "nsga2", "pbt"}))
      ->capture_default_str();
  tune->add_option("--objective", a->objective,
                   "metric to optimise, name:min|max (direction inferred for *loss and *accuracy); several, "
                   "comma-separated (val_accuracy:max,predict_ms:min), search for their Pareto front")
      ->capture_default_str();
  tune->add_option("--spec", a->spec_file, "trial as a spec task (JSON file, ${name} placeholders)");
  tune->add_option("command", a->command, "trial as a command after --, each word one argument (-- ./train --units {units}); {name} is "
                  "replaced by the value. For shell syntax write -- sh -c '...' and use \"$TENSORHUB_HP_name\" "
                  "inside it ({name} placeholders are refused there)");
  tune->add_option("--task-name", a->task_name, "task name of the trials (runners claim by it)")->capture_default_str();
  add_oracle_options(*tune, *a);
  add_pruner_options(*tune, *a);
  add_checked_option(*tune, "--parallel", a->parallel, "trials pending or running at once", kPositive);
  add_checked_option(*tune, "--max-retries", a->max_retries, "retries of a failed trial", kNonNegative);
  add_checked_option(*tune, "--max-consecutive-failures", a->max_consecutive_failures,
                     "stop the search after this many failed trials in a row (0: never)", kNonNegative);
  add_checked_option(*tune, "--timeout", a->timeout_s, "seconds per trial attempt before it is killed (0: none)",
                     kNonNegative);
  add_checked_option(*tune, "--poll", a->poll_s, "seconds between reads of the queue", kPositive);
  add_checked_option(*tune, "--lease", a->lease_s,
                     "seconds this tuner's hold on the search lasts unrenewed: a second tuner is refused while "
                     "it runs, and resumes the search this long after it was killed",
                     kPositive);
  add_task_resource_options(*tune, a->resources, "each trial");
  tune->add_flag("--overwrite", a->overwrite, "delete a stored search of this name and start anew");
  tune->add_flag("--json", a->json, "print the final summary as JSON, no live table");
  add_log_level_option(*tune, a->log_level);

  add_results_command(*tune);

  tune->callback([tune, a] {
    if (tune->got_subcommand("results")) return;
    if (a->space_file.empty()) throw UsageError("--space FILE is required (or use `tensorhub tune results`)");
    if (const int code = run_tune(*a); code != 0) {
      std::cout.flush();
      std::exit(code);
    }
  });
}

}  // namespace tensorhub
