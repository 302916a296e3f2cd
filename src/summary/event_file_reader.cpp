// Reading TensorBoard event files (event_file_reader.h): Events from TFRecord records.
#include "tensorhub/summary/event_file_reader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/hparams/plugin_data.pb.h"
#include "tensorhub/tf/event.pb.h"

namespace tensorhub {

namespace fs = std::filesystem;
namespace hpb = ::tensorhub::hparams;

namespace {

// tensorboard/plugins/hparams/metadata.py and plugins/scalar/metadata.py
constexpr const char* kHParamsPlugin = "hparams";
constexpr const char* kScalarsPlugin = "scalars";
constexpr const char* kKerasModelPlugin = "graph_keras_model";  // tensorboard/plugins/graph/metadata.py
constexpr int kSummaryValueTensorField = 8;  // Summary.Value.tensor (TensorProto), not in our proto
// tensorflow/core/framework/types.proto
constexpr std::uint64_t kDtFloat = 1, kDtDouble = 2;

bool is_event_file(const fs::path& p) { return p.filename().string().find("tfevents") != std::string::npos; }

HParamValue value_of(const google::protobuf::Value& v) {
  if (v.kind_case() == google::protobuf::Value::kBoolValue) return v.bool_value();
  if (v.kind_case() == google::protobuf::Value::kStringValue) return v.string_value();
  return v.number_value();
}

// The scalar in a serialized TensorProto (dtype = 1, tensor_content = 4, float_val = 5 packed or
// not, double_val = 6): TF2's tf.summary.scalar writes a 0-d DT_FLOAT tensor. Nothing for
// another dtype or a tensor with no value.
std::optional<double> tensor_scalar(const std::string& bytes) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return std::nullopt;
  std::uint64_t dtype = 0;
  std::optional<double> value;
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& f = fields.field(i);
    if (f.number() == 1 && f.type() == google::protobuf::UnknownField::TYPE_VARINT) dtype = f.varint();
    if (f.number() == 5 && f.type() == google::protobuf::UnknownField::TYPE_FIXED32) {
      float x;
      const std::uint32_t bits = f.fixed32();
      std::memcpy(&x, &bits, 4);
      value = x;
    }
    if (f.number() == 6 && f.type() == google::protobuf::UnknownField::TYPE_FIXED64) {
      double x;
      const std::uint64_t bits = f.fixed64();
      std::memcpy(&x, &bits, 8);
      value = x;
    }
    if ((f.number() == 4 || f.number() == 5 || f.number() == 6) &&
        f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      // tensor_content or a packed float_val / double_val: the first element.
      const std::string& b = f.length_delimited();
      const bool wide = f.number() == 6 || (f.number() == 4 && dtype == kDtDouble);
      if (wide && b.size() >= 8) {
        double x;
        std::memcpy(&x, b.data(), 8);
        value = x;
      } else if (!wide && b.size() >= 4) {
        float x;
        std::memcpy(&x, b.data(), 4);
        value = x;
      }
    }
  }
  if (dtype != kDtFloat && dtype != kDtDouble) return std::nullopt;
  return value;
}

// The first string_val (field 8) of a serialized DT_STRING TensorProto; nothing otherwise.
std::optional<std::string> tensor_string(const std::string& bytes) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return std::nullopt;
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& f = fields.field(i);
    if (f.number() == 8 && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      return f.length_delimited();
  }
  return std::nullopt;
}

// The serialized TensorProto of a Summary.Value, kept by protobuf as an unknown field.
const std::string* value_tensor(const tf::Summary::Value& v) {
  const auto& unknown = v.GetReflection()->GetUnknownFields(v);
  for (int i = 0; i < unknown.field_count(); ++i)
    if (unknown.field(i).number() == kSummaryValueTensorField &&
        unknown.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      return &unknown.field(i).length_delimited();
  return nullptr;
}

Histogram histogram_of(const tf::HistogramProto& h) {
  Histogram out;
  out.min = h.min();
  out.max = h.max();
  out.num = h.num();
  out.sum = h.sum();
  out.sum_squares = h.sum_squares();
  out.bucket_limit.assign(h.bucket_limit().begin(), h.bucket_limit().end());
  out.bucket.assign(h.bucket().begin(), h.bucket().end());
  return out;
}

HParamsExperiment experiment_of(const hpb::Experiment& e) {
  HParamsExperiment out;
  for (const auto& info : e.hparam_infos()) {
    HParam h{.name = info.name(), .display_name = info.display_name(), .description = info.description()};
    if (info.has_domain_interval())
      h.interval = HParamInterval{info.domain_interval().min_value(), info.domain_interval().max_value()};
    if (info.has_domain_discrete())
      for (const auto& v : info.domain_discrete().values()) h.values.push_back(value_of(v));
    out.hparams.push_back(std::move(h));
  }
  for (const auto& m : e.metric_infos())
    out.metrics.push_back(HParamMetric{.tag = m.name().tag(), .group = m.name().group(),
                                       .display_name = m.display_name(), .description = m.description(),
                                       .dataset_type = static_cast<DatasetType>(m.dataset_type())});
  return out;
}

void read_hparams(const std::string& content, const fs::path& file, RunEvents& run) {
  hpb::HParamsPluginData data;
  if (!data.ParseFromString(content)) throw DataLoss(file.string() + ": an hparams summary does not parse");
  if (data.has_experiment()) {
    run.has_experiment = true;
    run.experiment = experiment_of(data.experiment());
  }
  if (data.has_session_start_info()) {
    const auto& s = data.session_start_info();
    HParamsSession session;
    for (const auto& [name, v] : s.hparams()) session.hparams.emplace(name, value_of(v));
    session.group_name = s.group_name();
    session.start_time_secs = s.start_time_secs();
    run.session = std::move(session);
  }
  if (data.has_session_end_info() && run.session) {
    run.session->status = static_cast<SessionStatus>(data.session_end_info().status());
    run.session->end_time_secs = data.session_end_info().end_time_secs();
  }
}

void read_summary(const tf::Event& e, const fs::path& file, RunEvents& run) {
  for (const auto& v : e.summary().value()) {
    const std::string& plugin = v.metadata().plugin_data().plugin_name();
    if (plugin == kHParamsPlugin) {
      read_hparams(v.metadata().plugin_data().content(), file, run);
    } else if (v.value_case() == tf::Summary::Value::kSimpleValue) {
      run.scalars[v.tag()].push_back({e.step(), e.wall_time(), v.simple_value()});
    } else if (v.value_case() == tf::Summary::Value::kHisto) {
      // A HistogramProto whose bucket and bucket_limit lengths differ has no reading
      // (TensorBoard's data_compat cannot pair them either); every reader of Histogram indexes
      // bucket_limit by bucket, so it is skipped here rather than read past its end there.
      if (v.histo().bucket_size() == v.histo().bucket_limit_size())
        run.histograms[v.tag()].push_back({e.step(), e.wall_time(), histogram_of(v.histo())});
    } else if (const std::string* tensor = value_tensor(v); tensor && plugin == kScalarsPlugin) {
      if (const auto x = tensor_scalar(*tensor)) run.scalars[v.tag()].push_back({e.step(), e.wall_time(), *x});
    } else if (tensor && plugin == kKerasModelPlugin) {
      if (auto json = tensor_string(*tensor)) run.keras_models[v.tag()] = std::move(*json);
    }
  }
}

// TensorBoard's purge after a restart: events of the run read so far at steps >= `step` go.
void purge_from(RunEvents& run, std::int64_t step) {
  for (auto& [tag, points] : run.scalars)
    std::erase_if(points, [step](const ScalarEvent& p) { return p.step >= step; });
  for (auto& [tag, points] : run.histograms)
    std::erase_if(points, [step](const HistogramEvent& p) { return p.step >= step; });
}

void read_into(const fs::path& file, RunEvents& run) {
  TFRecordReader reader(file);
  std::string record;
  tf::Event event;
  for (;;) {
    try {
      if (!reader.read(record)) break;
    } catch (const Error& e) {
      // A file being written ends inside its last record: what was flushed is read.
      if (e.kind() == ErrorKind::kDataLoss && e.message().find(": truncated ") != std::string::npos) break;
      throw;
    }
    if (!event.ParseFromString(record))
      throw DataLoss(file.string() + ": the record at byte " + std::to_string(reader.offset() - record.size() - 16) +
                     " is not an Event");
    if (event.has_summary()) read_summary(event, file, run);
    if (event.has_session_log() && event.session_log().status() == tf::SessionLog::START)
      purge_from(run, event.step());
  }
}

void drop_empty(RunEvents& run) {
  std::erase_if(run.scalars, [](const auto& kv) { return kv.second.empty(); });
  std::erase_if(run.histograms, [](const auto& kv) { return kv.second.empty(); });
}

}  // namespace

RunEvents read_event_file(const fs::path& file) {
  if (!fs::is_regular_file(file)) throw NotFound("no event file " + file.string());
  RunEvents run;
  read_into(file, run);
  drop_empty(run);
  return run;
}

RunEvents read_run_events(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) throw NotFound("no run directory " + run_dir.string());
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(run_dir, ec))
    if (entry.is_regular_file() && is_event_file(entry.path())) files.push_back(entry.path());
  if (ec) throw Unavailable("cannot list " + run_dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  RunEvents run;
  for (const auto& f : files) read_into(f, run);
  drop_empty(run);
  return run;
}

std::vector<std::string> find_event_runs(const fs::path& logdir) {
  std::error_code ec;
  if (!fs::is_directory(logdir, ec)) throw NotFound("no log directory " + logdir.string());
  std::vector<std::string> runs;
  auto consider = [&](const fs::path& dir) {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.is_regular_file() && is_event_file(entry.path())) {
        const auto rel = fs::relative(dir, logdir).generic_string();
        runs.push_back(rel.empty() ? "." : rel);
        return;
      }
  };
  consider(logdir);
  for (auto it = fs::recursive_directory_iterator(logdir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_directory() && !it->is_symlink()) consider(it->path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

std::vector<double> histogram_percentiles(const Histogram& h, const std::vector<double>& bps) {
  if (h.num <= 0 || h.bucket.empty() || bps.empty()) return std::vector<double>(bps.size(), 0.0);
  // TensorBoard's buckets from a HistogramProto: [left, right, count] with left = min for the
  // first, the previous limit after; right = the limit, max for the last.
  const std::size_t n = h.bucket.size();
  std::vector<double> right(n), weights(n);
  for (std::size_t i = 0; i < n; ++i) right[i] = i + 1 < n ? h.bucket_limit[i] : h.max;
  const double minmin = h.min, maxmax = h.max;
  double total = 0;
  for (double c : h.bucket) total += c;
  double cumsum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    cumsum += h.bucket[i] * bps.back() / (total != 0 ? total : 1.0);
    weights[i] = cumsum;
  }
  std::vector<double> out;
  std::size_t bp = 0;
  while (bp < bps.size()) {
    // np.searchsorted(weights, bps[bp], side="right")
    std::size_t i = static_cast<std::size_t>(std::upper_bound(weights.begin(), weights.end(), bps[bp]) - weights.begin());
    bool found = false;
    for (; i < n; ++i) {
      const double cur = weights[i], prev = i > 0 ? weights[i - 1] : 0.0;
      if (cur == prev) continue;
      const double lhs = (i == 0 || prev == 0) ? minmin : std::max(right[i - 1], minmin);
      const double rhs = std::min(right[i], maxmax);
      out.push_back(lhs + (bps[bp] - prev) * (rhs - lhs) / (cur - prev));
      found = true;
      break;
    }
    if (!found) break;
    ++bp;
  }
  while (out.size() < bps.size()) out.push_back(maxmax);
  return out;
}

std::filesystem::path run_directory(const std::filesystem::path& logdir, const std::string& run) {
  return run == "." ? logdir : logdir / run;
}

}  // namespace tensorhub
