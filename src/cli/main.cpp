// tensorhub: the command line of the hub, the queue, runners and the demo.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/backend.h"
#include "tensorhub/train/model.h"

namespace tensorhub::cli {

void add_hub_options(CLI::App& cmd, HubOptions& opt) {
  const char* uri = std::getenv("TENSORHUB_URI");
  const char* project = std::getenv("TENSORHUB_PROJECT");
  opt.hub = uri && *uri ? uri : default_hub_uri();
  opt.project = project && *project ? project : "default";
  cmd.add_option("--hub", opt.hub, "hub URI: sqlite:///abs/path/hub.db or postgresql://user:password@host:5432/db (env TENSORHUB_URI)")
      ->capture_default_str();
  cmd.add_option("--project", opt.project, "project name isolating experiments (env TENSORHUB_PROJECT)")
      ->capture_default_str();
}

nlohmann::json parse_filter(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidArgument("--filter is not valid JSON (" + std::string(e.what()) +
                          "); example: --filter '{\"test_accuracy\": {\"$gte\": 0.8}}'");
  }
}

std::string executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

}  // namespace tensorhub::cli

int main(int argc, char** argv) {
  // The model server multiplies matrices: make OpenBLAS use this CPU's fast kernels (it
  // re-executes the program once if Debian's OpenBLAS fell back to its generic ones).
  // The same for the trainer of spec tasks.
  if (argc > 1 && (std::string(argv[1]) == "serve" || std::string(argv[1]) == "train-spec"))
    tensorhub::train::reexec_for_fast_blas(argv);
  CLI::App app{"tensorhub: datasets, models, logs and a task queue in one database; runners train, "
               "the best model wins."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tensorhub 0.1.0");
  tensorhub::cli::add_document_commands(app);
  tensorhub::cli::add_task_commands(app);
  tensorhub::cli::add_runner_command(app);
  tensorhub::cli::add_demo_command(app);
  tensorhub::cli::add_serve_command(app);
  tensorhub::cli::add_tune_command(app);
  tensorhub::cli::add_train_spec_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tensorhub::Error& e) {
    std::cerr << "tensorhub: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tensorhub: unexpected error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
