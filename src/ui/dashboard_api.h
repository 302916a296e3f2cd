// The web dashboard's JSON API (`tensorhub ui`, served under /api/): what each view shows,
// built from one project of a hub through Hub's and TaskQueue's public functions. Each
// function answers one endpoint; UiServer (ui_server.h) maps URLs to them. Scripts may use the
// same endpoints; README's "The web dashboard" lists them.
//
// Non-finite numbers leave as MongoDB Extended JSON ({"$numberDouble": "NaN"}), as `--json`
// does (document.h). Every function takes the Hub it reads: one thread at a time per Hub.
#pragma once

#include <cstdint>
#include <string>

#include "tensorhub/core/json.h"
#include "tensorhub/queue/task.h"
#include "tensorhub/store/document.h"
#include "tensorhub/store/hub.h"
#include "model_index.h"

namespace tensorhub {

/// GET /api/projects: every project of the hub (Hub::list_projects) with its counts, the
/// served one (--project) first with "served": true, even while it holds nothing:
///   {"projects": [{"name": P, "served": true, "datasets": n, "models": n, "searches": n,
///                  "tasks": {"pending": n, "running": n, "finished": n, "failed": n,
///                            "cancelled": n, "total": n}}, ...]}
/// (searches: `tensorhub tune` searches stored in the project). Counted by the database, no
/// document is read; running tasks whose lease expired are requeued first, as `task list`
/// does. Throws what Hub throws.
Json projects_json(Hub& hub);

/// GET /api/tasks: every task of the project, newest first, and a version that changes
/// whenever anything shown changes (status, attempt, result, ...):
///   {"version": "<hex>", "now": <UTC us>, "tasks": [{"id", "task_name", "status", "attempt",
///    "failures", "max_attempts", "runner", "created", "started", "finished", "duration_s",
///    "hyper_parameters", "result", "error", "error_tail", "resources", "waiting_for", "command",
///    "last_epoch", "attempts"}]}
/// resources: what the task asks for (task_resources_json), null when nothing. waiting_for:
/// for a pending task no live runner could take, why (TaskQueue::waiting_for: "no live
/// runner", "no live runner takes task name \"x\"", "needs 2 GPUs; the live runner has 0"), else
/// null; it changes the version too (a runner that comes or goes).
/// last_epoch: a running task's last epoch report of its current attempt (epoch_report.h),
/// {"epoch": 0-based, "logs": {...}}, else null; a new report changes the version too.
/// duration_s: finished - started for a task that ended, now - started while running, null
/// before it started. error_tail: the last `kErrorTailBytes` bytes of the failed attempt's
/// output (empty unless the task failed or has failed attempts). Times are UTC microseconds.
/// attempts: what each attempt used (TaskAttempt::to_json without gpu_samples), first first.
Json tasks_json(Hub& hub);

/// A task's resources request for the dashboard: TaskResources::to_json ({"cpus", "gpus",
/// "memory", "memory_bytes"}) with "text" ("2 cpus, 1 GPU, 8 GiB"), or null when it asks
/// for nothing.
Json task_resources_json(const TaskResources& r);

/// Bytes of a task's output tail that /api/tasks sends with an error.
inline constexpr std::size_t kErrorTailBytes = 2000;

/// What /api/models reads from its query string.
struct ModelQuery {
  Json filter = Json::object();  ///< ?filter=, MongoDB-style as `model list --filter`
  SortSpec sort{{"time", -1}};   ///< ?sort=test_accuracy:-1 (parse_sort's text)
  std::int64_t offset = 0;       ///< ?offset=, first row of the page
  std::int64_t limit = 50;       ///< ?limit=, rows per page (1..1000)
};

/// Parses /api/models' parameters (`filter` JSON text, `sort` "key:-1,key2:1", `offset`,
/// `limit`; empty strings keep the defaults). Throws InvalidArgument naming the parameter
/// and what was wrong (not JSON, not an object, a bad direction, a limit outside 1..1000).
ModelQuery parse_model_query(const std::string& filter, const std::string& sort, const std::string& offset,
                             const std::string& limit);

/// GET /api/models: a page of the project's models in the query's order, with the total and
/// every tag key seen on the page's models (the leaderboard's columns):
///   {"total": n, "offset": o, "limit": l, "keys": ["model_name", "test_accuracy", ...],
///    "models": [{"id", "model_name", "time", "tags": {...}}]}
/// Without a filter the page is sorted by `index` (model_index.h) when one is given; with a
/// filter, or without an index, by the database. Both in the leaderboard's order, which is the
/// store's (MongoDB's) but for the first sort key's NaN, null and missing values: those come
/// last in both directions, NaN first (MLflow's rule), so that sorting by a loss ascending
/// opens on the best runs, not on diverged ones. The CLI and the Hub API keep MongoDB's order.
/// Throws InvalidArgument for a filter the store refuses (e.g. {"$regex": ...}).
Json models_json(Hub& hub, const ModelQuery& query, ModelIndex* index = nullptr);

/// GET /api/models/<id>: the model's tags and its architecture as a table of layers,
///   {"id", "model_name", "time", "tags", "architecture": <model.json>,
///    "input_shape": [...], "output_shape": [...], "total_params": n,
///    "layers": [{"name", "type", "input_shape", "output_shape", "params"}],
///    "serve_command": "tensorhub serve --hub ... --hub_model NAME --hub_filter '{\"id\": ID}' ..."}
/// serve_command serves exactly this model (shell_quote'd, core/process.h; the hub URI without its
/// password).
/// params: trainable and non-trainable weights of the layer, as Keras's summary() counts them
/// (Dense in*units + units; Conv2D kh*kw*cin*filters + filters; BatchNormalization 4 per
/// channel with center and scale). Throws NotFound for an id with no model in the project,
/// InvalidArgument (via parse_network) for a model.json that does not parse.
Json model_json(Hub& hub, std::int64_t id);
/// The aliases of model name `name` as to_json(ModelAlias) objects, by alias (model_json's "aliases").
Json aliases_json(Hub& hub, const std::string& name);
/// The same for a model document already found (find_model).
Json model_json(Hub& hub, const Document& model);

/// The model document of `id` in the hub's project. Throws NotFound naming the id and project.
Document find_model(Hub& hub, std::int64_t id);

/// GET /api/models/<id>/model.json and /api/models/<id>/weights.safetensors: the bytes of that
/// part of the model, verified as every blob. Throws NotFound for an unknown model or a model
/// saved without that part, InvalidArgument for another part name.
std::vector<std::byte> model_part(Hub& hub, std::int64_t id, const std::string& part);

}  // namespace tensorhub
