#include "tensorhub/queue/task.h"

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"

namespace tensorhub {

std::string to_string(TaskStatus status) {
  switch (status) {
    case TaskStatus::kPending: return "pending";
    case TaskStatus::kRunning: return "running";
    case TaskStatus::kFinished: return "finished";
    case TaskStatus::kFailed: return "failed";
    case TaskStatus::kCancelled: return "cancelled";
  }
  return "unknown";
}

TaskStatus task_status_from_string(const std::string& text) {
  for (auto s : {TaskStatus::kPending, TaskStatus::kRunning, TaskStatus::kFinished,
                 TaskStatus::kFailed, TaskStatus::kCancelled})
    if (to_string(s) == text) return s;
  throw InvalidArgument("unknown task status \"" + text +
                        "\"; allowed: pending, running, finished, failed, cancelled");
}

Json Task::to_json() const {
  Json out = {{"id", id},
              {"project_name", project_name},
              {"time", format_time(time)},
              {"task_name", spec.task_name},
              {"status", to_string(status)},
              {"hyper_parameters", spec.hyper_parameters},
              {"saved_result_keys", spec.saved_result_keys},
              {"max_attempts", spec.max_attempts},
              {"timeout_s", spec.timeout_s},
              {"priority", spec.priority},
              {"attempt", attempt},
              {"failures", failures},
              {"tags", spec.tags},
              {"result", result}};
  if (!spec.command.empty()) out["command"] = spec.command;
  if (!spec.train_spec.is_null()) out["spec"] = spec.train_spec;
  if (!spec.script.empty()) {
    // The script's name and hash identify it; its text is TaskSpec::script (not printed).
    out["script_name"] = spec.script_name;
    out["script_sha256"] = spec.script_sha256;
    out["script_bytes"] = spec.script.size();
  }
  if (!spec.python.empty()) out["python"] = spec.python;
  if (!spec.resources.empty()) out["resources"] = spec.resources.to_json();
  if (!lease_owner.empty()) out["lease_owner"] = lease_owner;
  if (status == TaskStatus::kRunning) out["lease_expires"] = format_time(lease_expires);
  if (started_at) out["started_at"] = format_time(started_at);
  if (finished_at) out["finished_at"] = format_time(finished_at);
  if (!error.empty()) out["error"] = error;
  if (!log_tail.empty()) out["log_tail"] = log_tail;
  return encode_non_finite(out);
}

}  // namespace tensorhub
