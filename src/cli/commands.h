// The tensorhub command line: each add_*_command registers one subcommand on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// A command line that cannot work as given: a flag's value is malformed, or a required
/// choice is missing. main() prints it with a pointer to --help and exits 2, as for CLI11's
/// own parse errors; every other error exits 1.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ErrorKind::kInvalidArgument, message) {}
};

/// Options every hub command shares: where the hub is and which project.
struct HubFlags {
  std::string hub;       ///< --hub, default $TENSORHUB_URI or sqlite:///<cwd>/tensorhub.db
  std::string project;   ///< --project, default $TENSORHUB_PROJECT or "default"
};

/// Adds --hub and --project to `cmd`, filled into `opt`. The help shows the default hub with
/// its password masked.
void add_hub_options(CLI::App& cmd, HubFlags& opt);

/// Adds --hub and --project to the main app too, so that they may come before the command
/// (`tensorhub --project p task list`) as well as after it. Call once, after every command
/// is added: each command with its own --hub/--project takes the main app's value unless
/// it is given again after the command.
void add_global_hub_options(CLI::App& app);

/// Checks what the user typed for the hub before anything is opened or made: throws
/// UsageError (exit 2) for an empty project or a --hub that is not a sqlite:// or
/// postgresql:// URI. open_hub calls it; commands that create call it before other work.
void check_hub_options(const HubFlags& opt);

/// Opens the hub of `opt` (after check_hub_options). OpenMode::kExisting (commands that change
/// what is there: delete, cancel) and OpenMode::kReadOnly (commands that only read: list, show,
/// fetch) create nothing: where there is no hub it throws NotFound saying so and how to make
/// one. kCreate and kExisting on a hub this user may not write throw FailedPrecondition at once
/// ("the hub ... is read-only (...): ...").
Hub open_hub(const HubFlags& opt, OpenMode mode);

/// Opens the hub of `opt` for a command that reads it and, where this user may write the hub,
/// also does a reader's upkeep (task wait reaps expired leases): OpenMode::kExisting, or
/// OpenMode::kReadOnly when the hub is read-only here (saying so on stderr, with what a
/// read-only reader leaves undone). Throws what open_hub throws.
Hub open_hub_to_read(const HubFlags& opt);

/// Parses a --filter argument (empty: {}). Throws UsageError with the JSON parser's message
/// and position for text that is not JSON, or for JSON that is not an object.
nlohmann::json parse_filter(const std::string& text);

/// Parses JSON of any type given as `what` (e.g. "--space file 'x.json'"). Throws UsageError
/// naming `what`, with the parser's own message (what it read, line and column).
nlohmann::json parse_json_text(const std::string& text, const std::string& what);

/// Parses the JSON object given to `flag` (e.g. "--tags", or "--spec file x.json" for a
/// file's content). Throws UsageError naming `flag`, with the parser's own message (what it
/// read, line and column) for invalid JSON, or the value's type when it is not an object.
nlohmann::json parse_json_object(const std::string& text, const std::string& flag);

/// Parses --sort text ("test_accuracy:-1,time:-1"). Throws UsageError for a bad direction.
SortSpec parse_sort_flag(const std::string& text);

/// Warns on stderr for each key of `sort` that `has_key(key)` says no stored item has, e.g.
/// a misspelt `--sort test_acuracy:-1`: such a key leaves the order unchanged, silently.
/// Keys the hub always stores (id, time, ...) are not checked.
void warn_unknown_sort_keys(const SortSpec& sort, const std::function<bool(const std::string&)>& has_key,
                            const std::string& items);

/// Warns on stderr for each top-level field of `filter` that `has_key(field)` says no stored
/// item has, e.g. a misspelt `--filter '{"stauts": "failed"}'`, which matches nothing.
/// Operators ($and, ...) and fields the hub always stores (id, time, ...) are not checked.
void warn_unknown_filter_keys(const nlohmann::json& filter, const std::function<bool(const std::string&)>& has_key,
                              const std::string& items);

/// Warns on stderr when the hub's project holds nothing at all (no task, dataset, model, log
/// or trial): an empty listing then most likely means a mistyped --project, e.g. "Default".
void warn_if_project_empty(Hub& hub);

void add_document_commands(CLI::App& app);  // dataset, model, log
/// Adds `alias set|delete|list|history` to the `model` command (model_alias_commands.cpp).
void add_model_alias_commands(CLI::App& model);
/// Adds `import` (an MNIST-format IDX directory as a dataset) to the `dataset` command.
void add_dataset_import_command(CLI::App& dataset);
/// Adds `save` and `fetch` to the `dataset` and `model` commands (files <-> the hub; after
/// add_document_commands has made those commands).
void add_save_fetch_commands(CLI::App& app);
void add_task_commands(CLI::App& app);      // task create|list|show|wait|cancel|delete|report-epoch
void add_hub_command(CLI::App& app);        // hub init|compact
void add_user_commands(CLI::App& app);      // user add|list|delete: the dashboard's logins
void add_runner_command(CLI::App& app);     // runner
/// slurm submit|scale|status: runners as Slurm job arrays (slurm_commands.cpp).
void add_slurm_command(CLI::App& app);
/// slurm status, on the `slurm` command (slurm_status_command.cpp).
void add_slurm_status_command(CLI::App& slurm);
/// demo: starts runners and examples/database's dispatcher, whose task program trains (the
/// command itself needs no libtorch).
void add_demo_command(CLI::App& app);

// ---- the commands that load libtorch --------------------------------------------------------
// Loading libtorch costs a process ~0.6 s and ~170 MB, which a task reporting its epochs with
// `tensorhub task report-epoch` or a `task list` should not pay. So there are two programs:
// `tensorhub` links no libtorch and runs every other command; `tensorhub-torch`, beside it,
// is the whole command line. `tensorhub` lists the libtorch commands in --help and hands their
// command line over to tensorhub-torch unchanged (exec), so users only ever type `tensorhub`.

/// A command whose code needs libtorch, with the description its --help shows.
struct TorchCommand {
  const char* name;
  const char* description;
  bool hidden;  ///< internal (not listed in --help)
};

/// serve, tune, train-spec, ui, fork-server.
const std::vector<TorchCommand>& torch_commands();
/// The description of torch command `name` (one of torch_commands()).
const char* torch_command_description(const std::string& name);

/// Registers the libtorch commands on `app`: their code in tensorhub-torch; in `tensorhub`,
/// stubs that hand the whole command line over to tensorhub-torch.
void add_torch_commands(CLI::App& app);
/// The --version text: version, commit, and (tensorhub-torch) the libraries in use.
std::string version_text();
/// Checks a spec task's spec as a runner will (parse_train_spec, which builds the model to
/// validate it): throws InvalidArgument naming the field. In `tensorhub` it hands the
/// command line over to tensorhub-torch, which checks and goes on.
void check_train_spec(const nlohmann::json& spec, const nlohmann::json& hyper_parameters);
/// tensorhub-torch beside this executable (runners start spec tasks and the fork server with it).
std::string torch_binary();
/// Keeps the command line as typed, for handing it over to tensorhub-torch. main() calls it first.
void remember_command_line(int argc, char** argv);
/// What main() does before parsing: tensorhub-torch makes OpenBLAS use this CPU's fast
/// kernels for the commands that compute (re-executing itself once if needed); `tensorhub` nothing.
void before_command(int argc, char** argv);
/// Replaces this process by tensorhub-torch with the command line as typed. Throws
/// Unavailable naming the path when it cannot be run.
[[noreturn]] void exec_torch_binary();

// The libtorch commands' own registrations (tensorhub-torch only).
void add_serve_command(CLI::App& app);      // serve
void add_tune_command(CLI::App& app);       // tune, tune results
void add_train_spec_command(CLI::App& app); // train-spec (the trainer of spec tasks)
void add_ui_command(CLI::App& app);         // ui (the web dashboard)
void add_embed_command(CLI::App& app);      // embed (a layer's outputs for the projector)
void add_fork_server_command(CLI::App& app); // fork-server (hidden: a runner's fork server)

/// The whole command line: parses argv (argv[0] the program) and runs the command; returns the
/// exit status (0 done, 1 failed, 2 usage error). main() and the fork server's tasks call it.
int run_cli(int argc, char** argv);

/// Directory of the running tensorhub executable (to find dispatch_tasks, task_script).
std::string executable_dir();

/// "52.4 MB", "812 kB", "96 B": a byte count for people.
std::string format_bytes(std::int64_t bytes);

}  // namespace tensorhub
