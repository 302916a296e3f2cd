// EventFileWriter: Events (proto/tensorhub/tf/event.proto) in a TFRecord file.
#include "tensorhub/summary/event_file_writer.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/hparams/plugin_data.pb.h"
#include "tensorhub/summary/histogram.h"
#include "tensorhub/tf/event.pb.h"
#include "tensorhub/tf/graph.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format_lite.h>

namespace tensorhub {

namespace hpb = ::tensorhub::hparams;  // generated from proto/tensorhub/hparams
namespace {

// tensorboard/plugins/hparams/metadata.py
constexpr const char* kHParamsPluginName = "hparams";
constexpr int kHParamsPluginDataVersion = 0;
constexpr const char* kExperimentTag = "_hparams_/experiment";
constexpr const char* kSessionStartInfoTag = "_hparams_/session_start_info";
constexpr const char* kSessionEndInfoTag = "_hparams_/session_end_info";

double now_seconds() { return static_cast<double>(now_micros()) / 1e6; }

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void set_value(google::protobuf::Value* out, const HParamValue& v) {
  if (v.is_number()) {
    out->set_number_value(v.number());
  } else if (v.is_bool()) {
    out->set_bool_value(v.boolean());
  } else {
    out->set_string_value(v.string());
  }
}

std::string kind_name(const HParamValue& v) {
  return v.is_number() ? "number" : v.is_bool() ? "bool" : "string";
}

void fill_hparam_info(hpb::HParamInfo* info, const HParam& hp) {
  if (hp.name.empty()) throw InvalidArgument("hparams config: an HParam has an empty name");
  info->set_name(hp.name);
  info->set_display_name(hp.display_name);
  info->set_description(hp.description);
  if (!hp.values.empty() && hp.interval) {
    throw InvalidArgument("hparams config: HParam '" + hp.name +
                          "' has both discrete values and an interval; give one domain");
  }
  if (hp.interval) {
    if (!(hp.interval->min_value <= hp.interval->max_value)) {
      throw InvalidArgument("hparams config: HParam '" + hp.name + "' has interval min_value " +
                            std::to_string(hp.interval->min_value) + " > max_value " +
                            std::to_string(hp.interval->max_value));
    }
    info->set_type(hpb::DATA_TYPE_FLOAT64);
    info->mutable_domain_interval()->set_min_value(hp.interval->min_value);
    info->mutable_domain_interval()->set_max_value(hp.interval->max_value);
  } else if (!hp.values.empty()) {
    const HParamValue& first = hp.values.front();
    for (const auto& v : hp.values) {
      if (kind_name(v) != kind_name(first)) {
        throw InvalidArgument("hparams config: HParam '" + hp.name + "' mixes " +
                              kind_name(first) + " and " + kind_name(v) +
                              " values; a discrete domain holds one kind");
      }
      set_value(info->mutable_domain_discrete()->add_values(), v);
    }
    info->set_type(first.is_number() ? hpb::DATA_TYPE_FLOAT64
                   : first.is_bool() ? hpb::DATA_TYPE_BOOL
                                     : hpb::DATA_TYPE_STRING);
  } else {
    info->set_type(hpb::DATA_TYPE_UNSET);
  }
}

}  // namespace

struct EventFileWriter::Impl {
  Mutex mu;
  std::filesystem::path logdir;
  std::filesystem::path path;
  EventFileWriterOptions options;
  std::optional<TFRecordWriter> file TENSORHUB_GUARDED_BY(mu);
  std::chrono::steady_clock::time_point last_flush TENSORHUB_GUARDED_BY(mu);

  void check_open() const TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!file) throw FailedPrecondition("event file " + path.string() + " is closed");
  }

  void flush_locked() TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    file->flush();
    last_flush = std::chrono::steady_clock::now();
  }

  // Serialises and writes `event`, flushing if flush_secs have passed.
  void write_locked(const tf::Event& event) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    check_open();
    std::string bytes;
    if (!event.SerializeToString(&bytes)) throw Internal("cannot serialize an Event for " + path.string());
    file->write(bytes);
    const auto age = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_flush);
    if (age.count() >= options.flush_secs) flush_locked();
  }

  void write_hparams(const char* tag, hpb::HParamsPluginData& data) TENSORHUB_LOCKS_EXCLUDED(mu) {
    data.set_version(kHParamsPluginDataVersion);
    tf::Event event;
    event.set_wall_time(now_seconds());
    event.set_step(0);
    tf::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(tag);
    auto* plugin = value->mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name(kHParamsPluginName);
    if (!data.SerializeToString(plugin->mutable_content())) {
      throw Internal("cannot serialize HParamsPluginData for " + path.string());
    }
    MutexLock lock(mu);
    write_locked(event);
  }
};

EventFileWriter::EventFileWriter(const std::filesystem::path& logdir, EventFileWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->logdir = logdir;
  impl_->options = options;
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) {
    throw Unavailable("cannot create TensorBoard log directory " + logdir.string() + ": " +
                      ec.message());
  }
  const std::string base = "events.out.tfevents." + [] {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(std::time(nullptr)));
    return std::string(buf);
  }() + "." + hostname() + "." + std::to_string(::getpid()) + options.filename_suffix;
  {
    // Two writers of one process in one second would pick the same name: take the first free
    // one under a process-wide lock.
    static Mutex name_mu;
    MutexLock names(name_mu);
    std::filesystem::path candidate = logdir / base;
    for (int i = 1; std::filesystem::exists(candidate, ec); ++i) {
      candidate = logdir / (base + "." + std::to_string(i));
    }
    impl_->path = candidate;
    MutexLock lock(impl_->mu);  // nobody else sees impl_ yet: taken because `file` is guarded by it
    try {
      impl_->file.emplace(candidate);
    } catch (const Error& e) {
      throw Unavailable("cannot create an event file in TensorBoard log directory " +
                        logdir.string() + ": " + e.message());
    }
  }
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_file_version("brain.Event:2");
  event.mutable_source_metadata()->set_writer("tensorhub.summary.EventFileWriter");
  MutexLock lock(impl_->mu);
  try {
    impl_->write_locked(event);
    impl_->flush_locked();
  } catch (const Error& e) {
    throw Unavailable("cannot write the event file in TensorBoard log directory " +
                      logdir.string() + ": " + e.message());
  }
}

EventFileWriter::~EventFileWriter() {
  try {
    close();
  } catch (...) {
    // Swallowed by contract; close() reports errors.
  }
}

void EventFileWriter::add_scalar(std::string_view tag, double value, std::int64_t step) {
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  MutexLock lock(impl_->mu);
  impl_->write_locked(event);
}

void EventFileWriter::add_session_log(SessionLogStatus status, std::int64_t step,
                                      std::string_view msg, std::string_view checkpoint_path) {
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::SessionLog* log = event.mutable_session_log();
  log->set_status(static_cast<tf::SessionLog::SessionStatus>(status));
  log->set_msg(std::string(msg));
  log->set_checkpoint_path(std::string(checkpoint_path));
  MutexLock lock(impl_->mu);
  impl_->write_locked(event);
  // So that a TensorBoard reading along drops the stale points as soon as training resumes.
  impl_->flush_locked();
}

void EventFileWriter::add_histogram(std::string_view tag, const float* values, std::size_t n,
                                    std::int64_t step) {
  if (n > 0 && values == nullptr) {
    throw InvalidArgument("add_histogram '" + std::string(tag) + "': values is null with n = " +
                          std::to_string(n));
  }
  add_histogram(tag, std::span<const float>(values, n), step);
}

void EventFileWriter::add_histogram(std::string_view tag, std::span<const float> values,
                                    std::int64_t step) {
  const Histogram h = make_histogram(values, tag);
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  tf::HistogramProto* histo = v->mutable_histo();
  histo->set_min(h.min);
  histo->set_max(h.max);
  histo->set_num(h.num);
  histo->set_sum(h.sum);
  histo->set_sum_squares(h.sum_squares);
  histo->mutable_bucket_limit()->Add(h.bucket_limit.begin(), h.bucket_limit.end());
  histo->mutable_bucket()->Add(h.bucket.begin(), h.bucket.end());
  MutexLock lock(impl_->mu);
  impl_->write_locked(event);
}

namespace {

// A serialized TensorFlow TensorProto (tensorflow/core/framework/tensor.proto) holding one
// string, shape [] (a scalar): dtype = 1 (DT_STRING = 7, types.proto), tensor_shape = 2 (an
// empty TensorShapeProto), string_val = 8.
std::string string_tensor_proto(std::string_view s) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      1, google::protobuf::internal::WireFormatLite::WIRETYPE_VARINT));
  coded.WriteVarint32(7);
  coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      2, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint32(0);
  coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      8, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint32(static_cast<std::uint32_t>(s.size()));
  coded.WriteRaw(s.data(), static_cast<int>(s.size()));
  coded.Trim();
  return out;
}

}  // namespace

void EventFileWriter::add_keras_model(std::string_view tag, std::string_view keras_json, std::int64_t step) {
  if (keras_json.size() > (std::size_t{1} << 30))
    throw InvalidArgument("add_keras_model '" + std::string(tag) + "': the model JSON is over 1 GiB");
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  auto* plugin = v->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("graph_keras_model");  // tensorboard/plugins/graph/metadata.py
  plugin->set_content("1");                      // the version Keras writes
  // Summary.Value.tensor (field 8) is not declared in our summary.proto (the reader keeps it
  // as an unknown field too), so it goes in as one.
  v->GetReflection()->MutableUnknownFields(v)->AddLengthDelimited(8, string_tensor_proto(keras_json));
  MutexLock lock(impl_->mu);
  impl_->write_locked(event);
}

std::optional<int> tf_data_type(std::string_view name) {
  // tensorboard/compat/tensorflow_stub/dtypes.py _STRING_TO_TF, numbers of types.proto.
  static constexpr std::pair<std::string_view, tf::DataType> kTypes[] = {
      {"float32", tf::DT_FLOAT},      {"float", tf::DT_FLOAT},     {"float64", tf::DT_DOUBLE},
      {"double", tf::DT_DOUBLE},      {"int32", tf::DT_INT32},     {"uint8", tf::DT_UINT8},
      {"int16", tf::DT_INT16},        {"int8", tf::DT_INT8},       {"string", tf::DT_STRING},
      {"complex64", tf::DT_COMPLEX64}, {"int64", tf::DT_INT64},    {"bool", tf::DT_BOOL},
      {"bfloat16", tf::DT_BFLOAT16},  {"uint16", tf::DT_UINT16},   {"complex128", tf::DT_COMPLEX128},
      {"float16", tf::DT_HALF},       {"half", tf::DT_HALF},       {"uint32", tf::DT_UINT32},
      {"uint64", tf::DT_UINT64}};
  for (const auto& [n, t] : kTypes)
    if (n == name) return static_cast<int>(t);
  return std::nullopt;
}

namespace {

// Refuses what would make TensorBoard's graph view fail or draw the wrong graph.
void check_graph_nodes(const std::vector<GraphNode>& nodes) {
  std::set<std::string_view> names;
  for (const GraphNode& n : nodes) {
    if (n.name.empty()) throw InvalidArgument("add_graph: a node has an empty name; give every node one");
    if (!names.insert(n.name).second)
      throw InvalidArgument("add_graph: two nodes are named '" + n.name + "'; node names must be unique");
  }
  for (const GraphNode& n : nodes)
    for (const std::string& in : n.input)
      if (!names.count(in))
        throw InvalidArgument("add_graph: node '" + n.name + "' has input '" + in +
                              "', which names no node of the graph");
}

}  // namespace

void EventFileWriter::add_graph(const std::vector<GraphNode>& nodes, std::int64_t step) {
  check_graph_nodes(nodes);
  tf::GraphDef graph;
  for (const GraphNode& n : nodes) {
    tf::NodeDef* node = graph.add_node();
    node->set_name(n.name);
    node->set_op(n.op);
    for (const std::string& in : n.input) node->add_input(in);
    auto& attr = *node->mutable_attr();
    for (const auto& [key, s] : n.string_attrs) attr[key].set_s(s);
    for (const auto& [key, t] : n.type_attrs) attr[key].set_type(static_cast<tf::DataType>(t));
  }
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  if (!graph.SerializeToString(event.mutable_graph_def()))
    throw Internal("cannot serialize a GraphDef for " + impl_->path.string());
  MutexLock lock(impl_->mu);
  impl_->write_locked(event);
}

void EventFileWriter::add_hparams_config(const std::vector<HParam>& hparams,
                                         const std::vector<HParamMetric>& metrics) {
  hpb::HParamsPluginData data;
  hpb::Experiment* experiment = data.mutable_experiment();
  experiment->set_time_created_secs(now_seconds());
  for (const HParam& hp : hparams) fill_hparam_info(experiment->add_hparam_infos(), hp);
  for (const HParamMetric& m : metrics) {
    hpb::MetricInfo* info = experiment->add_metric_infos();
    info->mutable_name()->set_group(m.group);
    info->mutable_name()->set_tag(m.tag);
    info->set_display_name(m.display_name);
    info->set_description(m.description);
    info->set_dataset_type(static_cast<hpb::DatasetType>(m.dataset_type));
  }
  impl_->write_hparams(kExperimentTag, data);
}

void EventFileWriter::add_hparams_session_start(const std::map<std::string, HParamValue>& hparams,
                                                std::string_view group_name) {
  hpb::HParamsPluginData data;
  hpb::SessionStartInfo* info = data.mutable_session_start_info();
  for (const auto& [name, value] : hparams) set_value(&(*info->mutable_hparams())[name], value);
  info->set_group_name(std::string(group_name));
  info->set_start_time_secs(now_seconds());
  impl_->write_hparams(kSessionStartInfoTag, data);
}

void EventFileWriter::add_hparams_session_end(SessionStatus status) {
  hpb::HParamsPluginData data;
  hpb::SessionEndInfo* info = data.mutable_session_end_info();
  info->set_status(static_cast<hpb::Status>(status));
  info->set_end_time_secs(now_seconds());
  impl_->write_hparams(kSessionEndInfoTag, data);
}

void EventFileWriter::flush() {
  MutexLock lock(impl_->mu);
  impl_->check_open();
  impl_->flush_locked();
}

void EventFileWriter::close() {
  MutexLock lock(impl_->mu);
  if (!impl_->file) return;
  try {
    impl_->file->close();
  } catch (...) {
    impl_->file.reset();
    throw;
  }
  impl_->file.reset();
}

const std::filesystem::path& EventFileWriter::path() const noexcept { return impl_->path; }

}  // namespace tensorhub
