// The task queue suite, run against every backend in backend_params(), plus TaskContext.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_context.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::TestDatabase;

TaskSpec command_task(const std::string& name, int priority = 0, int max_attempts = 3) {
  TaskSpec s;
  s.task_name = name;
  s.command = "echo {lr}";
  s.hyper_parameters = {{"lr", 0.01}};
  s.priority = priority;
  s.max_attempts = max_attempts;
  return s;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// A lease short enough to let expire in a test, long enough that a loaded machine does not
// expire it between two statements that expect it held.
constexpr double kShortLeaseS = 0.3;
void wait_for_short_lease_to_expire() { sleep_ms(400); }


bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class TaskQueueTest : public testing::BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "queue");
    q_ = std::make_unique<TaskQueue>(*hub_);
  }
  TaskQueue& q() { return *q_; }

  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> q_;
};

// ---- create ---------------------------------------------------------------------------------

TEST_P(TaskQueueTest, CreateTaskValidatesItsSpec) {
  auto bad = [&](const std::string& label, auto mutate) {
    TaskSpec s = command_task("train");
    mutate(s);
    const std::string msg = testing::error_message_of(ErrorKind::kInvalidArgument, [&] { q().create_task(s); }, label);
    return msg;
  };
  bad("no task_name", [](TaskSpec& s) { s.task_name = ""; });
  EXPECT_TRUE(contains(bad("neither command nor spec", [](TaskSpec& s) { s.command = ""; }), "command"));
  bad("both command and spec", [](TaskSpec& s) { s.train_spec = {{"layers", Json::array()}}; });
  EXPECT_TRUE(contains(bad("max_attempts 0", [](TaskSpec& s) { s.max_attempts = 0; }), "max_attempts"));
  bad("max_attempts -1", [](TaskSpec& s) { s.max_attempts = -1; });
  EXPECT_TRUE(contains(bad("negative timeout", [](TaskSpec& s) { s.timeout_s = -0.5; }), "timeout_s"));
  EXPECT_TRUE(contains(bad("array hyper_parameters", [](TaskSpec& s) { s.hyper_parameters = Json::array({1}); }),
                       "hyper_parameters"));
  bad("null hyper_parameters", [](TaskSpec& s) { s.hyper_parameters = nullptr; });
  bad("string tags", [](TaskSpec& s) { s.tags = "x"; });
  EXPECT_EQ(q().count_tasks().total(), 0);

  // A valid command task and a valid spec task round-trip every field.
  TaskSpec s = command_task("train", 4, 5);
  s.saved_result_keys = {"test_accuracy", "loss"};
  s.timeout_s = 12.5;
  s.tags = {{"description", "mlp 800"}};
  const auto id = q().create_task(s);
  TaskSpec spec_task;
  spec_task.task_name = "fit";
  spec_task.train_spec = {{"layers", {{{"type", "Dense"}, {"units", "${units}"}}}}, {"epochs", 2}};
  spec_task.hyper_parameters = {{"units", 64}};
  const auto spec_id = q().create_task(spec_task);
  EXPECT_NE(id, spec_id);

  const Task t = q().get_task(id);
  EXPECT_EQ(t.project_name, "queue");
  EXPECT_EQ(t.status, TaskStatus::kPending);
  EXPECT_EQ(t.attempt, 0);
  EXPECT_EQ(t.failures, 0);
  EXPECT_EQ(t.spec.task_name, "train");
  EXPECT_EQ(t.spec.command, "echo {lr}");
  EXPECT_TRUE(t.spec.train_spec.is_null());
  EXPECT_EQ(t.spec.hyper_parameters, (Json{{"lr", 0.01}}));
  EXPECT_EQ(t.spec.saved_result_keys, (std::vector<std::string>{"test_accuracy", "loss"}));
  EXPECT_EQ(t.spec.max_attempts, 5);
  EXPECT_EQ(t.spec.timeout_s, 12.5);
  EXPECT_EQ(t.spec.priority, 4);
  EXPECT_EQ(t.spec.tags, (Json{{"description", "mlp 800"}}));
  EXPECT_TRUE(t.result.is_null());

  const Task st = q().get_task(spec_id);
  EXPECT_EQ(st.spec.train_spec, spec_task.train_spec);
  EXPECT_EQ(st.spec.command, "");
  EXPECT_EQ(q().count_tasks().pending, 2);
  testing::error_message_of(ErrorKind::kNotFound, [&] { q().get_task(spec_id + 100); }, "unknown id");
}

// ---- claim ----------------------------------------------------------------------------------

TEST_P(TaskQueueTest, ClaimHonoursNameAndPriorityNewestFirst) {
  const auto t1 = q().create_task(command_task("train"));
  const auto t2 = q().create_task(command_task("train"));
  const auto t3 = q().create_task(command_task("train", /*priority=*/5));
  const auto t4 = q().create_task(command_task("eval", /*priority=*/10));

  const auto before = now_micros();
  auto c = q().claim("train", "runner-a", 30.0);
  const auto after = now_micros();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, t3);  // highest priority first, even though it is not the newest
  EXPECT_EQ(c->status, TaskStatus::kRunning);
  EXPECT_EQ(c->attempt, 1);
  EXPECT_EQ(c->lease_owner, "runner-a");
  EXPECT_GE(c->lease_expires, before + 30'000'000);
  EXPECT_LE(c->lease_expires, after + 30'000'000);
  EXPECT_GE(c->started_at, before);

  c = q().claim("train", "runner-a", 30.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, t2);  // then newest first
  c = q().claim("train", "runner-a", 30.0, ClaimOrder::kNewestFirst);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, t1);
  EXPECT_FALSE(q().claim("train", "runner-a", 30.0).has_value());  // "eval" is not "train"
  c = q().claim("", "runner-a", 30.0);  // any name
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, t4);
  EXPECT_FALSE(q().claim("", "runner-a", 30.0).has_value());

  const Task stored = q().get_task(t4);
  EXPECT_EQ(stored.status, TaskStatus::kRunning);
  EXPECT_EQ(stored.lease_owner, "runner-a");
  EXPECT_EQ(stored.attempt, 1);
}

TEST_P(TaskQueueTest, ClaimOldestFirst) {
  const auto t1 = q().create_task(command_task("train"));
  const auto t2 = q().create_task(command_task("train"));
  const auto t3 = q().create_task(command_task("train"));
  const auto hi = q().create_task(command_task("train", /*priority=*/1));
  q().create_task(command_task("other", /*priority=*/9));
  std::vector<std::int64_t> order;
  while (auto c = q().claim("train", "r", 30.0, ClaimOrder::kOldestFirst)) order.push_back(c->id);
  EXPECT_EQ(order, (std::vector<std::int64_t>{hi, t1, t2, t3}));
}

TEST_P(TaskQueueTest, TwoClaimsNeverReturnTheSameTask) {
  std::set<std::int64_t> created;
  for (int i = 0; i < 6; ++i) created.insert(q().create_task(command_task("train")));
  std::set<std::int64_t> claimed;
  for (int i = 0; i < 6; ++i) {
    auto c = q().claim("train", std::string(i % 2 ? "r1" : "r0"), 30.0, i % 2 ? ClaimOrder::kOldestFirst : ClaimOrder::kNewestFirst);
    ASSERT_TRUE(c);
    EXPECT_TRUE(claimed.insert(c->id).second) << "task " << c->id << " claimed twice";
  }
  EXPECT_EQ(claimed, created);
  EXPECT_FALSE(q().claim("train", "r", 30.0).has_value());
  EXPECT_EQ(q().count_tasks().running, 6);
}

TEST_P(TaskQueueTest, OtherProjectsCannotClaim) {
  q().create_task(command_task("train"));
  Hub other_hub(db_->uri(), "elsewhere");
  TaskQueue other(other_hub);
  EXPECT_FALSE(other.claim("train", "r", 30.0).has_value());
  EXPECT_FALSE(other.check_unfinished_task());
  EXPECT_EQ(other.delete_tasks({}), 0);
  EXPECT_EQ(other.cancel_tasks({}), 0);
  EXPECT_TRUE(q().claim("train", "r", 30.0).has_value());
}

TEST_P(TaskQueueTest, ListsTheProjectsThatHoldTasksAndKeepsItsTableItself) {
  // The task table is the queue's (task_schema.cpp): a hub the store alone opened has none,
  // and the queue's first statement creates it.
  EXPECT_EQ(hub_->sql().execute("SELECT version FROM module_schemas WHERE module = 'queue'").size(), 0u);
  EXPECT_TRUE(q().list_projects().empty());
  q().create_task(command_task("train"));
  EXPECT_EQ(hub_->sql().execute("SELECT tables FROM module_schemas WHERE module = 'queue'").text(0, 0), "tasks,runners,task_attempts");
  Hub zeta_hub(db_->uri(), "Zeta");  // upper case sorts before lower case, bytewise
  TaskQueue(zeta_hub).create_task(command_task("train"));
  Hub docs_only(db_->uri(), "docs-only");
  docs_only.save_testing_log({{"loss", 1}});
  EXPECT_EQ(q().list_projects(), (std::vector<std::string>{"Zeta", "queue"}));
  EXPECT_EQ(hub_->list_projects(), (std::vector<std::string>{"docs-only"}));  // the store's: documents
}

// ---- leases ---------------------------------------------------------------------------------

TEST_P(TaskQueueTest, HeartbeatExtendsTheLease) {
  q().create_task(command_task("train"));
  auto c = q().claim("train", "r", 1.0);
  ASSERT_TRUE(c);
  const auto first_expiry = q().get_task(c->id).lease_expires;
  sleep_ms(5);
  const auto before = now_micros();
  EXPECT_TRUE(q().heartbeat(*c, 60.0));
  const Task t = q().get_task(c->id);
  EXPECT_GE(t.lease_expires, before + 60'000'000);
  EXPECT_GT(t.lease_expires, first_expiry + 50'000'000);
  EXPECT_EQ(t.status, TaskStatus::kRunning);
  EXPECT_EQ(t.attempt, 1);

  Task wrong_attempt = *c;
  wrong_attempt.attempt = 2;
  EXPECT_FALSE(q().heartbeat(wrong_attempt, 60.0));
  EXPECT_TRUE(q().complete(*c, {{"ok", true}}));
  EXPECT_FALSE(q().heartbeat(*c, 60.0)) << "a finished task has no lease to extend";
}

TEST_P(TaskQueueTest, ExpiredLeaseMakesTheTaskClaimableAgain) {
  const auto id = q().create_task(command_task("train", 0, /*max_attempts=*/3));
  auto first = q().claim("train", "runner-dead", kShortLeaseS);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->attempt, 1);
  EXPECT_FALSE(q().claim("train", "runner-b", 30.0).has_value()) << "the lease is still held";
  wait_for_short_lease_to_expire();
  auto second = q().claim("train", "runner-b", 30.0);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->id, id);
  EXPECT_EQ(second->attempt, 2);
  EXPECT_EQ(second->failures, 1);
  EXPECT_EQ(second->lease_owner, "runner-b");
  EXPECT_TRUE(contains(second->error, "runner-dead")) << second->error;
  EXPECT_TRUE(contains(second->error, "lease")) << second->error;
  // The dead runner's attempt no longer holds the task.
  EXPECT_FALSE(q().heartbeat(*first, 30.0));
  EXPECT_FALSE(q().release(*first));
  EXPECT_EQ(q().get_task(id).lease_owner, "runner-b");
}

TEST_P(TaskQueueTest, CompletionIsFencedByAttempt) {
  const auto id = q().create_task(command_task("train"));
  auto old_attempt = q().claim("train", "slow", kShortLeaseS);
  ASSERT_TRUE(old_attempt);
  wait_for_short_lease_to_expire();
  auto new_attempt = q().claim("train", "fast", 30.0);
  ASSERT_TRUE(new_attempt);
  ASSERT_EQ(new_attempt->attempt, old_attempt->attempt + 1);

  EXPECT_FALSE(q().complete(*old_attempt, {{"test_accuracy", 0.1}}));
  Task t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kRunning);
  EXPECT_TRUE(t.result.is_null());

  EXPECT_TRUE(q().complete(*new_attempt, {{"test_accuracy", 0.9}}));
  EXPECT_FALSE(q().complete(*old_attempt, {{"test_accuracy", 0.1}}));
  EXPECT_FALSE(q().fail(*old_attempt, "late failure", "tail"));
  EXPECT_FALSE(q().complete(*new_attempt, {{"test_accuracy", 0.5}})) << "a finished task cannot finish twice";
  t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFinished);
  EXPECT_EQ(t.result, (Json{{"test_accuracy", 0.9}}));
  EXPECT_EQ(t.attempt, 2);
  EXPECT_GT(t.finished_at, 0);
  EXPECT_EQ(t.error, "");
}

// ---- failures -------------------------------------------------------------------------------

TEST_P(TaskQueueTest, FailRequeuesUntilMaxAttemptsThenFails) {
  const auto id = q().create_task(command_task("train", 0, /*max_attempts=*/3));
  for (int i = 1; i <= 3; ++i) {
    auto c = q().claim("train", "r", 30.0);
    ASSERT_TRUE(c) << "attempt " << i;
    EXPECT_EQ(c->attempt, i);
    EXPECT_TRUE(q().fail(*c, "boom " + std::to_string(i), "log line " + std::to_string(i)));
    const Task t = q().get_task(id);
    EXPECT_EQ(t.failures, i);
    EXPECT_EQ(t.error, "boom " + std::to_string(i));
    EXPECT_EQ(t.log_tail, "log line " + std::to_string(i));
    if (i < 3) {
      EXPECT_EQ(t.status, TaskStatus::kPending) << "attempt " << i;
      EXPECT_EQ(t.finished_at, 0);
      EXPECT_TRUE(q().check_unfinished_task());
    } else {
      EXPECT_EQ(t.status, TaskStatus::kFailed);
      EXPECT_GT(t.finished_at, 0);
    }
  }
  EXPECT_FALSE(q().claim("train", "r", 30.0).has_value());
  EXPECT_FALSE(q().check_unfinished_task());
  const TaskCounts counts = q().count_tasks();
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.total(), 1);
}

TEST_P(TaskQueueTest, ReleaseRequeuesWithoutCountingAFailure) {
  const auto id = q().create_task(command_task("train", 0, 1));
  auto c = q().claim("train", "r", 30.0);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q().release(*c));
  Task t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kPending);
  EXPECT_EQ(t.failures, 0);
  auto again = q().claim("train", "r2", 30.0);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->attempt, 2);
  EXPECT_FALSE(q().complete(*c, {}));
  EXPECT_TRUE(q().complete(*again, {}));
}

TEST_P(TaskQueueTest, CompleteWithMissingResultKeyIsAFailedAttempt) {
  TaskSpec s = command_task("train", 0, /*max_attempts=*/2);
  s.saved_result_keys = {"test_accuracy", "loss"};
  const auto id = q().create_task(s);

  auto c = q().claim("train", "r", 30.0);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q().complete(*c, {{"loss", 0.25}}, "epoch 1 done"));
  Task t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kPending);
  EXPECT_EQ(t.failures, 1);
  EXPECT_TRUE(t.result.is_null());
  EXPECT_TRUE(contains(t.error, "test_accuracy")) << t.error;
  EXPECT_FALSE(contains(t.error, "loss")) << "loss was present: " << t.error;
  EXPECT_EQ(t.log_tail, "epoch 1 done");

  c = q().claim("train", "r", 30.0);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q().complete(*c, Json::array({1, 2}), "not an object"));
  t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);  // second failure of max_attempts = 2
  EXPECT_TRUE(contains(t.error, "test_accuracy") && contains(t.error, "loss")) << t.error;
  EXPECT_EQ(t.log_tail, "not an object");

  EXPECT_EQ(missing_result_keys(s, {{"test_accuracy", 1}, {"loss", 2}, {"extra", 3}}), std::vector<std::string>{});
  EXPECT_EQ(missing_result_keys(s, {{"loss", 2}}), std::vector<std::string>{"test_accuracy"});

  // With every key present the task finishes with the whole result.
  const auto ok_id = q().create_task(s);
  c = q().claim("train", "r", 30.0);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->id, ok_id);
  const Json result = {{"test_accuracy", 0.87}, {"loss", 0.3}, {"epochs", 5}};
  EXPECT_TRUE(q().complete(*c, result));
  t = q().get_task(ok_id);
  EXPECT_EQ(t.status, TaskStatus::kFinished);
  EXPECT_EQ(t.result, result);
}

// ---- check_unfinished_task ------------------------------------------------------------------

TEST_P(TaskQueueTest, CheckUnfinishedTask) {
  EXPECT_FALSE(q().check_unfinished_task());
  const auto id = q().create_task(command_task("train"));
  q().create_task(command_task("eval"));
  EXPECT_TRUE(q().check_unfinished_task());
  EXPECT_TRUE(q().check_unfinished_task({{"task_name", "train"}}));
  EXPECT_FALSE(q().check_unfinished_task({{"task_name", "nothing"}}));
  auto c = q().claim("train", "r", 30.0);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q().check_unfinished_task({{"task_name", "train"}}));  // running counts
  EXPECT_TRUE(q().complete(*c, {}));
  EXPECT_FALSE(q().check_unfinished_task({{"task_name", "train"}}));
  EXPECT_TRUE(q().check_unfinished_task());  // "eval" is still pending
  EXPECT_EQ(q().get_task(id).status, TaskStatus::kFinished);
}

TEST_P(TaskQueueTest, CheckUnfinishedIsFalseWhenTheLastAttemptsLeaseExpired) {
  const auto id = q().create_task(command_task("train", 0, /*max_attempts=*/1));
  auto c = q().claim("train", "runner-crashed", kShortLeaseS);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q().check_unfinished_task());
  wait_for_short_lease_to_expire();
  // Nobody claims again: the check itself reaps the expired lease, and with its one
  // attempt used the task is failed, so a dispatcher does not wait forever.
  EXPECT_FALSE(q().check_unfinished_task());
  const Task t = q().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_EQ(t.failures, 1);
  EXPECT_TRUE(contains(t.error, "runner-crashed")) << t.error;
  EXPECT_GT(t.finished_at, 0);
  EXPECT_FALSE(q().claim("train", "r", 30.0).has_value());
  EXPECT_FALSE(q().complete(*c, {})) << "the reaped attempt cannot finish";
  const TaskCounts counts = q().wait({}, nullptr, 0.01, 1.0);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.unfinished(), 0);
}

TEST_P(TaskQueueTest, WaitTimesOutWithUnavailable) {
  q().create_task(command_task("train"));
  std::vector<std::int64_t> pending_seen;
  testing::error_message_of(ErrorKind::kUnavailable,
               [&] { q().wait({}, [&](const TaskCounts& c) { pending_seen.push_back(c.pending); }, 0.01, 0.05); },
               "wait on a task no runner takes");
  EXPECT_EQ(pending_seen, (std::vector<std::int64_t>{1}));  // called once: counts never changed
}

// ---- cancel and delete ----------------------------------------------------------------------

TEST_P(TaskQueueTest, CancelPendingAndRunningTasks) {
  const auto pending = q().create_task(command_task("a"));
  const auto running = q().create_task(command_task("a", /*priority=*/1));
  const auto done = q().create_task(command_task("a", /*priority=*/2));
  const auto other = q().create_task(command_task("b"));
  auto d = q().claim("a", "r", 30.0);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->id, done);
  ASSERT_TRUE(q().complete(*d, {{"x", 1}}));
  auto r = q().claim("a", "r", 30.0);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->id, running);

  EXPECT_EQ(q().cancel_tasks({{"task_name", "a"}}), 2);  // the finished one is not touched
  EXPECT_EQ(q().get_task(pending).status, TaskStatus::kCancelled);
  EXPECT_EQ(q().get_task(running).status, TaskStatus::kCancelled);
  EXPECT_EQ(q().get_task(done).status, TaskStatus::kFinished);
  EXPECT_EQ(q().get_task(done).result, (Json{{"x", 1}}));
  EXPECT_EQ(q().get_task(other).status, TaskStatus::kPending);
  // The runner of the cancelled task learns at its next heartbeat and cannot finish it.
  EXPECT_FALSE(q().heartbeat(*r, 30.0));
  EXPECT_FALSE(q().complete(*r, {{"x", 2}}));
  EXPECT_EQ(q().get_task(running).status, TaskStatus::kCancelled);
  EXPECT_FALSE(q().claim("a", "r", 30.0).has_value());
  EXPECT_EQ(q().cancel_tasks({{"task_name", "a"}}), 0);

  const TaskCounts counts = q().count_tasks();
  EXPECT_EQ(counts.cancelled, 2);
  EXPECT_EQ(counts.finished, 1);
  EXPECT_EQ(counts.pending, 1);
  EXPECT_EQ(counts.total(), 4);
}

TEST_P(TaskQueueTest, DeleteTasksByFilter) {
  const auto a = q().create_task(command_task("a"));
  const auto b = q().create_task(command_task("b"));
  TaskSpec tagged = command_task("c");
  tagged.tags = {{"sweep", "lr"}};
  tagged.hyper_parameters = {{"lr", 0.5}};
  const auto c = q().create_task(tagged);
  auto claimed = q().claim("a", "r", 30.0);
  ASSERT_TRUE(claimed);
  ASSERT_TRUE(q().complete(*claimed, {}));

  EXPECT_EQ(q().delete_tasks({{"status", "finished"}}), 1);
  testing::error_message_of(ErrorKind::kNotFound, [&] { q().get_task(a); }, "deleted task");
  EXPECT_EQ(q().find_tasks({{"sweep", "lr"}}).size(), 1u);  // bare field: a tag
  EXPECT_EQ(q().find_tasks({{"hyper_parameters.lr", {{"$gt", 0.1}}}}).size(), 1u);
  EXPECT_EQ(q().delete_tasks({{"hyper_parameters.lr", {{"$gt", 0.1}}}}), 1);
  testing::error_message_of(ErrorKind::kNotFound, [&] { q().get_task(c); }, "deleted task");
  EXPECT_EQ(q().get_task(b).status, TaskStatus::kPending);
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { q().delete_tasks({{"status; DROP TABLE tasks", 1}}); },
               "bad field");
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { q().delete_tasks(Json::array()); }, "array filter");
  EXPECT_EQ(q().delete_tasks({}), 1);
  EXPECT_EQ(q().count_tasks().total(), 0);
}

TEST_P(TaskQueueTest, FindTasksSortsAndFilters) {
  const auto a = q().create_task(command_task("a", 1));
  const auto b = q().create_task(command_task("b", 3));
  const auto c = q().create_task(command_task("c", 2));
  auto ids = [](const std::vector<Task>& ts) {
    std::vector<std::int64_t> out;
    for (const auto& t : ts) out.push_back(t.id);
    return out;
  };
  EXPECT_EQ(ids(q().find_tasks()), (std::vector<std::int64_t>{a, b, c}));
  EXPECT_EQ(ids(q().find_tasks({}, {{"priority", -1}})), (std::vector<std::int64_t>{b, c, a}));
  EXPECT_EQ(ids(q().find_tasks({{"priority", {{"$gte", 2}}}}, {{"priority", 1}})), (std::vector<std::int64_t>{c, b}));
  EXPECT_EQ(ids(q().find_tasks({{"task_name", {{"$in", {"a", "c"}}}}}, {{"id", -1}}, 1)), (std::vector<std::int64_t>{c}));
}

// ---- concurrency ----------------------------------------------------------------------------

TEST_P(TaskQueueTest, ConcurrentClaimsTakeEveryTaskExactlyOnce) {
  constexpr int kTasks = 200;
  constexpr int kThreads = 4;
  std::set<std::int64_t> created;
  for (int i = 0; i < kTasks; ++i) created.insert(q().create_task(command_task("race")));

  std::mutex mu;
  std::map<std::int64_t, int> claims;  // task id -> times claimed
  std::vector<int> per_thread(kThreads, 0);
  std::vector<std::string> errors;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      try {
        Hub hub(db_->uri(), "queue");  // each worker has its own connection
        TaskQueue queue(hub);
        while (!go.load()) std::this_thread::yield();
        const std::string owner = "worker-" + std::to_string(w);
        while (auto t = queue.claim("race", owner, 60.0, w % 2 ? ClaimOrder::kOldestFirst : ClaimOrder::kNewestFirst)) {
          if (!queue.complete(*t, {{"by", owner}})) throw std::runtime_error("lost task " + std::to_string(t->id));
          std::lock_guard<std::mutex> lock(mu);
          ++claims[t->id];
          ++per_thread[w];
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("worker " + std::to_string(w) + ": " + e.what());
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();

  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(claims.size(), static_cast<std::size_t>(kTasks));
  for (const auto& [id, n] : claims) {
    EXPECT_EQ(n, 1) << "task " << id << " claimed " << n << " times";
    EXPECT_TRUE(created.count(id)) << "unknown task " << id;
  }
  int total = 0;
  for (int n : per_thread) total += n;
  EXPECT_EQ(total, kTasks);
  const TaskCounts counts = q().count_tasks();
  EXPECT_EQ(counts.finished, kTasks);
  EXPECT_EQ(counts.total(), kTasks);
  // Every stored result names the worker that claimed it, and each task ran one attempt.
  for (const Task& t : q().find_tasks()) {
    EXPECT_EQ(t.attempt, 1) << t.id;
    EXPECT_TRUE(t.result.contains("by")) << t.id;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TaskQueueTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

// ---- TaskContext ----------------------------------------------------------------------------

class TaskContextTest : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"TENSORHUB_URI", "TENSORHUB_PROJECT", "TENSORHUB_TASK_ID",
                                          "TENSORHUB_HYPER_PARAMETERS", "TENSORHUB_RESULT_FILE"};
  void SetUp() override {
    for (const char* v : kVars) unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
  }
  testing::TempDir dir_;
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(TaskContextTest, ReadsTheRunnersEnvironmentAndWritesResults) {
  const auto result_file = dir_ / "result.json";
  setenv("TENSORHUB_URI", "sqlite:///tmp/ctx-hub.db", 1);
  setenv("TENSORHUB_PROJECT", "mnist", 1);
  setenv("TENSORHUB_TASK_ID", "42", 1);
  setenv("TENSORHUB_HYPER_PARAMETERS", R"({"lr": 0.01, "n_units": 800, "name": "mlp", "dropout": [0.1, 0.2]})", 1);
  setenv("TENSORHUB_RESULT_FILE", result_file.c_str(), 1);

  TaskContext ctx = TaskContext::from_environment();
  EXPECT_TRUE(ctx.under_runner());
  EXPECT_EQ(ctx.task_id(), 42);
  EXPECT_EQ(ctx.hub_uri(), "sqlite:///tmp/ctx-hub.db");
  EXPECT_EQ(ctx.project_name(), "mnist");
  EXPECT_EQ(ctx.get<double>("lr", 0.0), 0.01);
  EXPECT_EQ(ctx.get<int>("n_units", 0), 800);
  EXPECT_EQ(ctx.get<std::string>("name", ""), "mlp");
  EXPECT_EQ(ctx.get<std::vector<double>>("dropout", {}), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(ctx.get<int>("epochs", 7), 7);
  const std::string msg = testing::error_message_of(ErrorKind::kInvalidArgument, [&] { ctx.get<int>("name", 0); }, "type");
  EXPECT_TRUE(contains(msg, "name")) << msg;

  EXPECT_FALSE(std::filesystem::exists(result_file));
  ctx.set_result("test_accuracy", 0.875);
  EXPECT_EQ(Json::parse(read_text(result_file)), (Json{{"test_accuracy", 0.875}}));
  ctx.set_result("loss", 0.25);
  ctx.set_result("test_accuracy", 0.9);  // overwrites
  EXPECT_EQ(Json::parse(read_text(result_file)), (Json{{"test_accuracy", 0.9}, {"loss", 0.25}}));
  EXPECT_EQ(ctx.results(), (Json{{"test_accuracy", 0.9}, {"loss", 0.25}}));
  // Written via a temporary file and a rename: only result.json is left in the directory.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"result.json"});
}

TEST_F(TaskContextTest, ResultFileIsReplacedNotRewrittenInPlace) {
  // An atomic writer replaces the file (new inode), so a reader that opened the old file
  // sees complete old content, never a half-written new one.
  const auto result_file = dir_ / "result.json";
  setenv("TENSORHUB_TASK_ID", "1", 1);
  setenv("TENSORHUB_RESULT_FILE", result_file.c_str(), 1);
  TaskContext ctx = TaskContext::from_environment();
  ctx.set_result("a", 1);
  std::ifstream old_reader(result_file);
  ctx.set_result("b", std::string(100000, 'x'));
  const std::string old_text{std::istreambuf_iterator<char>(old_reader), std::istreambuf_iterator<char>()};
  EXPECT_EQ(Json::parse(old_text), (Json{{"a", 1}}));
  EXPECT_EQ(Json::parse(read_text(result_file))["b"].get<std::string>().size(), 100000u);
}

TEST_F(TaskContextTest, OutsideARunnerResultsStayInMemory) {
  TaskContext ctx = TaskContext::from_environment();
  EXPECT_FALSE(ctx.under_runner());
  EXPECT_EQ(ctx.project_name(), "default");
  EXPECT_TRUE(ctx.hub_uri().starts_with("sqlite://"));
  EXPECT_EQ(ctx.hyper_parameters(), Json::object());
  ctx.set_result("x", 3);
  EXPECT_EQ(ctx.results(), (Json{{"x", 3}}));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

TEST_F(TaskContextTest, NonObjectHyperParametersAreInvalid) {
  for (const char* hp : {"[1, 2]", "3", "\"lr\"", "not json", "{\"lr\": "}) {
    setenv("TENSORHUB_HYPER_PARAMETERS", hp, 1);
    testing::error_message_of(ErrorKind::kInvalidArgument, [] { TaskContext::from_environment(); }, hp);
  }
  setenv("TENSORHUB_HYPER_PARAMETERS", "{}", 1);
  setenv("TENSORHUB_TASK_ID", "abc", 1);
  testing::error_message_of(ErrorKind::kInvalidArgument, [] { TaskContext::from_environment(); }, "task id");
}

TEST_F(TaskContextTest, UnwritableResultFileIsUnavailable) {
  setenv("TENSORHUB_TASK_ID", "1", 1);
  setenv("TENSORHUB_RESULT_FILE", (dir_ / "no-such-dir" / "result.json").c_str(), 1);
  TaskContext ctx = TaskContext::from_environment();
  testing::error_message_of(ErrorKind::kUnavailable, [&] { ctx.set_result("a", 1); }, "missing directory");
}

}  // namespace
}  // namespace tensorhub
