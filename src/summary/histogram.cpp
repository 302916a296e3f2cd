// TensorFlow's histogram (tensorflow/core/lib/histogram/histogram.cc): default buckets, Add,
// EncodeToProto(preserve_zero_buckets = false).
#include "tensorhub/summary/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

std::vector<double> make_default_limits() {
  // InitDefaultBucketsInner: buckets whose range grows by 10% from 1.0e-12 up to 1.0e20.
  std::vector<double> buckets;
  std::vector<double> neg_buckets;
  double v = 1.0e-12;
  while (v < 1.0e20) {
    buckets.push_back(v);
    neg_buckets.push_back(-v);
    v *= 1.1;
  }
  buckets.push_back(DBL_MAX);
  neg_buckets.push_back(-DBL_MAX);
  std::reverse(neg_buckets.begin(), neg_buckets.end());
  std::vector<double> result;
  result.reserve(neg_buckets.size() + 1 + buckets.size());
  result.insert(result.end(), neg_buckets.begin(), neg_buckets.end());
  result.push_back(0.0);
  result.insert(result.end(), buckets.begin(), buckets.end());
  return result;
}

template <typename T>
Histogram make(std::span<const T> values, std::string_view tag) {
  const std::vector<double>& limits = default_histogram_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = limits.back();  // Histogram::Clear: min_ = bucket_limits_.back() (DBL_MAX)
  h.max = -DBL_MAX;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double value = static_cast<double>(values[i]);
    if (!std::isfinite(value)) {
      throw InvalidArgument("histogram '" + std::string(tag) + "': value " + std::to_string(i) +
                            " of " + std::to_string(values.size()) + " is " +
                            (std::isnan(value) ? "NaN" : "infinite") +
                            "; TensorBoard histograms need finite values");
    }
    // Histogram::Add: the bucket is the first limit greater than the value.
    const auto b = static_cast<std::size_t>(
        std::upper_bound(limits.begin(), limits.end(), value) - limits.begin());
    // value <= DBL_MAX (finite), so b < size() except for value == DBL_MAX, which TensorFlow
    // would count past the end; count it in the last bucket instead.
    counts[std::min(b, counts.size() - 1)] += 1.0;
    if (h.min > value) h.min = value;
    if (h.max < value) h.max = value;
    h.num += 1;
    h.sum += value;
    h.sum_squares += value * value;
  }
  // EncodeToProto(proto, /*preserve_zero_buckets=*/false).
  for (std::size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0.0) {
      // Collapse a run of empty buckets into one.
      while (i < counts.size() && counts[i] <= 0.0) {
        end = limits[i];
        count = counts[i];
        ++i;
      }
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  if (h.bucket.empty()) {  // never reached with the default buckets; kept as in TensorFlow
    h.bucket_limit.push_back(DBL_MAX);
    h.bucket.push_back(0.0);
  }
  return h;
}

}  // namespace

const std::vector<double>& default_histogram_bucket_limits() {
  static const std::vector<double> limits = make_default_limits();
  return limits;
}

Histogram make_histogram(std::span<const float> values, std::string_view tag) {
  return make(values, tag);
}
Histogram make_histogram(std::span<const double> values, std::string_view tag) {
  return make(values, tag);
}

}  // namespace tensorhub
