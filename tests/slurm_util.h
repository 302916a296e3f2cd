// Helpers of the Slurm tests: a one-node cluster (scripts/slurm-cluster) and `tensorhub`
// runs with their stdout and stderr apart.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tensorhub/core/process.h"
#include "tensorhub/queue/slurm.h"
#include "test_util.h"

namespace tensorhub::testing {

/// The cluster the tests submit to: SLURM_CONF as scripts/test exports it (its
/// scripts/slurm-cluster start), or, when unset and slurmctld is installed, a cluster this
/// process starts itself and stops at exit (ctest run by hand). "" when there is none: the
/// reason is in slurm_skip_reason().
const std::string& slurm_conf();
/// Why the Slurm tests skip (slurm_conf() empty).
const std::string& slurm_skip_reason();

/// Skips the test, saying why, when there is no cluster.
#define TENSORHUB_REQUIRE_SLURM()                                          \
  do {                                                                     \
    if (::tensorhub::testing::slurm_conf().empty())                        \
      GTEST_SKIP() << ::tensorhub::testing::slurm_skip_reason();          \
  } while (0)

/// How a command ended and what it printed.
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

/// Runs `argv` (argv[0] a path or a name on PATH) with `env` added to this process's
/// environment, up to `timeout` (then killed: exit_code 137); stdout and stderr apart.
CliRun run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                   std::chrono::seconds timeout = std::chrono::seconds(60));

/// A job name no other test uses ("th-<pid>-<n>"), so that each test finds only its own jobs;
/// the test cancels them at its end (cancel_jobs).
std::string unique_job_name();

/// scancel --me -n NAME: ends every job of that name (a test's clean-up).
void cancel_jobs(const std::string& job_name);

}  // namespace tensorhub::testing
