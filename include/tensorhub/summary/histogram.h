// Histograms as TensorFlow computes them for TensorBoard (tf.compat.v1.summary.histogram).
//
// Algorithm source: tensorflow/core/lib/histogram/histogram.cc (tsl/lib/histogram/histogram.cc
// in newer trees): Histogram::Add and Histogram::EncodeToProto with the default buckets.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace tensorhub {

/// TensorFlow's default bucket limits, ascending: -DBL_MAX, -v_773, ..., -v_0, 0.0, v_0, ...,
/// v_773, DBL_MAX, where v_0 = 1e-12 and v_{k+1} = v_k * 1.1 (computed by repeated double
/// multiplication, as TensorFlow does) while v_k < 1e20. 1551 limits. Bucket i holds the values
/// in [limit[i-1], limit[i]) (bucket 0: below limit[0]).
const std::vector<double>& default_histogram_bucket_limits();

/// The content of a HistogramProto (summary.proto): statistics and parallel arrays
/// bucket_limit / bucket (right edge and count of each listed bucket).
struct Histogram {
  double min = 0;
  double max = 0;
  double num = 0;          ///< number of values
  double sum = 0;          ///< sum of the values, accumulated in double in input order
  double sum_squares = 0;  ///< sum of value * value, likewise
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

/// Histogram of `values` (each widened to double) with the default buckets, encoded as
/// TensorFlow's EncodeToProto(preserve_zero_buckets = false) does, which is what the
/// histogram summary op writes: non-empty buckets are listed with their limit and count, and
/// each run of consecutive empty buckets is collapsed into one entry (count 0, the limit of
/// the run's last bucket). With no values: min = DBL_MAX, max = -DBL_MAX, num = sum =
/// sum_squares = 0 and one entry (DBL_MAX, 0), as TensorFlow writes.
/// Throws InvalidArgument naming `tag` and the index if a value is NaN or infinite
/// (TensorFlow's summary op refuses them the same way).
Histogram make_histogram(std::span<const float> values, std::string_view tag = "histogram");
Histogram make_histogram(std::span<const double> values, std::string_view tag = "histogram");

}  // namespace tensorhub
