// The Graph view's weight histograms (src/ui/graph_api.h) on values a diverged training
// leaves: NaN and infinite weights in the stored safetensors, and NaN or infinite bucket bounds
// in a TensorBoard histogram. Such values once made the bin index a cast of NaN to size_t
// (undefined behaviour; with GCC on x86-64 every value landed in bin 0 under NaN edges).
// Expected values by hand.
#include <gtest/gtest.h>

#include <limits>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"
#include "../src/ui/curves_api.h"
#include "../src/ui/graph_api.h"

namespace tensorhub::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double sum_of(const Json& counts) {
  double s = 0;
  for (const auto& c : counts) s += c.get<double>();
  return s;
}

// dense.weight holds NaN, +inf, 1 and 3: the statistics and bins are of 1 and 3 (mean 2,
// population std 1, 1 in the first of 30 bins over [1, 3], 3 in the last); 2 are non-finite.
TEST(GraphApi, LayerHistogramsOfNonFiniteWeightsBinTheFiniteOnes) {
  TempDir dir;
  Hub hub("sqlite://" + (dir / "hub.db").string(), "p");
  const NamedTensors weights = {
      {"dense.weight", Tensor::from(DType::kF32, {2, 2}, std::vector<float>{static_cast<float>(kNaN),
                                                                           static_cast<float>(kInf), 1, 3})},
      {"dense.bias", Tensor::from(DType::kF32, {2}, std::vector<float>{0, 0})}};
  const Json architecture = {{"input_shape", {2}}, {"layers", {{{"type", "Dense"}, {"units", 2}}}}};
  const std::int64_t id = hub.save_model(architecture, weights, "diverged");
  EventRunCache cache;
  const Json answer = layer_histograms_json(hub, id, "dense", {}, cache);
  const Json* w = nullptr;
  for (const auto& t : answer.at("tensors"))
    if (t.at("name") == "dense.weight") w = &t;
  ASSERT_NE(w, nullptr) << answer.dump();
  EXPECT_EQ(w->at("count"), 4);
  EXPECT_EQ(w->at("non_finite"), 2);
  EXPECT_EQ(w->at("min"), 1.0);
  EXPECT_EQ(w->at("max"), 3.0);
  EXPECT_EQ(w->at("mean"), 2.0);
  EXPECT_EQ(w->at("std"), 1.0);
  const Json& counts = w->at("counts");
  ASSERT_EQ(counts.size(), static_cast<std::size_t>(kWeightBins));
  EXPECT_EQ(counts.front(), 1.0);
  EXPECT_EQ(counts.back(), 1.0);
  EXPECT_EQ(sum_of(counts), 2.0);
}

// Bucket [NaN, 1] of 5 and [0, +inf] of 7 are skipped; [0, 1] of 2 spreads over both bins of
// [0, 1]. A NaN or infinite range places nothing.
TEST(GraphApi, RebinBucketsSkipsNonFiniteBounds) {
  EXPECT_EQ(rebin_buckets({kNaN, 0, 0}, {1, kInf, 1}, {5, 7, 2}, 0, 1, 2), (std::vector<double>{1, 1}));
  EXPECT_EQ(rebin_buckets({0}, {1}, {2}, kNaN, 1, 2), (std::vector<double>{0, 0}));
  EXPECT_EQ(rebin_buckets({0}, {1}, {2}, -kInf, kInf, 2), (std::vector<double>{0, 0}));
}

}  // namespace
}  // namespace tensorhub::testing
