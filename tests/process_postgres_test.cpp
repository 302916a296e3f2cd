// Many runner processes on one PostgreSQL hub, as on many machines: runners killed with
// SIGKILL, the server restarted under them, concurrent savers, and runners in their own
// network namespaces reaching the server at a veth address.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

class PostgresProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PostgresTestDatabase::create();
    if (!db_) GTEST_SKIP() << kNoPostgres;
    uri = db_->uri();
    hub = std::make_unique<Hub>(uri, "p");
    queue = std::make_unique<TaskQueue>(*hub);
  }

  std::vector<std::string> runner_args(const std::string& hub_uri, const std::string& lease = "30") {
    return {kTensorhub, "runner", "--hub", hub_uri, "--project", "p", "--task-name", "t",
            "--lease", lease, "--exit-when-idle", "3"};
  }

  // A task that records each run as "<id> <attempt>" and reports its id as the result.
  TaskSpec recording_task(const std::filesystem::path& runs, const std::string& sleep = "0") {
    TaskSpec s;
    s.task_name = "t";
    s.command = "echo $TENSORHUB_TASK_ID $TENSORHUB_ATTEMPT >> " + runs.string() + "; sleep " + sleep +
                "; echo '{\"value\": '$TENSORHUB_TASK_ID'}' > $TENSORHUB_RESULT_FILE";
    s.saved_result_keys = {"value"};
    s.max_attempts = 5;
    return s;
  }

  // Every task finished once, with its own id as result.
  void expect_all_finished_once(std::size_t n) {
    const auto tasks = queue->find_tasks();
    ASSERT_EQ(tasks.size(), n);
    for (const auto& t : tasks) {
      EXPECT_EQ(t.status, TaskStatus::kFinished) << t.id << ": " << t.error;
      EXPECT_EQ(t.result, Json({{"value", t.id}}));
    }
  }

  std::unique_ptr<TestDatabase> db_;
  std::string uri;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  TempDir dir;
  std::string log = (dir.path() / "runners.log").string();
};

TEST_F(PostgresProcessTest, FourRunners2000TasksOneKilledHalfWay) {
  const auto runs = dir.path() / "runs";
  TaskSpec spec = recording_task(runs);
  for (int i = 0; i < 2000; ++i) queue->create_task(spec);
  std::vector<pid_t> runners;
  for (int i = 0; i < 4; ++i) runners.push_back(spawn(runner_args(uri, "2"), log));

  // Half-way, kill a runner that holds a task at that moment. Its tasks are instant, so it
  // is stopped first (SIGSTOP) and the hold checked again: a runner seen holding a task may
  // have finished it before a plain SIGKILL arrives. The check waits a moment after the stop:
  // a statement the runner sent just before it (the task's finish) still runs and commits on
  // the server, and a look at once could see the task running while that commit is under way.
  ASSERT_TRUE(eventually([&] { return queue->count_tasks().finished >= 1000; }, 120000ms)) << read_text(log);
  const pid_t victim = runners[0];
  const std::string owner_suffix = ":" + std::to_string(victim);
  const auto task_held_by_victim = [&] {
    for (const auto& t : queue->find_tasks({{"status", "running"}}))
      if (t.lease_owner.ends_with(owner_suffix)) return t.id;
    return std::int64_t{0};
  };
  std::int64_t held = 0;
  ASSERT_TRUE(eventually([&] {
    if (task_held_by_victim() == 0) return false;
    kill(victim, SIGSTOP);
    std::this_thread::sleep_for(500ms);
    held = task_held_by_victim();
    if (held == 0) kill(victim, SIGCONT);
    return held != 0;
  }, 10000ms));
  kill(victim, SIGKILL);
  EXPECT_EQ(wait_exit(victim), 128 + SIGKILL);
  for (std::size_t i = 1; i < runners.size(); ++i) EXPECT_EQ(wait_exit(runners[i]), 0);

  expect_all_finished_once(2000);
  const Task t = queue->get_task(held);
  EXPECT_EQ(t.failures, 1) << "the killed runner's task counts one failed attempt";
  EXPECT_GE(t.attempt, 2);
  // Every task ran exactly once, except the one held by the killed runner: it ran again,
  // and its first attempt may have been killed before its shell wrote anything.
  std::map<std::string, int> runs_per_task;
  for (const auto& line : read_lines(runs)) ++runs_per_task[line.substr(0, line.find(' '))];
  EXPECT_EQ(runs_per_task.size(), 2000u);
  for (const auto& [id, count] : runs_per_task) {
    if (id == std::to_string(held)) EXPECT_TRUE(count == 1 || count == 2) << "task " << id << " ran " << count;
    else EXPECT_EQ(count, 1) << "task " << id;
  }
}

TEST_F(PostgresProcessTest, RunnersSurviveAServerRestartAndFinishEveryTaskOnce) {
  const char* pgdata = std::getenv("TENSORHUB_PGDATA");
  const char* pgbin = std::getenv("TENSORHUB_PGBIN");
  if (!pgdata || !pgbin) GTEST_SKIP() << "needs TENSORHUB_PGDATA and TENSORHUB_PGBIN (scripts/pg-cluster sets them)";
  const auto runs = dir.path() / "runs";
  TaskSpec spec = recording_task(runs, "0.05");
  for (int i = 0; i < 300; ++i) queue->create_task(spec);
  std::vector<pid_t> runners;
  for (int i = 0; i < 2; ++i) runners.push_back(spawn(runner_args(uri, "20"), log));
  ASSERT_TRUE(eventually([&] { return queue->count_tasks().finished >= 100; }, 60000ms)) << read_text(log);

  const std::string as_postgres = geteuid() == 0 ? "runuser -u postgres -- " : "";
  run_command(as_postgres + pgbin + "/pg_ctl -D " + pgdata + " -m fast -w restart >/dev/null 2>&1");

  for (pid_t r : runners) EXPECT_EQ(wait_exit(r), 0);
  ASSERT_TRUE(eventually([&] { return queue->count_tasks().unfinished() == 0; }, 10000ms));
  expect_all_finished_once(300);
  // No result was recorded twice: each task finished with one attempt's result, and runs
  // repeat only where a runner lost the server mid-task and the lease then expired.
  std::map<std::string, int> runs_per_task;
  for (const auto& line : read_lines(runs)) ++runs_per_task[line.substr(0, line.find(' '))];
  EXPECT_EQ(runs_per_task.size(), 300u);
  EXPECT_NE(read_text(log).find("hub error, retrying"), std::string::npos) << "the restart was not noticed";
}

TEST_F(PostgresProcessTest, AnOutageIsWaitedOutQuietlyWithBusySlots) {
  const char* pgdata = std::getenv("TENSORHUB_PGDATA");
  const char* pgbin = std::getenv("TENSORHUB_PGBIN");
  if (!pgdata || !pgbin) GTEST_SKIP() << "needs TENSORHUB_PGDATA and TENSORHUB_PGBIN (scripts/pg-cluster sets them)";
  const auto runs = dir.path() / "runs";
  for (int i = 0; i < 4; ++i) queue->create_task(recording_task(runs, "1"));
  auto args = runner_args(uri, "30");
  args.insert(args.end(), {"--slots", "2"});
  const pid_t runner = spawn(args, log);
  ASSERT_TRUE(eventually([&] { return queue->count_tasks().running == 2; })) << read_text(log);
  const std::string as_postgres = geteuid() == 0 ? "runuser -u postgres -- " : "";
  // Down for 5 s while both slots' tasks end: their results wait until the server is back.
  run_command(as_postgres + pgbin + "/pg_ctl -D " + pgdata + " -m fast -w stop >/dev/null 2>&1");
  std::this_thread::sleep_for(5s);
  run_command(as_postgres + pgbin + "/pg_ctl -D " + pgdata + " -l " + (std::filesystem::path(pgdata).parent_path() / "server.log").string() + " -w start >/dev/null 2>&1");
  EXPECT_EQ(wait_exit(runner), 0);
  ASSERT_TRUE(eventually([&] { return queue->count_tasks().unfinished() == 0; }, 30000ms));
  expect_all_finished_once(4);
  // The outage is reported, not once per retry (an earlier runner wrote gigabytes of this).
  int error_lines = 0;
  for (const auto& line : read_lines(log))
    if (line.find("hub error") != std::string::npos) ++error_lines;
  EXPECT_GE(error_lines, 1);
  EXPECT_LE(error_lines, 5) << read_text(log);
}

// `tensorhub tune` outlives a PostgreSQL restart as runners do: it says so once, waits, and
// the search ends with one finished trial per grid point.
TEST_F(PostgresProcessTest, TheTunerSurvivesAServerRestart) {
  const char* pgdata = std::getenv("TENSORHUB_PGDATA");
  const char* pgbin = std::getenv("TENSORHUB_PGBIN");
  if (!pgdata || !pgbin) GTEST_SKIP() << "needs TENSORHUB_PGDATA and TENSORHUB_PGBIN (scripts/pg-cluster sets them)";
  const auto space = (dir.path() / "space.json").string();
  const auto runs = (dir.path() / "runs").string();
  std::ofstream(space) << R"([{"name": "x", "type": "Int", "min_value": 1, "max_value": 8}])";
  const std::string tune_log = (dir.path() / "tune.log").string();
  const pid_t tuner = spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "g", "--space", space,
                             "--oracle", "grid", "--objective", "loss", "--poll", "0.05", "--max-retries", "2",
                             "--", "/bin/sh", "-c",
                             // Inside sh -c the value comes from the environment (a placeholder there is refused).
                             "echo \"$TENSORHUB_HP_x\" >> " + runs +
                                 "; sleep 0.4; echo \"{\\\"loss\\\": $TENSORHUB_HP_x}\" > \"$TENSORHUB_RESULT_FILE\""},
                            tune_log);
  auto args = runner_args(uri, "20");
  args[7] = "trial";  // --task-name
  const pid_t runner = spawn(args, log);
  ASSERT_TRUE(eventually([&] { return read_lines(runs).size() >= 2; }, 30000ms)) << read_text(tune_log);

  const std::string as_postgres = geteuid() == 0 ? "runuser -u postgres -- " : "";
  run_command(as_postgres + pgbin + "/pg_ctl -D " + pgdata + " -m fast -w restart >/dev/null 2>&1");

  EXPECT_EQ(wait_exit(tuner), 0) << read_text(tune_log);
  kill(runner, SIGTERM);
  wait_exit(runner);
  std::vector<Task> tasks;  // the first query after the restart reconnects this test's own hub
  ASSERT_TRUE(eventually([&] { return !(tasks = queue->find_tasks({{"search", "g"}})).empty(); }));
  EXPECT_EQ(tasks.size(), 8u);
  for (const auto& t : tasks) EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
  EXPECT_NE(read_text(tune_log).find("hub unreachable, retrying"), std::string::npos) << read_text(tune_log);
}

TEST_F(PostgresProcessTest, SaveModelFromFourProcessesAtOnce) {
  std::vector<pid_t> savers;
  for (int p = 0; p < 4; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        Hub h(uri, "p");
        for (int j = 0; j < 5; ++j) {
          NamedTensors w;
          w["dense.weight"] = Tensor::from<float>(DType::kF32, {2}, {float(p), float(j)});
          h.save_model({{"layers", Json::array()}}, w, "mlp", {{"test_accuracy", 0.5 + 0.01 * (p * 5 + j)}, {"p", p}, {"j", j}});
        }
      } catch (...) {
        _exit(1);
      }
      _exit(0);
    }
    savers.push_back(pid);
  }
  for (pid_t s : savers) EXPECT_EQ(wait_exit(s), 0);
  const auto models = hub->find_models({{"model_name", "mlp"}}, {{"test_accuracy", -1}});
  ASSERT_EQ(models.size(), 20u);
  for (std::size_t i = 0; i < models.size(); ++i) {
    const int rank = 19 - static_cast<int>(i);  // p * 5 + j, best first
    EXPECT_DOUBLE_EQ(models[i].tags["test_accuracy"].get<double>(), 0.5 + 0.01 * rank);
    EXPECT_EQ(models[i].tags["p"].get<int>() * 5 + models[i].tags["j"].get<int>(), rank);
  }
  const auto best = hub->find_top_model("mlp", Json::object(), {{"test_accuracy", -1}});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->weights.at("dense.weight").as<float>()[0], 3.0f);
  EXPECT_EQ(best->weights.at("dense.weight").as<float>()[1], 4.0f);
}

// Two network namespaces, each a "machine" with its own veth link to this host.
class NetnsTest : public PostgresProcessTest {
 protected:
  void TearDown() override {
    for (const auto& ns : namespaces_) std::system(("ip netns delete " + ns + " 2>/dev/null").c_str());
    for (const auto& link : links_) std::system(("ip link delete " + link + " 2>/dev/null").c_str());
  }

  // Creates namespace `i` with address 10.213.<subnet>.2, reaching the host at .1.
  // Returns false (and says why) when the kernel or the user may not.
  bool make_machine(int i, std::string* why) {
    const int subnet = (getpid() % 200) + i;  // distinct per test run
    const std::string ns = "th-m" + std::to_string(getpid()) + "-" + std::to_string(i);
    const std::string host_if = "thh" + std::to_string(getpid() % 100000) + "x" + std::to_string(i);
    const std::string ns_if = "thn" + std::to_string(getpid() % 100000) + "x" + std::to_string(i);
    const std::string net = "10.213." + std::to_string(subnet);
    const std::string script =
        "ip netns add " + ns + " && ip link add " + host_if + " type veth peer name " + ns_if +
        " && ip link set " + ns_if + " netns " + ns + " && ip addr add " + net + ".1/24 dev " + host_if +
        " && ip link set " + host_if + " up && ip netns exec " + ns + " ip addr add " + net + ".2/24 dev " + ns_if +
        " && ip netns exec " + ns + " ip link set " + ns_if + " up && ip netns exec " + ns + " ip link set lo up";
    namespaces_.push_back(ns);
    links_.push_back(host_if);
    if (std::system((script + " 2>" + (dir.path() / "netns.err").string()).c_str()) != 0) {
      *why = read_text(dir.path() / "netns.err");
      return false;
    }
    host_addresses_.push_back(net + ".1");
    return true;
  }

  std::vector<std::string> namespaces_, links_, host_addresses_;
};

TEST_F(NetnsTest, RunnersOnSeparateNetworkNamespacesShareTheQueue) {
  std::string why;
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  if (std::system("command -v ip >/dev/null") != 0) GTEST_SKIP() << "the ip command (iproute2) is missing";
  for (int i = 0; i < 2; ++i)
    if (!make_machine(i, &why)) GTEST_SKIP() << "the kernel refused a network namespace: " << why;

  const auto runs = dir.path() / "runs";
  TaskSpec spec = recording_task(runs, "0.02");
  for (int i = 0; i < 40; ++i) queue->create_task(spec);
  // Each runner reaches the server at its veth address, not at 127.0.0.1.
  const auto port_start = uri.find(':', uri.find('@'));
  std::vector<pid_t> runners;
  for (int i = 0; i < 2; ++i) {
    const std::string remote = uri.substr(0, uri.find('@') + 1) + host_addresses_[i] + uri.substr(port_start);
    auto args = runner_args(remote);
    args.insert(args.begin(), {"/usr/sbin/ip", "netns", "exec", namespaces_[i]});
    if (!std::filesystem::exists(args[0])) args[0] = "/sbin/ip";
    runners.push_back(spawn(args, log));
  }
  for (pid_t r : runners) EXPECT_EQ(wait_exit(r), 0) << read_text(log);
  expect_all_finished_once(40);
  EXPECT_EQ(read_lines(runs).size(), 40u);
  // Both "machines" connected from their own addresses.
  const std::string text = read_text(log);
  for (const auto& addr : host_addresses_) EXPECT_NE(text.find(addr), std::string::npos) << text;
}

}  // namespace
}  // namespace tensorhub
