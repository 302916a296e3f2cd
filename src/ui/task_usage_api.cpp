// The dashboard's task detail (task_usage_api.h).
#include "task_usage_api.h"

#include "dashboard_api.h"
#include "tensorhub/store/document.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/queue/task_queue.h"

namespace tensorhub {

Json task_usage_json(Hub& hub, std::int64_t task_id) {
  TaskQueue queue(hub);
  const Task t = queue.get_task(task_id);  // NotFound: 404
  Json attempts = Json::array();
  for (const auto& a : queue.find_attempts(task_id)) attempts.push_back(a.to_json());
  Json epochs = Json::array();
  for (const auto& r : find_epoch_reports(hub, {task_id}))
    epochs.push_back({{"attempt", r.attempt ? Json(*r.attempt) : Json()}, {"epoch", r.epoch}, {"logs", encode_non_finite(r.logs)}});
  const auto waiting = queue.waiting_for({t});
  return {{"task", {{"id", t.id}, {"task_name", t.spec.task_name}, {"status", to_string(t.status)},
                    {"attempt", t.attempt}, {"max_attempts", t.spec.max_attempts},
                    {"resources", task_resources_json(t.spec.resources)},
                    {"waiting_for", waiting.empty() ? Json(nullptr) : Json(waiting.begin()->second)}}},
          {"attempts", std::move(attempts)},
          {"epochs", std::move(epochs)}};
}

}  // namespace tensorhub
