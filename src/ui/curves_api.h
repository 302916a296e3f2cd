// The Curves view's JSON API (`tensorhub ui`, under /api/): which series can be plotted, and a
// series reduced on the server to a few points per pixel. Sources:
//   "epochs"  the per-epoch reports of tasks (queue/epoch_report.h): run = the task id, tags =
//             the keys of its logs, step = the 0-based epoch, wall = when the report was stored;
//             only the reports of the task's latest attempt that reported;
//   "logs"    the project's training logs (Hub::find_training_logs, e.g. HubLogger's): a run is
//             the logs of one "task_id" ("task_id=12"), else of one set of string-valued fields
//             ("name=256-128"), else "all"; step = the "epoch" field (else the log's position);
//   "logdir"  TensorBoard event files under `tensorhub ui --logdir DIR` (summary/
//             event_file_reader.h): run = a directory relative to DIR ("fit/train"), its scalar
//             and histogram tags, and its hparams plugin session.
// NaN and infinities are never numbers of a series: they leave as marks (their position and
// "NaN", "Infinity" or "-Infinity"), so that they cannot stretch or break a chart's axis.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/core/json.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/summary/event_file_reader.h"

namespace tensorhub {

/// One point of a series: step (epoch for "epochs"), wall time (seconds since the Unix epoch)
/// and value (NaN and infinities kept).
struct SeriesPoint {
  std::int64_t step = 0;
  double wall_time = 0;
  double value = 0;
};

/// The x axis of a chart: the step (or epoch), the wall time, or the seconds since the
/// series' first point.
enum class SeriesX { kStep, kWall, kRelative };

/// What /api/scalars reads from its query string.
struct SeriesQuery {
  std::string source;  ///< "epochs", "logs" or "logdir"
  std::string run;
  std::string tag;
  SeriesX x = SeriesX::kStep;  ///< ?x=step|wall|relative
  int width = 1000;            ///< ?width=, the chart's width in pixels (1..20000): buckets of the reduction
  bool reduce = true;          ///< ?reduce=0 sends every point (the naive baseline of bench/ui_curves.mjs)
  double smoothing = 0;        ///< ?smoothing=, TensorBoard's weight in [0, 1)
};

/// Parses /api/scalars' parameters (empty strings keep the defaults; source, run and tag are
/// required). Throws InvalidArgument naming the parameter: a missing one, an unknown source
/// or x, a width outside 1..20000, reduce not 0 or 1, smoothing outside [0, 1).
SeriesQuery parse_series_query(const std::string& source, const std::string& run, const std::string& tag,
                               const std::string& x, const std::string& width, const std::string& reduce,
                               const std::string& smoothing);

/// Event files read once and kept while their files are unchanged (same names, sizes and
/// modification times), so that a chart's repeated requests do not parse a run's 100,000
/// events again. Thread-safe.
class EventRunCache {
 public:
  EventRunCache();
  ~EventRunCache();
  /// The events of run directory `dir` (read_run_events' errors). Read again when a file of
  /// it changed.
  std::shared_ptr<const RunEvents> get(const std::filesystem::path& dir);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// GET /api/runs: everything that can be plotted,
///   {"logdir": DIR or null, "runs": [{"source", "run", "name", "tags": [...], "points": n,
///    "histograms": [...] (logdir), "hparams": {"hparams": {...}, "group_name", "status",
///    "start_time_secs", "end_time_secs"} (logdir runs with a session), "status" (epochs: the
///    task's status)}]}
/// `logdir` empty: no logdir runs; `hub` null (`tensorhub ui --logdir` where there is no hub):
/// only logdir runs. Throws what Hub throws; NotFound if `logdir` is not a directory; DataLoss
/// for a corrupt event file.
Json runs_json(Hub* hub, const std::filesystem::path& logdir, EventRunCache& cache);

/// The points of one series in x order (steps ascending; equal steps in the order written).
/// Throws NotFound, naming what is missing, for an unknown source, run or tag (a logdir run
/// must be one find_event_runs lists: no path outside DIR is ever read), and for a hub source
/// (epochs, logs) when `hub` is null.
std::vector<SeriesPoint> load_series(Hub* hub, const std::filesystem::path& logdir, EventRunCache& cache,
                                     const std::string& source, const std::string& run, const std::string& tag);

/// The indices of the points a chart `buckets` pixels wide needs: the range of x (of the finite
/// points) is cut into `buckets` equal buckets and each keeps its first, last, minimum and
/// maximum finite point, so a spike of one point is never lost. Non-finite values are left
/// out (see nonfinite_marks). Ascending indices; every finite index when there are at most
/// 4 * buckets finite points. `x` is ascending; x.size() == y.size().
std::vector<std::size_t> reduce_series(const std::vector<double>& x, const std::vector<double>& y, int buckets);

/// TensorBoard's smoothing of `y` with `weight` in [0, 1) (its scalar chart's debiased
/// exponential moving average): over finite values last = last * w + (1 - w) * v, shown as
/// last / (1 - w^n) after n finite values; a non-finite value is shown as itself and does
/// not enter the average; a constant series is shown unchanged.
std::vector<double> tensorboard_smoothing(const std::vector<double>& y, double weight);

/// GET /api/scalars: the series reduced for the chart,
///   {"source", "run", "tag", "x": "step"|"wall"|"relative", "count": all points,
///    "reduced": bool, "xs": [...], "steps": [...], "ys": [...], "smoothed": [...],
///    "marks": [{"x", "step", "value": "NaN"|"Infinity"|"-Infinity"}],
///    "min": finite minimum or null, "max": finite maximum or null, "start_wall": seconds}
/// xs/steps/ys/smoothed are parallel (finite points only); smoothed is TensorBoard's smoothing
/// over the whole series (not over the points sent), so it equals TensorBoard's at each point
/// sent. Marks: every non-finite point unreduced, else the first of each kind per bucket.
Json scalars_json(const std::vector<SeriesPoint>& points, const SeriesQuery& query);

/// GET /api/scalars.csv: every point, unreduced, as "step,wall_time,value" rows under that
/// header (value "nan", "inf" or "-inf" when not finite; numbers with 17 significant digits).
std::string scalars_csv(const std::vector<SeriesPoint>& points);

/// GET /api/histograms?run=&tag=: a logdir run's histograms as TensorBoard's distribution view
/// draws them,
///   {"run", "tag", "bps": [0, 668, ..., 10000], "steps": [...], "wall": [...],
///    "percentiles": [[9 values] per step], "min": [...], "max": [...], "num": [...]}
/// Throws NotFound for an unknown run or tag, or when no --logdir was given.
Json histograms_json(const std::filesystem::path& logdir, EventRunCache& cache, const std::string& run,
                     const std::string& tag);

}  // namespace tensorhub
