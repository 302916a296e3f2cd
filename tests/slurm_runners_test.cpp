// Runners as Slurm job arrays on a real one-node cluster (scripts/slurm-cluster: munged,
// slurmctld, slurmd), on both backends: an array drains a queue, a cancelled element's task goes
// to another runner, an element at its time limit releases its task within its SIGTERM grace,
// scale submits for a queue and stops once it drains, and Slurm's own failures are shown.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "backend_factory.h"
#include "slurm_util.h"
#include "tensorhub/core/process.h"
#include "tensorhub/queue/task_queue.h"

namespace tensorhub::testing {
namespace {

using namespace std::chrono_literals;

const std::string kTensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::istringstream in(read_text(p));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return pred();
}

class SlurmRunners : public BackendTest {
 protected:
  void set_up() override {
    TENSORHUB_REQUIRE_SLURM();
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    queue_ = std::make_unique<TaskQueue>(*hub_);
  }
  void TearDown() override { cancel_jobs(job_name_); }

  // `tensorhub slurm submit` of `runners` runners of this test's job name; the array's id.
  std::string submit(int runners, const std::vector<std::string>& extra, double exit_when_idle_s) {
    std::vector<std::string> argv = {kTensorhub, "slurm", "submit", "--runners", std::to_string(runners), "--hub",
                                     db_->uri(), "--project", "p", "--job-name", job_name_, "--output-dir",
                                     out_dir(), "--exit-when-idle", std::to_string(exit_when_idle_s),
                                     "--mem", "200M"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const char* flag : {"--", "--no-fork-server", "--lease", "10", "--poll", "0.2"}) argv.push_back(flag);
    const CliRun run = run_process(argv);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::string id = run.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    EXPECT_TRUE(std::regex_match(id, std::regex("[0-9]+"))) << "job id: " << run.out;
    return id;
  }

  std::vector<SlurmJob> jobs() { return slurm_list_jobs(job_name_); }

  std::string out_dir() const { return (dir_.path() / "out").string(); }
  std::string marks() const { return (dir_.path() / "marks.txt").string(); }

  TempDir dir_;
  std::string job_name_ = unique_job_name();
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> queue_;
};

TaskSpec command_task(const std::string& command) {
  TaskSpec s;
  s.task_name = "slurm";
  s.command = command;
  return s;
}

TEST_P(SlurmRunners, AnArrayOfThreeDrainsTwentyTasksEachFinishedOnce) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(queue_->create_task(command_task(
        "echo $TENSORHUB_TASK_ID $SLURM_ARRAY_TASK_ID >> " + shell_quote(marks()))));
  const std::string job = submit(3, {}, 3);
  ASSERT_TRUE(eventually([&] { return queue_->count_tasks().finished == 20; }, 90s))
      << "finished " << queue_->count_tasks().finished << " of 20";
  // The runners exit after 3 s without a task, ending their elements.
  EXPECT_TRUE(eventually([&] { return jobs().empty(); }, 30s));
  // Every task ran exactly once (one line each), in its first attempt, in an element of the array.
  std::map<std::int64_t, int> runs;
  std::set<std::string> elements;
  for (const std::string& line : lines_of(marks())) {
    std::istringstream in(line);
    std::int64_t id = 0;
    std::string element;
    in >> id >> element;
    ++runs[id];
    elements.insert(element);
  }
  for (const std::int64_t id : ids) {
    EXPECT_EQ(runs[id], 1) << "task " << id;
    const Task t = queue_->get_task(id);
    EXPECT_EQ(t.status, TaskStatus::kFinished);
    EXPECT_EQ(t.attempt, 1) << "task " << id;
  }
  EXPECT_EQ(runs.size(), 20u);
  for (const std::string& e : elements) EXPECT_TRUE(e == "0" || e == "1" || e == "2") << e;
  // Each element was a runner: its output (named %x-%A_%a.out) holds the runner's log.
  for (int i = 0; i < 3; ++i) {
    const std::string out = read_text(out_dir() + "/" + job_name_ + "-" + job + "_" + std::to_string(i) + ".out");
    EXPECT_NE(out.find("[runner "), std::string::npos) << "element " << i << ": " << out;
    EXPECT_NE(out.find("idle for 3 s, exiting"), std::string::npos) << "element " << i << ": " << out;
  }
}

TEST_P(SlurmRunners, ScancelOfAnElementMidTaskSendsItsTaskToAnotherRunner) {
  // The first attempt sleeps long; the second (another element) finishes at once.
  const std::string m = shell_quote(marks());
  const std::int64_t id = queue_->create_task(command_task(
      "echo start $TENSORHUB_ATTEMPT $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID >> " + m +
      "; if [ $TENSORHUB_ATTEMPT = 1 ]; then sleep 60; fi; echo done $TENSORHUB_ATTEMPT $SLURM_ARRAY_TASK_ID >> " + m));
  submit(2, {}, 30);
  std::string holder;  // "<array job>_<index>" of the element running attempt 1
  ASSERT_TRUE(eventually([&] {
    for (const std::string& line : lines_of(marks())) {
      std::smatch g;
      if (std::regex_match(line, g, std::regex("start 1 ([0-9]+) ([0-9]+)"))) holder = g[1].str() + "_" + g[2].str();
    }
    return !holder.empty();
  }, 60s)) << read_text(marks());
  const CliRun cancel = run_process({"scancel", holder});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  ASSERT_TRUE(eventually([&] { return queue_->get_task(id).status == TaskStatus::kFinished; }, 60s))
      << read_text(marks());
  const Task t = queue_->get_task(id);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_EQ(t.failures, 0) << "a runner stopped by scancel releases its task; it is not a failed attempt: " << t.error;
  // Finished once, by the other element.
  const std::vector<std::string> lines = lines_of(marks());
  const auto done = std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("done"); });
  EXPECT_EQ(done, 1) << read_text(marks());
  const std::string other = holder.substr(holder.find('_') + 1) == "0" ? "1" : "0";
  EXPECT_NE(std::find(lines.begin(), lines.end(), "done 2 " + other), lines.end()) << read_text(marks());
}

TEST_P(SlurmRunners, AnElementAtItsTimeLimitReleasesItsTaskWithinItsGrace) {
  if (GetParam().name != "postgresql") GTEST_SKIP() << "a minute of waiting: run on the PostgreSQL hub only";
  const std::string m = shell_quote(marks());
  const std::int64_t id = queue_->create_task(command_task(
      "echo start $TENSORHUB_ATTEMPT >> " + m + "; if [ $TENSORHUB_ATTEMPT = 1 ]; then sleep 300; fi; echo done >> " + m));
  // --time 1 (minute) and --grace 20: slurmctld checks time limits every 30 s (PERIODIC_TIMEOUT)
  // and sends the warning at the first check with less than grace + 30 s left, so 10 to 40 s
  // after the start here (never before the runner has claimed the task); the runner stops the
  // task and releases it.
  const auto submitted = std::chrono::steady_clock::now();
  const std::string job = submit(1, {"--time", "1", "--grace", "20"}, 120);
  ASSERT_TRUE(eventually([&] { return lines_of(marks()).size() >= 1; }, 30s));
  ASSERT_TRUE(eventually([&] { return queue_->get_task(id).status == TaskStatus::kPending; }, 75s))
      << "the task was not released before the time limit";
  const double released_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  EXPECT_LT(released_after, 60.0) << "released only after the time limit (Slurm's own kill), not within the grace";
  Task t = queue_->get_task(id);
  EXPECT_EQ(t.attempt, 1);
  EXPECT_EQ(t.failures, 0) << t.error;
  const std::string out = read_text(out_dir() + "/" + job_name_ + "-" + job + "_0.out");
  EXPECT_NE(out.find("released to the queue"), std::string::npos) << out;
  // Another runner (a second array) takes it and finishes it.
  submit(1, {}, 2);
  ASSERT_TRUE(eventually([&] { return queue_->get_task(id).status == TaskStatus::kFinished; }, 60s));
  t = queue_->get_task(id);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_EQ(t.failures, 0);
  EXPECT_EQ(lines_of(marks()), (std::vector<std::string>{"start 1", "start 2", "done"}));
}

TEST_P(SlurmRunners, ScaleSubmitsForTenTasksAndNoneOnceDrained) {
  for (int i = 0; i < 10; ++i)
    queue_->create_task(command_task("sleep 1; echo $TENSORHUB_TASK_ID >> " + shell_quote(marks())));
  const std::string log = (dir_.path() / "scale.log").string();
  ProcessOptions options;
  options.output = log;
  Process scale = Process::spawn(
      {kTensorhub, "slurm", "scale", "--max-runners", "3", "--interval", "1", "--hub", db_->uri(), "--project", "p",
       "--job-name", job_name_, "--output-dir", out_dir(), "--exit-when-idle", "2", "--mem", "200M", "--",
       "--no-fork-server", "--poll", "0.2"},
      options);
  ASSERT_TRUE(eventually([&] { return queue_->count_tasks().finished == 10; }, 90s)) << read_text(log);
  // Drained: the runners exit when idle, and scale submits none after that.
  ASSERT_TRUE(eventually([&] { return jobs().empty(); }, 30s)) << read_text(log);
  std::this_thread::sleep_for(4s);  // several rounds of --interval 1 on an empty queue
  EXPECT_TRUE(jobs().empty()) << read_text(log);
  scale.signal(SIGINT);
  EXPECT_EQ(scale.wait_for(10s), std::optional<int>(0)) << read_text(log);
  const std::string text = read_text(log);
  // The first decision: 10 pending, nothing queued or running: 3 runners (the maximum).
  EXPECT_NE(text.find("scale: 10 tasks pending that fit, 0 running; runner jobs: 0 queued, 0 running (0 idle): "
                      "submitting 3: job "),
            std::string::npos)
      << text;
  // Never more than 3 at once; the last decision submits none since nothing waits.
  std::vector<std::string> decisions;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("scale: ") && line.find("pending that fit") != std::string::npos) decisions.push_back(line);
  ASSERT_FALSE(decisions.empty());
  EXPECT_NE(decisions.back().find("0 tasks pending that fit, 0 running; runner jobs: 0 queued, 0 running (0 idle): "
                                  "submitting none (nothing waits)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("scale: stopped"), std::string::npos) << text;
  EXPECT_EQ(lines_of(marks()).size(), 10u);
}

TEST_P(SlurmRunners, StatusListsEachElementWithItsTask) {
  const std::int64_t id = queue_->create_task(command_task("echo x >> " + shell_quote(marks()) + "; sleep 30"));
  const std::string job = submit(1, {}, 30);
  ASSERT_TRUE(eventually([&] { return queue_->get_task(id).status == TaskStatus::kRunning; }, 60s));
  // The runner registers with its job as <array job>_<index>; status joins it with squeue.
  Json rows;
  ASSERT_TRUE(eventually([&] {
    const CliRun run = run_process({kTensorhub, "slurm", "status", "--json", "--hub", db_->uri(), "--project", "p",
                                    "--job-name", job_name_});
    if (run.exit_code != 0) return false;
    rows = Json::parse(run.out);
    return rows.size() == 1 && rows[0]["tasks"].size() == 1;
  }, 30s)) << rows.dump();
  EXPECT_EQ(rows[0]["job"], job + "_0");
  EXPECT_EQ(rows[0]["state"], "RUNNING");
  EXPECT_EQ(rows[0]["tasks"][0], id);
  EXPECT_EQ(rows[0]["runner"], queue_->get_task(id).lease_owner);
}

INSTANTIATE_TEST_SUITE_P(Backends, SlurmRunners, ::testing::ValuesIn(backend_params()), backend_param_name);

// ---- Slurm's own failures: shown, nothing queued ------------------------------------------

class SlurmFaults : public ::testing::Test {
 protected:
  void SetUp() override { TENSORHUB_REQUIRE_SLURM(); }
  void TearDown() override { cancel_jobs(job_name_); }
  std::vector<std::string> submit_argv() {
    return {kTensorhub, "slurm", "submit", "--runners", "2", "--hub", "sqlite://" + (dir_.path() / "hub.db").string(),
            "--job-name", job_name_, "--output-dir", (dir_.path() / "out").string()};
  }
  TempDir dir_;
  std::string job_name_ = unique_job_name();
};

TEST_F(SlurmFaults, AFailingSbatchShowsItsStderrAndQueuesNothing) {
  std::vector<std::string> argv = submit_argv();
  argv.insert(argv.end(), {"--partition", "no_such_partition"});
  const CliRun run = run_process(argv);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("sbatch failed (exit 1): sbatch: error: invalid partition specified: no_such_partition"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_TRUE(slurm_list_jobs(job_name_).empty());
  // The script that was never queued is not left in the output directory.
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() / "out"));
}

TEST_F(SlurmFaults, UnreachableMungeIsNamedAndNothingIsQueued) {
  // The cluster's config with AuthInfo pointing at a socket no munged listens on: what sbatch
  // meets when munged is not running.
  std::string conf = read_text(slurm_conf());
  conf = std::regex_replace(conf, std::regex("AuthInfo=socket=[^\n]*"),
                            "AuthInfo=socket=" + (dir_.path() / "no-munged.socket").string());
  const std::string conf_path = (dir_.path() / "slurm.conf").string();
  std::ofstream(conf_path) << conf;
  const CliRun run = run_process(submit_argv(), {{"SLURM_CONF", conf_path}}, 120s);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("sbatch failed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("is munged running"), std::string::npos) << run.err;
  EXPECT_TRUE(slurm_list_jobs(job_name_).empty());
  // The same for squeue, through `slurm status`.
  const CliRun status = run_process({kTensorhub, "slurm", "status", "--hub", "sqlite://" + (dir_.path() / "h.db").string()},
                                    {{"SLURM_CONF", conf_path}}, 120s);
  EXPECT_EQ(status.exit_code, 1) << status.err;
  EXPECT_NE(status.err.find("squeue failed"), std::string::npos) << status.err;
}

}  // namespace
}  // namespace tensorhub::testing
