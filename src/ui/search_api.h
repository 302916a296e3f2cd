// The dashboard's Searches and Hyperparameters views' JSON API (`tensorhub ui`, under /api/):
// `tensorhub tune` searches of the served project as the tuner stores them (tune/tuner.h: the
// search's documents in the trials collection, its trials' tasks tagged {"search", "trial_id"}),
// read with load_search_summary, and the hyperparameters and metrics of any set of runs as
// columns for a table and parallel coordinates. UiServer (ui_server.h) maps URLs to them.
//
// Non-finite numbers leave as MongoDB Extended JSON ({"$numberDouble": "NaN"}), as everywhere
// in the API. Times are UTC microseconds. Every function takes the Hub it reads (one thread at
// a time per Hub); the search's trials are read through a connection of their own.
#pragma once

#include <string>

#include "tensorhub/core/json.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// GET /api/searches: the project's searches, oldest first:
///   {"searches": [{"name", "oracle", "objective": "val_accuracy:max", "created", "done",
///     "reason", "trials": n, "statuses": {"completed": n, "running": n, ...},
///     "best": {"trial_id", "task_id", "score"} | null}]}
/// Throws what Hub throws; DataLoss for a search whose stored state is missing.
Json searches_json(Hub& hub);

/// GET /api/searches/<name>: one search as it runs,
///   {"name", "oracle", "objective", "metric": "val_accuracy", "maximize": true, "created",
///    "done", "reason", "version": "<hex>", "parameters": [space parameter names],
///    "best": {"trial_id", "task_id", "score"} | null,
///    "trials": [{"trial_id", "status", "task_id", "task_status", "bracket", "round", "epochs",
///                "initial_epoch", "parent_trial", "hyper_parameters": {space parameters},
///                "score", "epoch_values": {"<epoch>": value}, "started", "finished", "error",
///                "last_epoch": {"epoch", "logs"} | null}],
///    "brackets": [{"bracket": b, "rounds": [{"round": r, "epochs": e, "trials": [ids]}]}],
///    "best_so_far": [{"time_s", "trial_id", "score", "best"}]}
/// trials in trial-id order; bracket, round, epochs, initial_epoch and parent_trial are the
/// trial's "tuner/..." values (Hyperband's bracket and round; ASHA's rung is its round, its
/// bracket 0), null for other oracles. brackets: Hyperband's from the most exploratory down,
/// rounds (ASHA's rungs) in order. best_so_far: one point per trial with a score, in the order
/// their tasks ended, time_s after the search was created, best the best score up to it.
/// last_epoch: a running trial's last epoch report of its task's current attempt (epoch_report.h,
/// as /api/tasks), so trials are followed as they train even while no tuner reads the reports.
/// version changes whenever anything here changes. Throws NotFound for an unknown search.
Json search_json(Hub& hub, const std::string& name);

/// GET /api/hparams?search=NAME: the search's trials as rows of hyperparameters and metrics;
/// without a search (empty name), every task of the project with its hyper_parameters and the
/// numbers of its result. A row per trial or task, runs with no metric yet included:
///   {"source": "search" | "tasks", "search": NAME | null,
///    "objective": {"name", "maximize"} | null,
///    "columns": [{"name", "kind": "param" | "metric", "type": "number" | "string"}],
///    "rows": [{"id", "task_id", "status", "values": {column: value}}]}
/// A search's params are its space's parameters (and tuner/epochs for Hyperband and ASHA);
/// its first metric is the objective (the trial's score). A column is "number" when every value
/// in it is a number, else "string" (booleans and objects as text). Tasks' params leave out the
/// tuner's own "tuner/..." keys but tuner/epochs; "model_id" is no metric. Throws NotFound for
/// an unknown search.
Json hparams_json(Hub& hub, const std::string& search);

}  // namespace tensorhub
