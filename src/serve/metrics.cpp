#include "tensorhub/serve/metrics.h"

#include <sstream>

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

void ServingMetrics::record(const std::string& model, const std::string& api, const std::string& status,
                            double seconds, const std::string& entrypoint) {
  MutexLock lock(mutex_);
  ++requests_[{model, status}];
  auto& h = latency_[{model, api, entrypoint}];
  const double micros = seconds * 1e6;
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (micros <= kBuckets[i]) ++h.counts[i];
  ++h.count;
  h.sum += micros;
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
    const std::string labels = "model_name=\"" + prometheus_label(model) + "\",API=\"" + prometheus_label(api) +
                               "\",entrypoint=\"" + prometheus_label(entrypoint) + "\"";
    for (std::size_t i = 0; i < kBuckets.size(); ++i)
      out << ":tensorflow:serving:request_latency_bucket{" << labels << ",le=\"" << kBuckets[i] << "\"} "
          << h.counts[i] << "\n";
    out << ":tensorflow:serving:request_latency_bucket{" << labels << ",le=\"+Inf\"} " << h.count << "\n";
    out << ":tensorflow:serving:request_latency_sum{" << labels << "} " << h.sum << "\n";
    out << ":tensorflow:serving:request_latency_count{" << labels << "} " << h.count << "\n";
  }
  return out.str();
}

}  // namespace tensorhub
