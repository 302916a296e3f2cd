// The dashboard's task detail (#/tasks/<id>): what each attempt of a task used
// (task_attempt.h) beside the task's epoch reports (epoch_report.h), for GET /api/tasks/<id>/usage.
#pragma once

#include <cstdint>

#include "tensorhub/core/json.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// {"task": {"id", "task_name", "status", "attempt", "max_attempts", "resources", "waiting_for"
/// (both as tasks_json of dashboard_api.h)}, "attempts": [TaskAttempt::to_json
/// with its gpu_samples, first attempt first], "epochs": [{"attempt", "epoch", "logs"}, oldest
/// first; non-finite values as {"$numberDouble": ...}]}. Throws NotFound for a task id not in
/// `hub`'s project.
Json task_usage_json(Hub& hub, std::int64_t task_id);

}  // namespace tensorhub
