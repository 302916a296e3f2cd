// The tensorhub command line: each add_*_command registers one subcommand on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include <nlohmann/json.hpp>

namespace tensorhub::cli {

/// Options every hub command shares: where the hub is and which project.
struct HubOptions {
  std::string hub;       ///< --hub, default $TENSORHUB_URI or sqlite:///<cwd>/tensorhub.db
  std::string project;   ///< --project, default $TENSORHUB_PROJECT or "default"
};

/// Adds --hub and --project to `cmd`, filled into `opt`.
void add_hub_options(CLI::App& cmd, HubOptions& opt);

/// Parses a --filter argument. Throws InvalidArgument with the JSON parser's message.
nlohmann::json parse_filter(const std::string& text);

void add_document_commands(CLI::App& app);  // dataset, model, log
/// Adds `import` (an MNIST-format IDX directory as a dataset) to the `dataset` command.
void add_dataset_import_command(CLI::App& dataset);
void add_task_commands(CLI::App& app);      // task create|list|show|wait|cancel|delete
void add_runner_command(CLI::App& app);     // runner
void add_demo_command(CLI::App& app);       // demo
void add_serve_command(CLI::App& app);      // serve
void add_tune_command(CLI::App& app);       // tune, tune results
void add_train_spec_command(CLI::App& app); // train-spec (the trainer of spec tasks)

/// Directory of the running tensorhub executable (to find dispatch_tasks, task_script).
std::string executable_dir();

}  // namespace tensorhub::cli
