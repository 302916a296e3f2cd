// ServingMetrics: TF Serving's Prometheus metrics (:tensorflow:serving:request_count and
// :tensorflow:serving:request_latency) for every API of one server, REST and gRPC alike, in the
// Prometheus text format.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "tensorhub/core/mutex.h"

namespace tensorhub {

/// A label value in the Prometheus text format: backslash, double quote and line feed escaped.
std::string prometheus_label(std::string_view value);

/// Records one model warmup (warmup.h) in the process-wide warmup metrics, as TF Serving's
/// /tensorflow/serving/model_warmup_records_read (a counter) and
/// /tensorflow/serving/model_warmup_latency (a histogram of microseconds, buckets 10 * 1.8^i,
/// i < 33: monitoring::Buckets::Exponential(10, 1.8, 33)), both labelled by `model_path` (the
/// version directory, or "hub model 42") and `status` ("OK", or "INVALID_ARGUMENT: <message>"
/// as absl::Status::ToString writes it). `records`: records read; `seconds`: the warmup's time.
void record_model_warmup(const std::string& model_path, const std::string& status, std::int64_t records,
                         double seconds);

/// The warmup metrics in the Prometheus text format, as TF Serving's exporter names them
/// (":tensorflow:serving:model_warmup_records_read", ":tensorflow:serving:model_warmup_latency");
/// "" before any warmup.
std::string model_warmup_metrics_text();

class ServingMetrics {
 public:
  /// Counts one request. The caller keeps the label set bounded: `model` is a served model's
  /// name or "" (any other), `api` a method name ("Predict", "GetModelStatus", ...),
  /// `status` a gRPC code name ("OK", "INVALID_ARGUMENT", ...), `entrypoint` "REST" or "GRPC".
  /// `seconds`: the request's time. `version`: the loaded version that took the request (by its
  /// version, its label or a weighted split), or 0 when none did (an unknown model, label or
  /// version, a request refused before). A request with a version is also counted in our
  /// per-version series, ":tensorhub:serving:version_request_count{model_name,version,status}"
  /// and the histogram ":tensorhub:serving:version_request_latency{model_name,version,API,
  /// entrypoint}" (TF Serving's series have no version label); their label set is bounded by
  /// the versions loaded.
  void record(const std::string& model, const std::string& api, const std::string& status, double seconds,
              const std::string& entrypoint, std::int64_t version = 0);

  /// Everything recorded, in the Prometheus text format (version 0.0.4), followed by the
  /// process-wide warmup metrics (model_warmup_metrics_text), which are not requests.
  std::string text() const;

 private:
  // Microseconds, as TF Serving's request_latency.
  static constexpr std::array<double, 14> kBuckets = {50,    100,   250,   500,    1000,   2500,   5000,
                                                      10000, 25000, 50000, 100000, 250000, 500000, 1000000};
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};
    std::uint64_t count = 0;
    double sum = 0;
    void add(double micros);
  };
  static void write_histogram(std::ostream& out, const std::string& metric, const std::string& labels,
                              const Histogram& h);
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_ TENSORHUB_GUARDED_BY(mutex_);  // model, status
  // model, api, entrypoint
  std::map<std::tuple<std::string, std::string, std::string>, Histogram> latency_ TENSORHUB_GUARDED_BY(mutex_);
  // Per version: model, version, status; model, version, api, entrypoint.
  std::map<std::tuple<std::string, std::int64_t, std::string>, std::uint64_t> version_requests_
      TENSORHUB_GUARDED_BY(mutex_);
  std::map<std::tuple<std::string, std::int64_t, std::string, std::string>, Histogram> version_latency_
      TENSORHUB_GUARDED_BY(mutex_);
};

}  // namespace tensorhub
