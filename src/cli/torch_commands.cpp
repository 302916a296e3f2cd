// tensorhub-torch: the libtorch commands themselves (commands.h explains why there are two programs).
#include "commands.h"
#include "tensorhub/core/version.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/spec.h"


namespace tensorhub {

void add_torch_commands(CLI::App& app) {
  add_serve_command(app);
  add_tune_command(app);
  add_train_spec_command(app);
  add_ui_command(app);
  add_embed_command(app);
  add_fork_server_command(app);
}

void before_command(int argc, char** argv) {
  // The model server multiplies matrices: make OpenBLAS use this CPU's fast kernels (it
  // re-executes the program once if Debian's OpenBLAS fell back to its generic ones).
  // The same for the trainer of spec tasks and the fork server whose forks train them, and
  // for embed's forward pass.
  if (argc < 2) return;
  const std::string command = argv[1];
  if (command == "serve" || command == "train-spec" || command == "fork-server" || command == "embed")
    reexec_for_fast_blas(argv);
}

std::string version_text() {
  // The version, the commit built (cmake/version.cmake) and the libraries in use, which a
  // bug report needs: Debian's libtorch and whichever BLAS its alternatives chose.
  return std::string("tensorhub ") + kVersion + " (commit " + kGitCommit + ")\n" +
         runtime_libraries();
}

void check_train_spec(const nlohmann::json& spec, const nlohmann::json& hyper_parameters) {
  parse_train_spec(spec, hyper_parameters);
}

}  // namespace tensorhub
