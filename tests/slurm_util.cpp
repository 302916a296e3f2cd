#include "slurm_util.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tensorhub::testing {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool installed(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"})
    if (::access((std::string(dir) + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

// The cluster this process started (when SLURM_CONF was unset), stopped at exit.
struct OwnCluster {
  std::string dir;
  ~OwnCluster() {
    if (!dir.empty()) run_process({std::string(TENSORHUB_SOURCE_DIR) + "/scripts/slurm-cluster", "stop", dir});
  }
};

struct ClusterState {
  std::string conf, reason;
  OwnCluster own;
  ClusterState() {
    if (const char* c = std::getenv("SLURM_CONF"); c && *c) {
      conf = c;
      return;
    }
    if (!installed("slurmctld") || !installed("sbatch")) {
      reason = "Slurm tests need slurmctld, slurmd, sbatch and munged (Debian's slurm-wlm and munge; "
               "scripts/setup --test installs them, scripts/test starts the cluster)";
      return;
    }
    const CliRun start = run_process({std::string(TENSORHUB_SOURCE_DIR) + "/scripts/slurm-cluster", "start"}, {},
                                     std::chrono::seconds(90));
    if (start.exit_code != 0) {
      reason = "scripts/slurm-cluster start failed: " + start.err;
      ADD_FAILURE() << reason;  // installed but not starting: a failure, not a skip
      return;
    }
    // Its output is `export NAME=value` lines.
    std::istringstream lines(start.out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("export ")) continue;
      const auto eq = line.find('=');
      const std::string name = line.substr(7, eq - 7), value = line.substr(eq + 1);
      ::setenv(name.c_str(), value.c_str(), 1);
      if (name == "SLURM_CONF") conf = value;
      if (name == "TENSORHUB_SLURM_DIR") own.dir = value;
    }
  }
};

ClusterState& cluster() {
  static ClusterState state;
  return state;
}

}  // namespace

const std::string& slurm_conf() { return cluster().conf; }
const std::string& slurm_skip_reason() { return cluster().reason; }

CliRun run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                   std::chrono::seconds timeout) {
  TempDir dir;
  ProcessOptions options;
  options.env = env;
  options.output = dir / "stdout";
  options.error_output = dir / "stderr";
  options.append_output = false;
  Process p = Process::spawn(argv, options);
  CliRun run;
  const auto code = p.wait_for(timeout);
  if (code) {
    run.exit_code = *code;
  } else {
    p.stop(std::chrono::seconds(1));
    run.exit_code = 137;
  }
  run.out = read_all(dir / "stdout");
  run.err = read_all(dir / "stderr");
  return run;
}

std::string unique_job_name() {
  static std::atomic<int> n{0};
  return "th-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

void cancel_jobs(const std::string& job_name) {
  if (slurm_conf().empty()) return;
  run_process({"scancel", "--me", "-n", job_name});
}

}  // namespace tensorhub::testing
