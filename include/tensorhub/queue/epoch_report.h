// Epoch reports: one epoch's metrics of a running task, kept in the hub's epoch_reports
// collection so that a tuner (ASHA's median stopping) or a person (`task show|list|wait`, the
// dashboard's curves) can follow a training live. TaskContext::report_epoch writes them; the
// command line, the dashboard and the Tuner read them. This is the one place that knows their
// stored form:
//   {"kind": "epoch", "task_id": <id>, "attempt": <attempt>, "epoch": <0-based>, "logs": {...}}
// (Hubs of tensorhub's store schema 2 kept them in the tuner's trials collection; the queue's
// schema, task_schema.cpp, moves them here.)
// Functions take the Hub they work on: use them from the thread that uses that Hub.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tensorhub/store/hub.h"

namespace tensorhub {

/// The collection epoch reports are stored in.
inline constexpr Collection kEpochReports{"epoch_reports"};

/// One stored epoch report.
struct EpochReport {
  std::int64_t id = 0;       ///< the document's id; later reports have larger ids
  std::int64_t time = 0;     ///< when it was stored, UTC microseconds since the epoch
  std::int64_t task_id = 0;
  /// The task attempt that reported it (TENSORHUB_ATTEMPT); nothing for a report stored
  /// without one, -1 for one whose attempt is not an integer.
  std::optional<std::int64_t> attempt;
  int epoch = 0;             ///< 0-based, as Keras's on_epoch_end
  Json logs = Json::object();  ///< e.g. {"loss": 0.41, "val_accuracy": 0.85}

  /// True unless the report names another attempt than `task_attempt`: a report of an earlier
  /// attempt (whose runner was SIGKILLed while its process went on) is not this attempt's
  /// progress. A report without an attempt counts for every attempt.
  bool of_attempt(std::int64_t task_attempt) const { return !attempt || *attempt == task_attempt; }
};

/// Stores epoch `epoch` (0-based) of attempt `attempt` of task `task_id` with its `logs` (a JSON
/// object) in `hub`'s project; returns the report's id. Throws InvalidArgument for non-object
/// logs, and what Hub::save_document throws (Unavailable, ...).
std::int64_t save_epoch_report(Hub& hub, std::int64_t task_id, std::int64_t attempt, int epoch, const Json& logs);

/// The reports of tasks `task_ids` in `hub`'s project with an id above `after_id` (0: all),
/// oldest first (ascending id), every attempt's. Queries bind at most 500 task ids each.
/// Throws what Hub::find_documents throws.
std::vector<EpochReport> find_epoch_reports(Hub& hub, const std::vector<std::int64_t>& task_ids,
                                            std::int64_t after_id = 0);

}  // namespace tensorhub
