// Reading TensorBoard event files: the scalars, histograms and hparams plugin sessions of a run,
// as TensorBoard's event_accumulator reads them.
//
// Format source: as event_file_writer.h (TFRecord framing, tensorhub/data/tfrecord.h, of Event
// messages, proto/tensorhub/tf/event.proto). A run is a directory; its events are those of every
// file directly in it whose name holds "tfevents", read in name order (TensorBoard's
// directory_loader order). Understood:
//   - TF1 scalars (Summary.Value.simple_value, float32) and TF2 scalars (Summary.Value.tensor,
//     field 8, a DT_FLOAT or DT_DOUBLE scalar tensor with plugin "scalars", as tf.summary.scalar
//     and Keras's TensorBoard callback in TF2 write them);
//   - TF1 histograms (Summary.Value.histo, HistogramProto);
//   - the hparams plugin's session_start_info / session_end_info (plugin "hparams").
// Other values (images, audio, graphs, TF2 histogram tensors) are skipped.
// A SessionLog START at step s drops the run's events read before it whose step is >= s
// (TensorBoard's purge of orphaned data after a restart), as EventFileWriter::add_session_log
// describes.
//
// Thread safety: free functions without shared state; call them from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/summary/hparams.h"
#include "tensorhub/summary/histogram.h"

namespace tensorhub {

/// One scalar of a run: its step, when it was written (seconds since the Unix epoch) and its
/// value (widened to double; NaN and infinities are kept as written).
struct ScalarEvent {
  std::int64_t step = 0;
  double wall_time = 0;
  double value = 0;
};

/// One histogram of a run at a step.
struct HistogramEvent {
  std::int64_t step = 0;
  double wall_time = 0;
  Histogram histogram;
};

/// An hparams plugin session: the run's hyperparameters and how it ended.
struct HParamsSession {
  std::map<std::string, HParamValue> hparams;
  std::string group_name;
  double start_time_secs = 0;
  /// kRunning while no session_end_info was read (TensorBoard shows such a session as running).
  SessionStatus status = SessionStatus::kRunning;
  double end_time_secs = 0;  ///< 0 while running
};

/// An hparams plugin experiment summary (hp.hparams_config): hyperparameter infos with their
/// domains, and metric infos.
struct HParamsExperiment {
  std::vector<HParam> hparams;
  std::vector<HParamMetric> metrics;
};

/// What a run's event files hold, by tag, each tag's events in the order read.
struct RunEvents {
  std::map<std::string, std::vector<ScalarEvent>> scalars;
  std::map<std::string, std::vector<HistogramEvent>> histograms;
  std::optional<HParamsSession> session;  ///< set when a session_start_info was read
  bool has_experiment = false;            ///< an "_hparams_/experiment" summary was read
  std::optional<HParamsExperiment> experiment;  ///< the last experiment summary read
  /// graph_keras_model summaries (EventFileWriter::add_keras_model): tag -> the model's
  /// Keras JSON, the last one read per tag.
  std::map<std::string, std::string> keras_models;
};

/// The events of every event file directly in `run_dir` (see above). A file that ends inside
/// a record (still being written) is read up to its last whole record. A histogram whose
/// bucket and bucket_limit differ in length is skipped (it cannot be read as buckets).
/// Throws NotFound if `run_dir` is not a directory, DataLoss naming the file for a corrupt
/// record (bad CRC) or an Event that does not parse, Unavailable if a file cannot be read.
RunEvents read_run_events(const std::filesystem::path& run_dir);

/// The events of one event file (see read_run_events; the purge applies within the file).
/// Throws as read_run_events.
RunEvents read_event_file(const std::filesystem::path& file);

/// The runs under `logdir`: every directory at or below it (symbolic links not followed) that
/// directly holds a file whose name contains "tfevents", as paths relative to `logdir` with
/// '/' separators ("." for `logdir` itself), sorted. Throws NotFound if `logdir` is not a
/// directory.
std::vector<std::string> find_event_runs(const std::filesystem::path& logdir);

/// The directory of a run named as find_event_runs names runs: `logdir` for ".", else
/// logdir / run. Only joins the two: callers check `run` against a listing first.
std::filesystem::path run_directory(const std::filesystem::path& logdir, const std::string& run);

/// The percentiles TensorBoard's distribution view draws for a histogram: the values at
/// basis points `bps` (default 0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000: the minimum,
/// -3..+3 standard deviations of a normal distribution, the maximum), interpolated linearly
/// within buckets as tensorboard/plugins/distribution/compressor.py's compress_histogram does
/// on the buckets TensorBoard derives from a HistogramProto ([min or the previous limit,
/// the limit or max, count]). A histogram of no values gives zeros.
std::vector<double> histogram_percentiles(const Histogram& histogram,
                                          const std::vector<double>& bps = {0, 668, 1587, 3085, 5000, 6915,
                                                                            8413, 9332, 10000});

}  // namespace tensorhub
