// ModelIndex: the served project's model documents held in memory by `tensorhub ui`, so that the
// leaderboard's unfiltered pages (GET /api/models?sort=...) are sorted here instead of the
// database reading, parsing and sorting every document of the project at each request (30,000
// models: ~600 ms that way, a few ms this way; bench/ui_models.cpp).
//
// Kept exact at each request by two cheap queries: the models with an id above the largest
// held (appended), and the project's model count (any other difference, a deletion, reloads
// the whole set). Stored documents never change (the store has inserts and deletes, no
// updates), so ids and the count say exactly what changed. The order is the store's
// (SortSpec's: MongoDB's type order, then newest first), the same on SQLite and PostgreSQL.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorhub/core/mutex.h"
#include "tensorhub/store/document.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

class ModelIndex {
 public:
  /// The first `count` models of `hub`'s project in `sort` order (then newest first: time,
  /// then id, descending, as the store breaks ties), as Hub::find_models({}, sort, count)
  /// would answer, and how many models the project holds.
  /// Brings the index up to date first. Thread-safe (one request at a time reads it); `hub` is
  /// the calling thread's. Throws InvalidArgument for a sort field or direction the store
  /// refuses (validate_field_name's rule), and what Hub throws.
  /// With `absent_last` (the dashboard's leaderboard, MLflow's rule) a sort key's NaN, null and
  /// missing values come after every other value in both directions (NaN before null and
  /// missing); without it, the store's order (MongoDB's: missing and null, then NaN, lowest).
  std::pair<std::vector<Document>, std::int64_t> first(Hub& hub, const SortSpec& sort, std::int64_t count,
                                                       bool absent_last = false);

  /// Models the index holds (for tests).
  std::size_t size() const;

 private:
  void refresh(Hub& hub) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  mutable Mutex mutex_;
  std::vector<Document> docs_ TENSORHUB_GUARDED_BY(mutex_);  ///< ascending id
};

}  // namespace tensorhub
