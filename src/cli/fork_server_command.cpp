// tensorhub fork-server: a runner's fork server (queue/fork_server.h). Hidden from --help: a
// runner starts it with the socket as fd 3; each task it forks runs this program's command
// line with the task's argv (normally `tensorhub train-spec`), libtorch already loaded.
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "tensorhub/queue/fork_server.h"

namespace tensorhub {

void add_fork_server_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("fork-server", torch_command_description("fork-server"));
  cmd->group("");  // internal: not listed in --help
  cmd->callback([]() {
    const int code = serve_fork_requests(3, [](const std::vector<std::string>& args) {
      std::vector<std::string> copy = args;
      std::vector<char*> argv;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      return run_cli(static_cast<int>(copy.size()), argv.data());
    });
    std::exit(code);
  });
}

}  // namespace tensorhub
