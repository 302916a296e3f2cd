#include "tensorhub/serve/metrics.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

namespace tensorhub {

// https://prometheus.io/docs/instrumenting/exposition_formats/#text-format-details
std::string prometheus_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

// TF Serving's model warmup metrics (saved_model_warmup_util.cc), process-wide as its
// monitoring registry is.
class WarmupMetrics {
 public:
  static WarmupMetrics& instance() {
    static WarmupMetrics metrics;
    return metrics;
  }

  void record(const std::string& model_path, const std::string& status, std::int64_t records, double seconds) {
    MutexLock lock(mutex_);
    const auto key = std::make_pair(model_path, status);
    records_[key] += records;
    auto& h = latency_[key];
    const double micros = seconds * 1e6;
    for (std::size_t i = 0; i < kBuckets; ++i)
      if (micros <= limit(i)) ++h.counts[i];
    ++h.count;
    h.sum += micros;
  }

  std::string text() const {
    MutexLock lock(mutex_);
    if (records_.empty()) return "";
    std::ostringstream out;
    out << "# TYPE :tensorflow:serving:model_warmup_records_read counter\n";
    for (const auto& [key, n] : records_)
      out << ":tensorflow:serving:model_warmup_records_read{" << labels(key) << "} " << n << "\n";
    out << "# TYPE :tensorflow:serving:model_warmup_latency histogram\n";
    for (const auto& [key, h] : latency_) {
      const std::string l = labels(key);
      for (std::size_t i = 0; i < kBuckets; ++i)
        out << ":tensorflow:serving:model_warmup_latency_bucket{" << l << ",le=\"" << limit_text(i) << "\"} "
            << h.counts[i] << "\n";
      out << ":tensorflow:serving:model_warmup_latency_bucket{" << l << ",le=\"+Inf\"} " << h.count << "\n";
      out << ":tensorflow:serving:model_warmup_latency_sum{" << l << "} " << h.sum << "\n";
      out << ":tensorflow:serving:model_warmup_latency_count{" << l << "} " << h.count << "\n";
    }
    return out.str();
  }

 private:
  // monitoring::Buckets::Exponential(10, 1.8, 33): limits 10 * 1.8^i (up to ~20 minutes).
  static constexpr std::size_t kBuckets = 33;
  static double limit(std::size_t i) { return 10 * std::pow(1.8, static_cast<double>(i)); }
  // Six significant digits, as absl::StrCat writes a double in TF Serving's exporter.
  static std::string limit_text(std::size_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", limit(i));
    return buf;
  }
  static std::string labels(const std::pair<std::string, std::string>& key) {
    return "model_path=\"" + prometheus_label(key.first) + "\",status=\"" + prometheus_label(key.second) + "\"";
  }
  struct Histogram {
    std::array<std::uint64_t, kBuckets> counts{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::int64_t> records_ TENSORHUB_GUARDED_BY(mutex_);
  std::map<std::pair<std::string, std::string>, Histogram> latency_ TENSORHUB_GUARDED_BY(mutex_);
};

}  // namespace

void record_model_warmup(const std::string& model_path, const std::string& status, std::int64_t records,
                         double seconds) {
  WarmupMetrics::instance().record(model_path, status, records, seconds);
}

std::string model_warmup_metrics_text() { return WarmupMetrics::instance().text(); }

void ServingMetrics::Histogram::add(double micros) {
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (micros <= kBuckets[i]) ++counts[i];
  ++count;
  sum += micros;
}

void ServingMetrics::record(const std::string& model, const std::string& api, const std::string& status,
                            double seconds, const std::string& entrypoint, std::int64_t version) {
  const double micros = seconds * 1e6;
  MutexLock lock(mutex_);
  ++requests_[{model, status}];
  latency_[{model, api, entrypoint}].add(micros);
  if (version == 0) return;
  ++version_requests_[{model, version, status}];
  version_latency_[{model, version, api, entrypoint}].add(micros);
}

void ServingMetrics::write_histogram(std::ostream& out, const std::string& metric, const std::string& labels,
                                     const Histogram& h) {
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    out << metric << "_bucket{" << labels << ",le=\"" << kBuckets[i] << "\"} " << h.counts[i] << "\n";
  out << metric << "_bucket{" << labels << ",le=\"+Inf\"} " << h.count << "\n";
  out << metric << "_sum{" << labels << "} " << h.sum << "\n";
  out << metric << "_count{" << labels << "} " << h.count << "\n";
}

std::string ServingMetrics::text() const {
  MutexLock lock(mutex_);
  std::ostringstream out;
  out << "# TYPE :tensorflow:serving:request_count counter\n";
  for (const auto& [key, n] : requests_)
    out << ":tensorflow:serving:request_count{model_name=\"" << prometheus_label(key.first) << "\",status=\""
        << prometheus_label(key.second) << "\"} " << n << "\n";
  out << "# TYPE :tensorflow:serving:request_latency histogram\n";
  for (const auto& [key, h] : latency_) {
    const auto& [model, api, entrypoint] = key;
    write_histogram(out, ":tensorflow:serving:request_latency",
                    "model_name=\"" + prometheus_label(model) + "\",API=\"" + prometheus_label(api) +
                        "\",entrypoint=\"" + prometheus_label(entrypoint) + "\"",
                    h);
  }
  if (!version_requests_.empty()) {
    out << "# TYPE :tensorhub:serving:version_request_count counter\n";
    for (const auto& [key, n] : version_requests_) {
      const auto& [model, version, status] = key;
      out << ":tensorhub:serving:version_request_count{model_name=\"" << prometheus_label(model) << "\",version=\""
          << version << "\",status=\"" << prometheus_label(status) << "\"} " << n << "\n";
    }
    out << "# TYPE :tensorhub:serving:version_request_latency histogram\n";
    for (const auto& [key, h] : version_latency_) {
      const auto& [model, version, api, entrypoint] = key;
      write_histogram(out, ":tensorhub:serving:version_request_latency",
                      "model_name=\"" + prometheus_label(model) + "\",version=\"" + std::to_string(version) +
                          "\",API=\"" + prometheus_label(api) + "\",entrypoint=\"" + prometheus_label(entrypoint) + "\"",
                      h);
    }
  }
  out << model_warmup_metrics_text();
  return out.str();
}

}  // namespace tensorhub
