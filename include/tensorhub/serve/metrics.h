// ServingMetrics: TF Serving's Prometheus metrics (:tensorflow:serving:request_count and
// :tensorflow:serving:request_latency) for every API of one server, REST and gRPC alike, in the
// Prometheus text format.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "tensorhub/core/mutex.h"

namespace tensorhub {

/// A label value in the Prometheus text format: backslash, double quote and line feed escaped.
std::string prometheus_label(std::string_view value);

class ServingMetrics {
 public:
  /// Counts one request. The caller keeps the label set bounded: `model` is a served model's
  /// name or "" (any other), `api` a method name ("Predict", "GetModelStatus", ...),
  /// `status` a gRPC code name ("OK", "INVALID_ARGUMENT", ...), `entrypoint` "REST" or "GRPC".
  void record(const std::string& model, const std::string& api, const std::string& status, double seconds,
              const std::string& entrypoint);

  /// Everything recorded, in the Prometheus text format (version 0.0.4).
  std::string text() const;

 private:
  // Microseconds, as TF Serving's request_latency.
  static constexpr std::array<double, 14> kBuckets = {50,    100,   250,   500,    1000,   2500,   5000,
                                                      10000, 25000, 50000, 100000, 250000, 500000, 1000000};
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_ TENSORHUB_GUARDED_BY(mutex_);  // model, status
  // model, api, entrypoint
  std::map<std::tuple<std::string, std::string, std::string>, Histogram> latency_ TENSORHUB_GUARDED_BY(mutex_);
};

}  // namespace tensorhub
