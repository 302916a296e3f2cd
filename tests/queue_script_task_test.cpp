// Script tasks in the queue (issue 23): what create_task checks of a script, and the schema
// steps that add the script's columns to a hub whose tasks table predates them. The runner
// side, with real Python processes, is process_script_task_test.cpp. On SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include "backend_factory.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::error_message_of;

class ScriptTaskQueueTest : public testing::BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    q_ = std::make_unique<TaskQueue>(*hub_);
  }
  static TaskSpec script_task(std::string script) {
    TaskSpec s;
    s.task_name = "t";
    s.script = std::move(script);
    return s;
  }
  // The message of create_task's InvalidArgument for `s`.
  std::string refusal(const TaskSpec& s, const std::string& label) {
    return error_message_of(ErrorKind::kInvalidArgument, [&] { q_->create_task(s); }, label);
  }
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> q_;
};

TEST_P(ScriptTaskQueueTest, AScriptIsStoredWithItsHashAndADefaultName) {
  const std::string script = "print('héllo')\n";
  const Task t = q_->get_task(q_->create_task(script_task(script)));
  EXPECT_EQ(t.spec.script, script);
  EXPECT_EQ(t.spec.script_name, "script.py");
  EXPECT_EQ(t.spec.script_sha256, sha256_hex(script));
  EXPECT_EQ(t.spec.script_sha256, "aec43b85c11d38220dee4804d34ff306af62f3284dd4ac5351b813488c668908");  // sha256sum's
  EXPECT_TRUE(t.spec.python.empty());
  // Filters reach the script's columns.
  EXPECT_EQ(q_->find_tasks({{"script_sha256", sha256_hex(script)}}).size(), 1u);
  EXPECT_EQ(q_->find_tasks({{"script_name", "other.py"}}).size(), 0u);
  EXPECT_EQ(t.to_json()["script_bytes"], script.size());
  EXPECT_FALSE(t.to_json().contains("script")) << "the text itself is not displayed";
}

TEST_P(ScriptTaskQueueTest, CreateTaskRefusesABadScriptNamingWhatIsWrong) {
  TaskSpec s = script_task("x = 1\n");
  s.command = "true";
  EXPECT_NE(refusal(s, "command and script").find("give exactly one of command, spec or script"), std::string::npos);
  EXPECT_NE(refusal(script_task("x = '\xff'\n"), "latin-1").find("is not UTF-8 text (byte 5"), std::string::npos);
  EXPECT_NE(refusal(script_task("x = '\xed\xa0\x80'\n"), "surrogate").find("not UTF-8"), std::string::npos);
  EXPECT_NE(refusal(script_task(std::string("x = 1\0", 6)), "nul").find("holds a NUL byte"), std::string::npos);
  s = script_task("x = 1\n");
  s.script_name = "../evil.py";
  EXPECT_NE(refusal(s, "name").find("must be a file name without directories"), std::string::npos);
  s.script_name = "ok.py";
  s.script_sha256 = sha256_hex(std::string("x = 2\n"));
  EXPECT_NE(refusal(s, "hash").find("do not have the SHA-256 given"), std::string::npos);
  TaskSpec c;
  c.task_name = "t";
  c.command = "true";
  c.python = "/usr/bin/python3";
  EXPECT_NE(refusal(c, "python without script").find("belong to a script task"), std::string::npos);
  EXPECT_EQ(q_->count_tasks().total(), 0);
}

TEST_P(ScriptTaskQueueTest, AHubFromBeforeScriptTasksGainsTheColumnsAndKeepsItsTasks) {
  // Make the hub look as an older tensorhub left it: the queue's tables at version 2, without
  // the script columns, holding a command task.
  const auto old_id = q_->create_task([] {
    TaskSpec s;
    s.task_name = "old";
    s.command = "true";
    return s;
  }());
  // (and without what later steps added: the resource columns and the runners and
  // task_attempts tables of issue 25)
  for (const char* column : {"script", "script_name", "script_sha256", "python", "cpus", "gpus", "memory_bytes"})
    hub_->sql().execute(std::string("ALTER TABLE tasks DROP COLUMN ") + column, {}, sql::Access::kWrite);
  for (const char* table : {"runners", "task_attempts"})
    hub_->sql().execute(std::string("DROP TABLE ") + table, {}, sql::Access::kWrite);
  hub_->sql().execute("UPDATE module_schemas SET version = 2 WHERE module = 'queue'", {}, sql::Access::kWrite);

  Hub reopened(db_->uri(), "p");  // a new connection runs the missing steps
  TaskQueue queue(reopened);
  EXPECT_EQ(queue.get_task(old_id).spec.command, "true");
  EXPECT_TRUE(queue.get_task(old_id).spec.script.empty());
  const auto id = queue.create_task(script_task("x = 1\n"));
  EXPECT_EQ(queue.get_task(id).spec.script, "x = 1\n");
  const auto version = reopened.sql().execute("SELECT version FROM module_schemas WHERE module = 'queue'");
  EXPECT_GT(version.int64(0, 0), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, ScriptTaskQueueTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
