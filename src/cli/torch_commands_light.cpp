// `tensorhub` without libtorch: the libtorch commands as stubs that hand the command line over
// to tensorhub-torch (commands.h explains why there are two programs).
#include "commands.h"

namespace tensorhub {

namespace {

// The command word of a command line: the first word that is not an option, skipping the
// values of the main app's --hub and --project ("" when there is none, e.g. --help).
std::string command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--hub" || word == "--project") {
      ++i;
      continue;
    }
    if (word.starts_with("-")) continue;
    return word;
  }
  return "";
}

}  // namespace

void add_torch_commands(CLI::App& app) {
  // Listed for --help and unknown-command messages; before_command hands them over before
  // any parsing, so every word after the command (--help included) is tensorhub-torch's.
  for (const auto& c : torch_commands()) {
    CLI::App* stub = app.add_subcommand(c.name, c.description);
    if (c.hidden) stub->group("");
    stub->allow_extras();
    stub->callback([] { exec_torch_binary(); });
  }
}

void before_command(int argc, char** argv) {
  const std::string command = command_word(argc, argv);
  for (const auto& c : torch_commands())
    if (command == c.name) exec_torch_binary();
}

std::string version_text() {
  // The libraries in use are libtorch's to say.
  exec_torch_binary();
}

void check_train_spec(const nlohmann::json&, const nlohmann::json&) {
  // Nothing was written yet: tensorhub-torch runs the same command, checks the spec and goes on.
  exec_torch_binary();
}

}  // namespace tensorhub
