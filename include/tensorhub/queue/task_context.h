// TaskContext: what a task program reads from the runner and how it reports results.
//
// The runner starts each task as a child process with these environment variables
// (DESIGN.md): TENSORHUB_URI, TENSORHUB_PROJECT, TENSORHUB_TASK_ID,
// TENSORHUB_HYPER_PARAMETERS (a JSON object) and TENSORHUB_RESULT_FILE. A task writes its
// results as a JSON object to the result file; the runner stores them and finishes the task
// only if every saved_result_key is present. Any program in any language can do the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensorhub/store/document.h"

namespace tensorhub {

class Hub;

class TaskContext {
 public:
  /// Reads the runner's environment. Outside a runner (no TENSORHUB_TASK_ID) it still works:
  /// the hub is TENSORHUB_URI or default_hub_uri(), the project TENSORHUB_PROJECT or
  /// "default", no hyperparameters, and results are only kept in memory.
  /// Throws InvalidArgument if TENSORHUB_HYPER_PARAMETERS is not a JSON object.
  static TaskContext from_environment();

  /// True when started by a runner.
  bool under_runner() const { return task_id_ != 0; }
  std::int64_t task_id() const { return task_id_; }
  const std::string& hub_uri() const { return hub_uri_; }
  const std::string& project_name() const { return project_; }
  const Json& hyper_parameters() const { return hyper_parameters_; }

  /// The hyperparameter `name` converted to T, or `fallback` when absent.
  /// Throws InvalidArgument naming the parameter when it has another type.
  template <typename T>
  T get(const std::string& name, const T& fallback) const {
    if (!hyper_parameters_.contains(name)) return fallback;
    try {
      return hyper_parameters_.at(name).get<T>();
    } catch (const std::exception&) {
      throw_type_error(name);
    }
  }

  /// Records result `key` = `value` and rewrites the result file (atomically: temporary file
  /// then rename), so results set before a crash are kept. Throws Unavailable if the file
  /// cannot be written.
  void set_result(const std::string& key, const Json& value);
  const Json& results() const { return results_; }

  /// Under a runner, stores one epoch's metrics as an epoch report of this task's attempt
  /// (TENSORHUB_ATTEMPT; tensorhub/queue/epoch_report.h), so a tuner (or a person) can follow
  /// a training live; `epoch` is 0-based as in Keras's on_epoch_end and
  /// `logs` a JSON object such as {"loss": 0.41, "val_accuracy": 0.85}. Outside a runner it
  /// does nothing. The hub is opened on the first call (OpenMode::kExisting) and kept.
  /// Throws InvalidArgument for non-object logs, NotFound when there is no hub at
  /// TENSORHUB_URI or the task is not in it, and what save_trial throws (Unavailable, ...).
  void report_epoch(int epoch, const Json& logs);

  TaskContext();
  ~TaskContext();
  TaskContext(TaskContext&&) noexcept;
  TaskContext& operator=(TaskContext&&) noexcept;

 private:
  [[noreturn]] void throw_type_error(const std::string& name) const;

  std::int64_t task_id_ = 0;
  std::string hub_uri_;
  std::string project_;
  std::string result_file_;
  Json hyper_parameters_ = Json::object();
  Json results_ = Json::object();
  std::unique_ptr<Hub> hub_;  // opened by the first report_epoch
};

}  // namespace tensorhub
