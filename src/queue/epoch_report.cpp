// Epoch reports as documents of the epoch_reports collection (epoch_report.h).
#include "tensorhub/queue/epoch_report.h"

#include <algorithm>

#include "task_schema.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

constexpr const char* kEpochKind = "epoch";

// Filters on task ids are split so that no query binds more than this many values.
constexpr std::size_t kIdsPerQuery = 500;

EpochReport report_of(const Document& d) {
  EpochReport r;
  r.id = d.id;
  r.time = d.time;
  r.task_id = d.tags.value("task_id", std::int64_t{0});
  if (const auto it = d.tags.find("attempt"); it != d.tags.end())
    r.attempt = it->is_number_integer() ? it->get<std::int64_t>() : -1;
  r.epoch = d.tags.value("epoch", 0);
  r.logs = d.tags.value("logs", Json::object());
  return r;
}

// The hub, with the queue's tables ensured: their last step moved the reports of older hubs
// from the tuner's trials collection to kEpochReports.
Hub& with_queue_schema(Hub& hub) {
  hub.sql().ensure_schema(detail::task_schema());
  return hub;
}

}  // namespace

std::int64_t save_epoch_report(Hub& hub, std::int64_t task_id, std::int64_t attempt, int epoch, const Json& logs) {
  if (!logs.is_object()) throw InvalidArgument("epoch report: logs must be a JSON object, got " + logs.dump());
  return with_queue_schema(hub).save_document(
      kEpochReports,
      {{"kind", kEpochKind}, {"task_id", task_id}, {"attempt", attempt}, {"epoch", epoch}, {"logs", logs}}, Parts{});
}

std::vector<EpochReport> find_epoch_reports(Hub& hub, const std::vector<std::int64_t>& task_ids,
                                            std::int64_t after_id) {
  std::vector<EpochReport> out;
  with_queue_schema(hub);
  for (std::size_t i = 0; i < task_ids.size(); i += kIdsPerQuery) {
    const auto end = task_ids.begin() + static_cast<std::ptrdiff_t>(std::min(task_ids.size(), i + kIdsPerQuery));
    Json filter = {{"kind", kEpochKind},
                   {"task_id", {{"$in", Json(std::vector<std::int64_t>(task_ids.begin() + i, end))}}}};
    if (after_id > 0) filter["id"] = {{"$gt", after_id}};
    for (const Document& d : hub.find_documents(kEpochReports, filter, {{"id", 1}})) out.push_back(report_of(d));
  }
  if (task_ids.size() > kIdsPerQuery)
    std::sort(out.begin(), out.end(), [](const EpochReport& a, const EpochReport& b) { return a.id < b.id; });
  return out;
}

}  // namespace tensorhub
