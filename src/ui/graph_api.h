// The Graph view's JSON API (`tensorhub ui`, under /api/models/<id>/): a stored model's layers
// as a graph, with Keras's parameter totals, and one layer's weights as histograms, with how
// they moved over the epochs when the model was trained with the TensorBoard callback.
//
// How a model links to its TensorBoard run: the model's tag "log_dir", the log_dir its
// TensorBoard callback wrote into (a spec task's save_model adds it; `save_model(...,
// tags={"log_dir": ...})` from Python or C++). The callback writes its weight histograms into
// <log_dir>/train (callbacks.h), so the run is the one of `tensorhub ui --logdir DIR`'s runs
// (find_event_runs) whose directory is <log_dir>/train, log_dir taken as a path relative to DIR
// first, then as it is (absolute, or relative to the directory `tensorhub ui` was started in).
// Only runs find_event_runs lists are ever read: a tag cannot make the server read a file
// outside DIR.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/core/json.h"
#include "tensorhub/store/hub.h"
#include "curves_api.h"

namespace tensorhub {

/// GET /api/models/<id>/graph: what the Graph view draws,
///   {"id", "model_name", "tags", "error": null | "why the graph cannot be drawn",
///    "architecture": <model.json> (null when it is not JSON), "architecture_text": its bytes
///    as text (only when it is not JSON),
///    "input_shape", "output_shape",
///    "layers": [{"name", "type", "input_shape", "output_shape", "params",
///                "trainable_params", "non_trainable_params",
///                "weights": [{"name", "shape", "dtype"}]}],
///    "total_params", "trainable_params", "non_trainable_params",
///    "run": logdir run name | null, "run_note": why there is no run ("" with one)}
/// Layer rows are model_json's (dashboard_api.h), Input layers included (0 parameters);
/// params as Keras's summary() counts them, of which non-trainable: BatchNormalization's
/// moving_mean and moving_variance (2 per channel), as Keras. weights: the layer's tensors in
/// the stored weights.safetensors ("<layer>.<weight>"), empty for a model saved without weights.
/// A model.json that is not JSON or that parse_network refuses is not an HTTP error: the
/// answer then holds "error" (parse_network's message naming the field) and no layers, so the
/// page can say what is wrong. Throws NotFound for an unknown id or a model without
/// model.json, DataLoss for a stored part that fails verification.
Json graph_json(Hub& hub, std::int64_t id, const std::filesystem::path& logdir);

/// Number of equal-width bins of the layer histograms (TensorFlow 2's tf.summary.histogram
/// default, `buckets=30`).
inline constexpr int kWeightBins = 30;

/// GET /api/models/<id>/layers/<name>/histograms: the layer's stored weights, each tensor as
///   {"name", "shape", "dtype", "count", "min", "max", "mean", "std", "non_finite",
///    "edges": [kWeightBins + 1 ascending], "counts": [kWeightBins],
///    "history": null | {"run", "tag", "steps": [...], "min": [...], "max": [...], "num": [...],
///                       "edges": [kWeightBins + 1], "counts": [[kWeightBins] per step]}}
/// in {"id", "layer", "tensors": [...], "run": run | null, "run_note"}. The bins are equal
/// over [min, max] (a constant tensor: [v - 0.5, v + 0.5]); a value equal to max counts in the
/// last bin; std is the population standard deviation. min, max, mean, std and the bins are
/// of the finite values; non_finite counts the NaN and infinite ones (a diverged training's),
/// which no bin holds. history: the linked run's histogram
/// events whose tag is the tensor's name (the TensorBoard callback's histogram_freq), each
/// HistogramProto's buckets taken as TensorBoard's data_compat reads them ([left, right,
/// count], left = the previous limit or min, right = the limit or, for the last, max), each
/// count spread evenly over its bucket and summed into kWeightBins equal bins over the range
/// of all steps (counts are then fractional; buckets with a NaN or infinite bound, and steps
/// whose min or max is not finite, are left out of the bins). Only F32 and F64 tensors are binned; others have
/// empty edges and counts. Throws NotFound for an unknown id, a model without weights, or a
/// layer with no tensor in them; InvalidArgument for a layer name the model.json lacks.
Json layer_histograms_json(Hub& hub, std::int64_t id, const std::string& layer, const std::filesystem::path& logdir,
                           EventRunCache& cache);

/// The logdir run a model's tags link to (see above), or nullopt with `note` saying why there
/// is none (no --logdir, no "log_dir" tag, no such run). Reads only the listing of `logdir`.
std::optional<std::string> linked_run(const Json& tags, const std::filesystem::path& logdir, std::string& note);

/// kWeightBins equal bins over [lo, hi] (lo < hi) of histogram buckets given as parallel
/// left/right/count arrays, each count spread evenly over [left, right] (all of it into the
/// bin holding left when left == right). Buckets with a NaN or infinite left, right or count
/// are skipped; a NaN or infinite lo or hi, or hi <= lo, gives all zeros. Exposed for tests.
std::vector<double> rebin_buckets(const std::vector<double>& left, const std::vector<double>& right,
                                  const std::vector<double>& count, double lo, double hi, int bins = kWeightBins);

}  // namespace tensorhub
