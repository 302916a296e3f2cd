// Lineage: where a model came from, recorded by Hub::save_model without the caller asking, as
// the model's "lineage" tag:
//   {"task_id": 5, "attempt": 1, "task_name": "mnist", "hyper_parameters": {...},
//    "command": "./train.sh 0.01" | "spec_sha256": "..." | "script_name": "t.py", "script_sha256": "...",
//    "datasets": [{"id": 3, "dataset_name": "mnist", "sha256": "..."}],
//    "dataset_ids": [3], "dataset_sha256": ["..."],
//    "tensorhub_version": "0.1.0", "git_commit": "...", "host": "node17"}
// A caller's own "lineage" tag is kept as given (null: record none).
// The task's part comes from the runner, which passes it to its task in TENSORHUB_LINEAGE (a
// JSON object; absent outside a runner); the datasets are those this process read from a hub
// (Hub::find_top_dataset, find_sharded_dataset) before the save. A dataset's "sha256" is its
// content's: the SHA-256 of its tensors blob, or for a sharded dataset the SHA-256 of its
// shards' "name sha256\n" lines in name order. The flat dataset_ids / dataset_sha256 arrays
// let a filter select by element (`model list --filter '{"lineage.dataset_ids": 3}'`), which
// the store's filters do on arrays but not through arrays of objects.
#pragma once

#include <string>

#include "tensorhub/core/json.h"
#include "tensorhub/store/document.h"

namespace tensorhub {

class Hub;

/// The environment variable a runner sets for its task: the task's lineage as JSON text.
inline constexpr const char* kLineageEnv = "TENSORHUB_LINEAGE";

/// Records that this process read dataset `dataset` (a document of the datasets collection),
/// for the lineage of the models it saves afterwards; a dataset read twice is recorded once.
/// Thread-safe.
void note_dataset_read(const Document& dataset);

/// The content hash lineage records for dataset `dataset` (see above).
std::string dataset_content_sha256(const Document& dataset);

/// The lineage a model saved now records (the object above): TENSORHUB_LINEAGE's fields when
/// set (a value that is not a JSON object is kept as {"runner_lineage_error": ...} rather than
/// failing the save), the datasets this process read, the tensorhub version and commit, and
/// the host name. Thread-safe.
Json current_lineage();

/// The chain back from `model` (a document of the models collection) to its datasets, for
/// `tensorhub model show ID --lineage` and the dashboard's model page:
///   {"model": {"id", "model_name", "time"}, "recorded": true, ...the lineage tag's fields...,
///    "datasets": [{"id", "dataset_name", "sha256", "in_hub", "unchanged"}, ...]}
/// where "in_hub" says a dataset of that id is still in the model's project and "unchanged"
/// that its content hash is still the recorded one. A model without a lineage object (saved
/// before tensorhub recorded it, or with "lineage": null) gives {"model": ..., "recorded": false}.
/// Throws what Hub::find_documents throws.
Json lineage_chain(Hub& hub, const Document& model);

/// Forgets the datasets this process read (tests, and programs that save models of several
/// unrelated trainings in one process).
void clear_datasets_read();

}  // namespace tensorhub
