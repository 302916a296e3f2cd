// The commands that load libtorch and their descriptions, shared by `tensorhub` (which lists
// them and hands them over) and `tensorhub-torch` (which runs them), so --help reads the same.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "commands.h"

namespace tensorhub {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> words;
  return words;
}

}  // namespace

const std::vector<TorchCommand>& torch_commands() {
  static const std::vector<TorchCommand> commands = {
      {"serve",
       "serve models over TensorFlow Serving's REST and gRPC APIs (flags as TF Serving's): from --model_base_path "
       "(<base>/<version>/ directories), --model_config_file, or the best model of a hub query (--hub_model, --hub)",
       false},
      {"tune", "hyperparameter search: trials go on the queue as tasks, runners anywhere train them", false},
      {"train-spec",
       "train a declarative spec (model, data, fit, callbacks; see docs/spec-format.md): what a runner "
       "runs for spec tasks. Prints the results as JSON and, under a runner, stores them as the task's result.",
       false},
      {"embed",
       "write a layer's outputs on a hub dataset's first examples as a TensorBoard projector embedding (labels as "
       "metadata, a sprite for images)",
       false},
      {"ui", "serve the web dashboard of a project: tasks, models (read only unless --allow-cancel)", false},
      {"fork-server", "a runner's fork server for spec tasks (started by `tensorhub runner`)", true},
  };
  return commands;
}

const char* torch_command_description(const std::string& name) {
  for (const auto& c : torch_commands())
    if (name == c.name) return c.description;
  throw Internal("no libtorch command named " + name);
}

std::string torch_binary() { return executable_dir() + "/tensorhub-torch"; }

void remember_command_line(int argc, char** argv) {
  command_line().assign(argv, argv + argc);
}

void exec_torch_binary() {
  const std::string path = torch_binary();
  std::vector<char*> args;
  for (auto& w : command_line()) args.push_back(w.data());
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  throw Unavailable("cannot run " + path + " (the part of tensorhub that loads libtorch): " + std::strerror(errno) +
                    "; it is built and installed beside tensorhub (scripts/build tensorhub-torch)");
}

}  // namespace tensorhub
