// Tasks of the queue as the hub stores them (queue/ owns their table and lifecycle). Lifecycle:
//   pending -> running -> finished | failed | cancelled
// A claim takes a lease (owner, expiry) and increments `attempt`; completion, heartbeats and
// failures are fenced by that attempt number, so a runner that lost its lease cannot touch a
// newer attempt. `failures` counts failed attempts (crash, timeout, expired lease); after
// max_attempts of them the task is failed for good.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"

namespace tensorhub {

enum class TaskStatus { kPending, kRunning, kFinished, kFailed, kCancelled };

/// "pending", "running", "finished", "failed", "cancelled".
std::string to_string(TaskStatus status);
/// Inverse of to_string. Throws InvalidArgument naming the allowed values.
TaskStatus task_status_from_string(const std::string& text);

/// The script_name of a script task created without one.
inline constexpr const char* kDefaultScriptName = "script.py";

/// What create_task takes: TensorHub's task fields plus the queue's settings.
struct TaskSpec {
  std::string task_name;                  ///< runners claim by this name
  std::string command;                    ///< shell command; "{name}" -> hyperparameter value
  Json train_spec;  ///< a declarative training job (docs/spec-format.md); null if command given
  /// A Python script's source, UTF-8 (no NUL byte), as TensorHub's create_task(script=...)
  /// stored it: a runner writes it to the attempt's directory and runs it with a Python
  /// interpreter, the hyperparameters bound as its global variables and the saved_result_keys
  /// read from its globals at the end (runner.h). A task has exactly one of command,
  /// train_spec and script.
  std::string script;
  /// The script's file name without directories, e.g. "task_script.py" (tracebacks and
  /// `task show` name it); "" for a script task means "script.py".
  std::string script_name;
  /// Lowercase hex SHA-256 of `script`'s bytes. create_task computes it when empty and
  /// refuses a script whose bytes do not have the one given.
  std::string script_sha256;
  /// The Python interpreter of a script task, e.g. "/opt/venv/bin/python"; a name without
  /// "/" is looked up on the runner's PATH. "" (the default): the runner's (RunnerOptions::python).
  std::string python;
  Json hyper_parameters = Json::object(); ///< passed as TENSORHUB_HYPER_PARAMETERS
  std::vector<std::string> saved_result_keys;  ///< all must be in the result to finish
  int max_attempts = 3;                   ///< failed attempts before the task is failed
  double timeout_s = 0;                   ///< wall-clock limit per attempt; 0 = none
  int priority = 0;                       ///< higher is claimed first
  Json tags = Json::object();             ///< free-form, e.g. {"description": "..."}
};

/// A stored task with its queue state.
struct Task {
  std::int64_t id = 0;
  std::string project_name;
  std::int64_t time = 0;  ///< creation, UTC microseconds
  TaskSpec spec;
  TaskStatus status = TaskStatus::kPending;
  int attempt = 0;        ///< number of claims so far; fences completion
  int failures = 0;       ///< failed attempts so far
  std::string lease_owner;
  std::int64_t lease_expires = 0;  ///< UTC microseconds; meaningful while running
  std::int64_t started_at = 0;
  std::int64_t finished_at = 0;
  Json result;            ///< the task's results (null until finished)
  std::string error;      ///< why the last attempt failed
  std::string log_tail;   ///< last lines of the last attempt's output

  /// Every field as JSON for display and `--json` (a script task's script as script_name,
  /// script_sha256 and script_bytes, its size, not its text); non-finite numbers (in hyperparameters,
  /// tags, result) in their {"$numberDouble": ...} form (encode_non_finite in document.h).
  Json to_json() const;
};

/// Which pending task a claim takes first (after priority).
enum class ClaimOrder { kNewestFirst, kOldestFirst };

}  // namespace tensorhub
