// TensorBoard event files: scalars, histograms, the hparams plugin and the model's graph.
//
// Format source: an event file is a TFRecord file (tensorhub/data/tfrecord.h, no compression)
// of serialized Event messages (tensorflow/core/util/event.proto; ours is
// proto/tensorhub/tf/event.proto with the same field numbers), named as TensorFlow's
// EventFileWriter names it, events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>
// (TensorBoard only needs "tfevents" in the name). The first record is an Event with
// file_version "brain.Event:2", as tensorflow/core/util/events_writer.cc writes it.
// TensorBoard reads these files as they grow; it sees the events that were flushed.
//
// Thread safety: every method may be called from any thread; calls are serialised by an
// internal mutex, so events from one thread keep their order.
//
// Example:
//   tensorhub::EventFileWriter writer("logs/run1");
//   writer.add_scalar("loss", 0.25, /*step=*/100);
//   writer.close();
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/summary/hparams.h"

namespace tensorhub {

/// TensorFlow's SessionLog.SessionStatus (event.proto), with its numbers.
enum class SessionLogStatus { kStart = 1, kStop = 2, kCheckpoint = 3 };

/// Options for EventFileWriter; the defaults are TensorFlow's.
struct EventFileWriterOptions {
  /// Appended to the file name (tf.summary.create_file_writer's filename_suffix), e.g. ".v2".
  std::string filename_suffix{};
  /// An add_* call also flushes when the last flush is at least this many seconds old
  /// (TensorFlow's flush_secs, 120). 0 flushes after every event.
  double flush_secs = 120;
};

/// One node of the graph EventFileWriter::add_graph writes: a TensorFlow NodeDef
/// (tensorflow/core/framework/node_def.proto) with the fields TensorBoard's graph view reads.
struct GraphNode {
  /// Unique within the graph; "/" separates name scopes, which TensorBoard draws as groups.
  std::string name{};
  /// The node's operation type (TensorBoard shows it as the node's op).
  std::string op{};
  /// Names of the nodes that feed this one, in order (TensorBoard draws an edge from each).
  std::vector<std::string> input{};
  /// String attrs (AttrValue.s), e.g. {"keras_class": "Dense"}.
  std::map<std::string, std::string> string_attrs{};
  /// Type attrs (AttrValue.type): TensorFlow DataType numbers, see tf_data_type.
  std::map<std::string, int> type_attrs{};
};

/// TensorFlow's DataType number (tensorflow/core/framework/types.proto) of a dtype name as
/// tf.as_dtype reads it (TensorBoard's tensorflow_stub/dtypes.py, checked there): "float32" and
/// "float" 1, "float64" and "double" 2, "int32" 3, "uint8" 4, "int16" 5, "int8" 6, "string" 7,
/// "complex64" 8, "int64" 9, "bool" 10, "bfloat16" 14, "uint16" 17, "complex128" 18,
/// "float16" and "half" 19, "uint32" 22, "uint64" 23; nullopt for any other name.
std::optional<int> tf_data_type(std::string_view name);

/// Writes one TensorBoard event file in a log directory.
class EventFileWriter {
 public:
  /// Creates `logdir` (and its parents) if needed, then the file
  /// events.out.tfevents.<seconds>.<hostname>.<pid><filename_suffix> in it (if that name is
  /// taken, ".1", ".2", ... is appended), and writes and flushes the file_version event
  /// (wall_time = now, step 0, file_version "brain.Event:2").
  /// Throws Unavailable naming `logdir` if the directory cannot be created or the file cannot
  /// be created or written in it (e.g. no write permission).
  explicit EventFileWriter(const std::filesystem::path& logdir, EventFileWriterOptions options = {});
  /// Calls close(); errors are swallowed here, so call close() to see them.
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// An Event{wall_time = now (seconds since the Unix epoch), step, summary{value{tag,
  /// simple_value}}}: the TF1 scalar summary, shown by TensorBoard's scalars dashboard.
  /// simple_value is a float32, so `value` is rounded to float.
  /// Throws Unavailable if writing fails, FailedPrecondition after close().
  void add_scalar(std::string_view tag, double value, std::int64_t step);

  /// An Event with summary{value{tag, histo}}, histo = make_histogram(values) (histogram.h):
  /// TensorFlow's default exponential buckets, empty runs collapsed as TensorFlow writes them.
  /// `values` points to `n` floats (n may be 0). Throws InvalidArgument naming the tag if a
  /// value is NaN or infinite (nothing is written then), else as add_scalar.
  void add_histogram(std::string_view tag, const float* values, std::size_t n, std::int64_t step);
  void add_histogram(std::string_view tag, std::span<const float> values, std::int64_t step);

  /// The model's conceptual graph for TensorBoard's graph plugin, as Keras's TensorBoard
  /// callback writes it (keras_model_summary in keras/callbacks.py): an Event{wall_time = now,
  /// step, summary{value{tag, metadata{plugin_data{plugin_name "graph_keras_model", content
  /// "1"}}, tensor{dtype DT_STRING, shape [], string_val keras_json}}}}. keras_json is the
  /// model as Keras's Model.to_json() gives it (keras_model_json.h makes it from model.json);
  /// TensorBoard's keras_util.keras_model_to_graph_def draws it. Keras writes tag "keras" at
  /// step 0 into the train run. Throws as add_scalar.
  void add_keras_model(std::string_view tag, std::string_view keras_json, std::int64_t step = 0);

  /// The run's op graph, as tf.compat.v1.summary.FileWriter.add_graph writes a TensorFlow graph:
  /// an Event{wall_time = now, step, graph_def = a serialized GraphDef{node = one NodeDef{name,
  /// op, input, attr} per entry of `nodes`, in order}} (GraphDef and NodeDef of
  /// tensorflow/core/framework/graph.proto and node_def.proto; ours is
  /// proto/tensorhub/tf/graph.proto with the same field numbers). No versions are written: the
  /// graph is not made by a TensorFlow producer. TensorBoard's GRAPHS tab shows it as the run's
  /// "Op graph" (graphs plugin, tag-less graph "__run_graph__"); a run has one, so a later
  /// add_graph into the same run replaces it for TensorBoard (event_accumulator keeps the newest
  /// graph_def and never purges it on a SessionLog START). Throws InvalidArgument (nothing is
  /// written) if a node has an empty name, two nodes share a name, or an input names no node of
  /// `nodes`; else as add_scalar.
  void add_graph(const std::vector<GraphNode>& nodes, std::int64_t step = 0);

  /// The hparams plugin's experiment summary (tag "_hparams_/experiment"): an Experiment with
  /// time_created_secs = now, one HParamInfo per `hparams` entry (name, display_name,
  /// description, type and domain as hparams.h describes) and one MetricInfo per `metrics`
  /// entry. Format source: tensorboard/plugins/hparams/summary.py experiment_pb (see the note
  /// after add_hparams_session_end). Usually written once, in the parent log directory of the
  /// sessions' runs. Throws InvalidArgument if an HParam has no name, has both `values` and
  /// `interval`, mixes kinds in `values`, or has an interval with min_value > max_value;
  /// else as add_scalar.
  void add_hparams_config(const std::vector<HParam>& hparams, const std::vector<HParamMetric>& metrics);

  /// The session-start summary (tag "_hparams_/session_start_info"): SessionStartInfo with the
  /// hyperparameter values of this run, start_time_secs = now and the optional group_name
  /// (sessions with the same group are averaged together; "" = a group of its own).
  /// Throws as add_scalar.
  void add_hparams_session_start(const std::map<std::string, HParamValue>& hparams,
                                 std::string_view group_name = {});

  /// The session-end summary (tag "_hparams_/session_end_info"): SessionEndInfo{status,
  /// end_time_secs = now}. Throws as add_scalar.
  void add_hparams_session_end(SessionStatus status);

  // All three hparams summaries are written as tensorboard/plugins/hparams/summary.py
  // (experiment_pb, session_start_pb, session_end_pb) and PyTorch's
  // torch.utils.tensorboard.summary.hparams write them: an Event at step 0 with one
  // Summary.Value{tag, metadata{plugin_data{plugin_name "hparams", content = serialized
  // HParamsPluginData{version 0, <experiment | session_start_info | session_end_info>}}}}
  // and no value (TensorBoard fills in an empty tensor on load).

  /// An Event{wall_time = now, step, session_log{status, checkpoint_path, msg}}, as
  /// tf.compat.v1.summary.FileWriter.add_session_log writes it; flushed at once.
  /// TensorBoard reads a START at step s as a restart of the run (this writer's directory, all
  /// of its event files in name order): it drops every event of the run read before the
  /// START whose step is >= s (event_accumulator's purge of orphaned data, applied to files
  /// whose file_version is "brain.Event:2", as ours), so a training resumed at step s
  /// replaces the stale points of the run it resumes instead of drawing back over them.
  /// TensorFlow's SummarySaverHook and Supervisor write a START at the global step each
  /// session starts at. Throws as add_scalar.
  void add_session_log(SessionLogStatus status, std::int64_t step, std::string_view msg = {},
                       std::string_view checkpoint_path = {});

  /// Hands every buffered event to the operating system so TensorBoard can read it.
  /// Throws Unavailable if writing fails, FailedPrecondition after close().
  void flush();

  /// Flushes and closes the file. Idempotent. Throws Unavailable if writing fails.
  void close();

  /// The event file's path.
  const std::filesystem::path& path() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorhub
