// The batch script, squeue's lines, the scale rule and the submit command's checks: no cluster
// needed (the dry run submits nothing).
#include <gtest/gtest.h>

#include <limits>

#include "slurm_util.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/slurm.h"

namespace tensorhub::testing {
namespace {

const std::string kTensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";

SlurmJobOptions job() {
  SlurmJobOptions o;
  o.runners = 3;
  o.partition = "gpu";
  o.gres = "gpu:1";
  o.cpus_per_task = 2;
  o.mem = "8G";
  o.time = "1:00:00";
  o.grace_s = 45;
  o.output_dir = "/shared/out";
  o.program = "/opt/tensorhub/bin/tensorhub";
  o.hub_uri = "postgresql://u:pw@db:5432/hub";
  o.project = "my project";
  o.exit_when_idle_s = 30;
  o.runner_flags = {"--task-name", "train", "--slots", "2"};
  return o;
}

TEST(SlurmScript, HasEveryDirectiveAndExecsTheRunnerWithQuotedWords) {
  const std::string expected =
      "#!/bin/sh\n"
      "# Written by `tensorhub slurm submit`: each element of this job array is one tensorhub runner.\n"
      "#SBATCH --job-name=tensorhub-runner\n"
      "#SBATCH --array=0-2\n"
      "#SBATCH --signal=B:TERM@45\n"
      "#SBATCH --output=/shared/out/%x-%A_%a.out\n"
      "#SBATCH --no-requeue\n"
      "#SBATCH --partition=gpu\n"
      "#SBATCH --gres=gpu:1\n"
      "#SBATCH --cpus-per-task=2\n"
      "#SBATCH --mem=8G\n"
      "#SBATCH --time=1:00:00\n"
      "# The runner takes its cores, memory and GPUs from SLURM_CPUS_PER_TASK, SLURM_MEM_PER_NODE and\n"
      "# SLURM_JOB_GPUS, and records <SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID> as its job.\n"
      "exec '/opt/tensorhub/bin/tensorhub' 'runner' '--hub' 'postgresql://u:pw@db:5432/hub' '--project' "
      "'my project' '--exit-when-idle' '30' '--task-name' 'train' '--slots' '2'\n";
  EXPECT_EQ(slurm_batch_script(job()), expected);
}

TEST(SlurmScript, RunnerFlagsCannotEscapeTheirQuotes) {
  SlurmJobOptions o = job();
  o.runner_flags = {"--task-name", "x'; rm -rf / #"};
  const std::string script = slurm_batch_script(o);
  // shell_quote: ' becomes '\'' inside single quotes, so the whole value stays one word.
  EXPECT_NE(script.find(R"('--task-name' 'x'\''; rm -rf / #')"), std::string::npos) << script;
}

TEST(SlurmScript, RefusesValuesThatWouldStartAnotherDirective) {
  SlurmJobOptions o = job();
  o.partition = "debug\n#SBATCH --uid=0";
  expect_error([&] { slurm_batch_script(o); }, ErrorKind::kInvalidArgument, {"--partition", "character"});
  o = job();
  o.mem = "8 G";
  expect_error([&] { slurm_batch_script(o); }, ErrorKind::kInvalidArgument, {"--mem"});
  o = job();
  o.runners = 0;
  expect_error([&] { slurm_batch_script(o); }, ErrorKind::kInvalidArgument, {"--runners"});
  o = job();
  o.runner_flags = {"--hub", "sqlite:///x.db"};
  expect_error([&] { slurm_batch_script(o); }, ErrorKind::kInvalidArgument, {"--hub", "set by `tensorhub slurm`"});
  o = job();
  o.output_dir = "relative/out";
  expect_error([&] { slurm_batch_script(o); }, ErrorKind::kInvalidArgument, {"--output-dir", "absolute"});
}

TEST(SlurmCapacity, CountsOnlyTheGpuEntryOfGresAndReadsABareMemAsMiB) {
  SlurmJobOptions job;
  EXPECT_EQ(slurm_runner_capacity(job).cpus, 1);  // Slurm's default cpus per task
  EXPECT_EQ(slurm_runner_capacity(job).gpus, 0);
  EXPECT_EQ(slurm_runner_capacity(job).memory_bytes, std::numeric_limits<std::int64_t>::max());
  const std::vector<std::pair<std::string, int>> gres = {
      {"gpu:2", 2}, {"gpu:a100:4", 4}, {"gpu", 1}, {"gpu:a100", 1}, {"gpu:2,mps:100", 2}, {"mps:100,gpu:3", 3},
      {"mps:100", 0}};
  for (const auto& [text, gpus] : gres) {
    job.gres = text;
    EXPECT_EQ(slurm_runner_capacity(job).gpus, gpus) << text;
  }
  job.cpus_per_task = 4;
  job.mem = "512";  // Slurm: MiB
  EXPECT_EQ(slurm_runner_capacity(job).cpus, 4);
  EXPECT_EQ(slurm_runner_capacity(job).memory_bytes, 512LL << 20);
  job.mem = "16G";
  EXPECT_EQ(slurm_runner_capacity(job).memory_bytes, 16LL << 30);
  job.mem = "lots";
  try {
    slurm_runner_capacity(job);
    ADD_FAILURE() << "--mem lots was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.message().rfind("--mem: ", 0), 0u) << e.message();
  }
}

TEST(SlurmSqueue, ParsesArrayElementsAndPendingRanges) {
  // As squeue -h -r -o '%i|%A|%T|%N|%M|%r|%P' prints them (checked on Slurm 22.05).
  const auto jobs = parse_squeue_lines(
      "12_0|12|RUNNING|vm|0:07|None|debug\n"
      "12_1|13|PENDING||0:00|Resources|debug\n"
      "14|14|COMPLETING|vm|1:02|None|debug\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].job_id, "12_0");
  EXPECT_EQ(jobs[0].node, "vm");
  EXPECT_TRUE(jobs[0].running());
  EXPECT_TRUE(jobs[1].pending());
  EXPECT_FALSE(jobs[1].running());
  EXPECT_EQ(jobs[1].reason, "Resources");
  EXPECT_TRUE(jobs[2].running());
  expect_error([] { parse_squeue_lines("12_0|12|RUNNING\n"); }, ErrorKind::kUnavailable, {"7 fields", "12_0"});
}

TEST(SlurmScale, SubmitsForUncoveredPendingTasksUpToTheMaximum) {
  // 10 pending, nothing queued or running: min(10, max 3) = 3.
  auto d = decide_slurm_scale(10, 0, 0, 0, 3);
  EXPECT_EQ(d.submit, 3);
  EXPECT_EQ(d.reason, "10 tasks pending that fit, 0 running; runner jobs: 0 queued, 0 running (0 idle): submitting 3");
  // 3 pending, 1 queued job, 2 running jobs of which 1 is busy (1 running task): 3 - 1 - 1 = 1.
  d = decide_slurm_scale(3, 1, 1, 2, 8);
  EXPECT_EQ(d.submit, 1);
  // At the maximum: none, and it says so.
  d = decide_slurm_scale(7, 3, 0, 3, 3);
  EXPECT_EQ(d.submit, 0);
  EXPECT_NE(d.reason.find("at --max-runners 3"), std::string::npos) << d.reason;
  // Drained: none.
  d = decide_slurm_scale(0, 0, 0, 2, 3);
  EXPECT_EQ(d.submit, 0);
  EXPECT_NE(d.reason.find("nothing waits"), std::string::npos) << d.reason;
  // None fits the submitted shape, but 2 bigger ones wait: it says so rather than "nothing waits".
  d = decide_slurm_scale(0, 0, 0, 0, 3, 2);
  EXPECT_EQ(d.submit, 0);
  EXPECT_EQ(d.reason,
            "0 tasks pending that fit, 0 running; runner jobs: 0 queued, 0 running (0 idle): submitting none (2 pending "
            "tasks ask for more than a runner of this shape has: --cpus-per-task, --gres gpu:K, --mem)");
  // Queued runners already cover the pending tasks.
  d = decide_slurm_scale(2, 0, 2, 0, 5);
  EXPECT_EQ(d.submit, 0);
  EXPECT_NE(d.reason.find("cover"), std::string::npos) << d.reason;
}

TEST(SlurmSubmitCommand, DryRunPrintsTheScriptWithAnAbsoluteHubAndSubmitsNothing) {
  TempDir dir;
  // A relative SQLite path, taken from the working directory: the script names it absolute.
  const CliRun run = run_process({"/bin/sh", "-c",
                                  // The project is the default one only without the user's TENSORHUB_PROJECT.
                                  "unset TENSORHUB_PROJECT TENSORHUB_URI; cd " + shell_quote(dir.path().string()) +
                                      " && exec " + shell_quote(kTensorhub) +
                                      " slurm submit --runners 2 --dry-run --hub sqlite://rel.db --output-dir out "
                                      "--time 5 -- --slots 1"},
                                 {{"PATH", "/nonexistent"}});  // no sbatch: the dry run must not need it
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string abs_hub = "sqlite://" + (dir.path() / "rel.db").string();
  EXPECT_NE(run.out.find("#SBATCH --array=0-1\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("#SBATCH --time=5\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("#SBATCH --output=" + (dir.path() / "out").string() + "/%x-%A_%a.out\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("exec '" + kTensorhub + "' 'runner' '--hub' '" + abs_hub +
                         "' '--project' 'default' '--exit-when-idle' '30' '--slots' '1'\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("relative SQLite path"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out")) << "a dry run writes nothing";
}

TEST(SlurmSubmitCommand, DryRunMasksTheHubPassword) {
  const CliRun run = run_process({kTensorhub, "slurm", "submit", "--runners", "1", "--dry-run", "--hub",
                                  "postgresql://u:secret@db:5432/hub", "--output-dir", "/tmp/x"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("secret"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("postgresql://u:***@db:5432/hub"), std::string::npos) << run.out;
  // A password with a space or a quote is split by the script's shell quoting: masked whole.
  for (const std::string password : {"pa ss", "it's"}) {
    const CliRun quoted = run_process({kTensorhub, "slurm", "submit", "--runners", "1", "--dry-run", "--hub",
                                       "postgresql://u:" + password + "@db:5432/hub", "--output-dir", "/tmp/x"});
    ASSERT_EQ(quoted.exit_code, 0) << quoted.err;
    EXPECT_EQ(quoted.out.find("u:pa"), std::string::npos) << quoted.out;
    EXPECT_EQ(quoted.out.find("u:it"), std::string::npos) << quoted.out;
    EXPECT_NE(quoted.out.find("'postgresql://u:***@db:5432/hub'"), std::string::npos) << quoted.out;
  }
}

TEST(SlurmSubmitCommand, BadFlagsAreUsageErrors) {
  CliRun run = run_process({kTensorhub, "slurm", "submit", "--runners", "2", "--dry-run", "--partition", "a b",
                            "--hub", "sqlite:///tmp/x.db"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--partition \"a b\""), std::string::npos) << run.err;
  run = run_process({kTensorhub, "slurm", "submit", "--runners", "0", "--dry-run"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--runners"), std::string::npos) << run.err;
  run = run_process({kTensorhub, "slurm", "submit", "--runners", "1", "--dry-run", "--hub", "sqlite:///tmp/x.db", "--",
                     "--exit-when-idle", "5"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--exit-when-idle is set by `tensorhub slurm` itself"), std::string::npos) << run.err;
  // --mem passes the #SBATCH character check but is no size: refused here, not by sbatch later.
  run = run_process({kTensorhub, "slurm", "submit", "--runners", "1", "--dry-run", "--hub", "sqlite:///tmp/x.db",
                     "--mem", "-1"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--mem: memory size \"-1"), std::string::npos) << run.err;
  // An empty --output-dir was an "unexpected error: filesystem error" with exit status 1.
  run = run_process({kTensorhub, "slurm", "submit", "--runners", "1", "--dry-run", "--hub", "sqlite:///tmp/x.db",
                     "--output-dir", ""});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--output-dir must not be empty"), std::string::npos) << run.err;
}

TEST(SlurmSubmitCommand, MissingSbatchIsNamedAndNothingIsSubmitted) {
  TempDir dir;
  const CliRun run = run_process({kTensorhub, "slurm", "submit", "--runners", "2", "--hub",
                                  "sqlite://" + (dir.path() / "hub.db").string(), "--output-dir",
                                  (dir.path() / "out").string()},
                                 {{"PATH", (dir.path() / "empty").string()}});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("sbatch not found on PATH"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("Slurm's client commands must be installed"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "") << "no job id printed";
}

}  // namespace
}  // namespace tensorhub::testing
