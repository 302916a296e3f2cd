// The tuner's collection of the hub: one document per search ({"kind": "search", "search":
// NAME, ...}: its space, oracle and objective) and the oracle's saved state ({"kind": "state",
// "search": NAME, "seq": N, ...}), read back by a resumed tuner and by the dashboard's Searches
// page. The trials themselves are tasks (queue/), their per-epoch values epoch reports
// (queue/epoch_report.h).
#pragma once

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// The collection the tuner's documents are stored in (Hub::save_document, find_documents).
inline constexpr Collection kTrials{"trials"};

}  // namespace tensorhub
