// tensorhub: the command line of the hub, the queue, runners and the demo. Built twice: as
// `tensorhub` without libtorch and as `tensorhub-torch` with it (commands.h says why).
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>

#include "commands.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/backend.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

// The JSON parser's own message without its "[json.exception.parse_error.101] " prefix:
// "parse error at line 1, column 2: syntax error while parsing object key - ...".
std::string parser_message(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (what.starts_with("[json.exception.")) {
    const auto close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
  }
  return what;
}

std::string json_type_article(const nlohmann::json& j) {
  const std::string type = j.type_name();
  return (type == "array" || type == "object" ? "an " : "a ") + type;
}

// The main app's --hub and --project, given before the command.
struct GlobalHubOptions {
  std::string hub, project;
  CLI::Option* hub_option = nullptr;
  CLI::Option* project_option = nullptr;
};

// Makes `cmd` and its subcommands take the main app's --hub/--project when given, unless
// given again after the command, and lets options they lack fall through to the main app.
void inherit_global_options(CLI::App& cmd, const GlobalHubOptions& global) {
  cmd.fallthrough();
  CLI::Option* own_hub = cmd.get_option_no_throw("--hub");
  CLI::Option* own_project = cmd.get_option_no_throw("--project");
  if (own_hub || own_project) {
    // Runs when the command's word is reached, after the options before it were parsed.
    // The main app's bound strings are only set when the whole parse ends: read its results.
    cmd.preparse_callback([&global, own_hub, own_project](std::size_t) {
      // The help shows the default: the hub's password masked, as everywhere else.
      if (own_hub && global.hub_option->count() > 0) {
        const auto hub = global.hub_option->as<std::string>();
        own_hub->run_callback_for_default()->default_val(hub)->default_str(mask_passwords(hub));
      }
      if (own_project && global.project_option->count() > 0)
        own_project->run_callback_for_default()->default_val(global.project_option->as<std::string>());
    });
  }
  for (CLI::App* sub : cmd.get_subcommands([](CLI::App*) { return true; })) inherit_global_options(*sub, global);
}

// For a parse error: "tensorhub task: unknown command 'lst'; ..." when a word where a command
// belongs names none, so the error says which word was wrong. Nothing otherwise.
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "tensorhub";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return std::nullopt;
    if (word.size() > 1 && word[0] == '-') {
      if (word.find('=') != std::string::npos) continue;
      const CLI::Option* opt = nullptr;
      for (CLI::App* a = cur; a && !opt; a = a->get_parent()) opt = a->get_option_no_throw(word);
      if (opt && opt->get_items_expected_min() > 0) ++i;  // its value
      continue;
    }
    const auto subs = cur->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;  // a leaf command: the word is its argument
    CLI::App* next = nullptr;
    for (CLI::App* s : subs)
      if (s->check_name(word)) next = s;
    if (next) {
      cur = next;
      path += " " + next->get_name();
      continue;
    }
    for (const CLI::Option* o : cur->get_options())
      if (o->get_positional()) return std::nullopt;  // the word may be the command's argument
    std::string names;
    for (CLI::App* s : subs) names += (names.empty() ? "" : ", ") + s->get_name();
    return path + ": unknown command '" + word + "'; the commands are: " + names + " (see `" + path + " --help`)";
  }
  return std::nullopt;
}

}  // namespace

void add_hub_options(CLI::App& cmd, HubFlags& opt) {
  const char* uri = std::getenv("TENSORHUB_URI");
  const char* project = std::getenv("TENSORHUB_PROJECT");
  opt.hub = uri && *uri ? uri : default_hub_uri();
  // An empty TENSORHUB_PROJECT is an error (open_hub says so), as an empty --project is.
  opt.project = project ? project : "default";
  cmd.add_option("--hub", opt.hub, "hub URI: sqlite:///abs/path/hub.db or postgresql://user:password@host:5432/db (env TENSORHUB_URI)")
      ->default_str(mask_passwords(opt.hub));
  cmd.add_option("--project", opt.project, "project name isolating experiments (env TENSORHUB_PROJECT)")
      ->capture_default_str();
}

void add_global_hub_options(CLI::App& app) {
  static GlobalHubOptions global;  // lives as long as the app's callbacks
  global.hub_option = app.add_option("--hub", global.hub,
                                     "hub URI for the command (it may also come after the command)");
  global.project_option = app.add_option("--project", global.project,
                                         "project for the command (it may also come after the command)");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) inherit_global_options(*sub, global);
}

void check_hub_options(const HubFlags& opt) {
  if (opt.project.empty())
    throw UsageError("a project name must not be empty (--project or TENSORHUB_PROJECT); leave both out for "
                     "the project \"default\"");
  const bool known = opt.hub.starts_with("sqlite://") || opt.hub.starts_with("postgresql://") ||
                     opt.hub.starts_with("postgres://");
  if (!known)
    throw UsageError("--hub \"" + mask_passwords(opt.hub) +
                     "\" is not a hub URI; use sqlite:///abs/path/hub.db or postgresql://user:password@host:5432/db");
  if (opt.hub.starts_with("sqlite://")) {
    try {
      sqlite_path_of_uri(opt.hub);
    } catch (const Error& e) {
      throw UsageError("--hub: " + e.message());
    }
  }
}

Hub open_hub(const HubFlags& opt, OpenMode mode) {
  check_hub_options(opt);
  try {
    return Hub(opt.hub, opt.project, mode);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    // The store says there is no hub at the URI; the command line says how to get one.
    throw NotFound(e.message() + ". Give the hub's URI with --hub (or TENSORHUB_URI); a new hub is made by "
                   "`tensorhub hub init`, `task create`, `dataset import` or `tune`");
  }
}

Hub open_hub_to_read(const HubFlags& opt) {
  try {
    return open_hub(opt, OpenMode::kExisting);
  } catch (const Error& e) {
    if (!is_read_only_error(e)) throw;
  }
  std::cerr << "tensorhub: note: the hub is read-only for this user: it is only read, and a running task whose "
               "runner died counts as running until a runner or a command that writes notices its lease ended"
            << std::endl;
  return open_hub(opt, OpenMode::kReadOnly);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(what + " is not valid JSON: " + parser_message(e));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range (1e999): nlohmann reports it as out_of_range.406.
    const std::string message = e.what();
    const auto bracket = message.find("] ");
    throw UsageError(what + " is not valid JSON: " +
                     (bracket == std::string::npos ? message : message.substr(bracket + 2)) +
                     " (numbers must fit a double, at most about 1.8e308)");
  }
}

nlohmann::json parse_json_object(const std::string& text, const std::string& flag) {
  const nlohmann::json j = parse_json_text(text, flag);
  if (!j.is_object())
    throw UsageError(flag + " must be a JSON object ({\"key\": value, ...}), got " + json_type_article(j) + ": " +
                     j.dump().substr(0, 200));
  return j;
}

nlohmann::json parse_filter(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  return parse_json_object(text, "--filter");
}

SortSpec parse_sort_flag(const std::string& text) {
  try {
    return parse_sort(text);
  } catch (const Error& e) {
    throw UsageError("--sort: " + e.message());
  }
}

void warn_unknown_sort_keys(const SortSpec& sort, const std::function<bool(const std::string&)>& has_key,
                            const std::string& items) {
  for (const auto& [key, direction] : sort) {
    if (key == "id" || key == "time" || key == "project_name") continue;
    if (!has_key(key))
      std::cerr << "tensorhub: warning: no " << items << " has the sort key \"" << key
                << "\", so it does not change the order (a typo?)" << std::endl;
  }
}

void warn_unknown_filter_keys(const nlohmann::json& filter, const std::function<bool(const std::string&)>& has_key,
                              const std::string& items) {
  for (auto it = filter.begin(); it != filter.end(); ++it) {
    const std::string& key = it.key();
    if (key.starts_with("$") || key == "id" || key == "time" || key == "project_name") continue;
    if (!has_key(key))
      std::cerr << "tensorhub: warning: no " << items << " has the field \"" << key
                << "\", so the filter matches nothing (a typo?)" << std::endl;
  }
}

void warn_if_project_empty(Hub& hub) {
  // find_tasks, not count_tasks: a warning must not reap leases (a write).
  if (!hub.project_empty() || !TaskQueue(hub).find_tasks(Json::object(), {}, 1).empty()) return;
  std::cerr << "tensorhub: warning: project \"" << hub.project_name() << "\" has no tasks, datasets, models or logs in this "
            << "hub (project names are case-sensitive; is --project or TENSORHUB_PROJECT right?)" << std::endl;
}

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

}  // namespace tensorhub

int tensorhub::run_cli(int argc, char** argv) {
  CLI::App app{"tensorhub: datasets, models, logs and a task queue in one database; runners train, "
               "the best model wins."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>(tensorhub::version_text));
  app.footer("Exit status: 0 done, 1 failed, 2 the command line is wrong (see the command's --help).");
  tensorhub::add_document_commands(app);
  tensorhub::add_task_commands(app);
  tensorhub::add_hub_command(app);
  tensorhub::add_user_commands(app);
  tensorhub::add_runner_command(app);
  tensorhub::add_slurm_command(app);
  tensorhub::add_demo_command(app);
  tensorhub::add_torch_commands(app);
  tensorhub::add_global_hub_options(app);
  using tensorhub::mask_passwords;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    if (const auto unknown = tensorhub::unknown_command(app, argc, argv)) {
      std::cerr << *unknown << std::endl;
      return 2;
    }
    std::cerr << "tensorhub: " << mask_passwords(e.what()) << "\nRun with --help for more information." << std::endl;
    return 2;
  } catch (const tensorhub::UsageError& e) {
    std::cerr << "tensorhub: " << mask_passwords(e.message()) << "\nRun with --help for more information." << std::endl;
    return 2;
  } catch (const tensorhub::Error& e) {
    // Messages mask passwords where they are made; this is the net for any that did not.
    // "NotFound: no hub at ..." reads as C++; the message alone says what was wrong.
    std::cerr << "tensorhub: " << mask_passwords(e.message()) << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tensorhub: unexpected error: " << mask_passwords(e.what()) << std::endl;
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  tensorhub::remember_command_line(argc, argv);
  tensorhub::before_command(argc, argv);
  return tensorhub::run_cli(argc, argv);
}
