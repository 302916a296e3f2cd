// Blobs written from a BlobSource, piece by piece (a dataset save never holds a serialised
// copy): the stored bytes and their chunks are exactly to_safetensors' bytes, however the
// pieces fall on chunk boundaries, on every backend. (Peak memory is measured, not asserted:
// see the commit that introduced streaming.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::TestDatabase;

constexpr std::size_t kMiB = 1 << 20;

// Bytes that differ everywhere, so a misplaced or repeated piece cannot go unnoticed.
Tensor noise_tensor(std::size_t bytes, std::uint64_t seed) {
  Tensor t;
  t.dtype = DType::kU8;
  t.shape = {static_cast<std::int64_t>(bytes)};
  t.data.resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    t.data[i] = static_cast<std::byte>(seed >> 56);
  }
  return t;
}

// Tensors whose boundaries fall before, across and exactly on 1 MiB chunk boundaries.
NamedTensors awkward_tensors() {
  NamedTensors t;
  t["a_tiny"] = noise_tensor(3, 1);
  t["b_chunk_and_a_half"] = noise_tensor(kMiB + kMiB / 2, 2);
  t["c_empty"] = noise_tensor(0, 3);
  t["d_two_chunks"] = noise_tensor(2 * kMiB, 4);
  t["e_odd"] = noise_tensor(kMiB / 3, 5);
  return t;
}

class BlobStreamTest : public testing::BackendTest {};

TEST_P(BlobStreamTest, PiecesAreTheSafetensorsBytes) {
  const NamedTensors tensors = awkward_tensors();
  std::vector<std::byte> joined;
  std::size_t pieces = 0;
  const auto n = write_safetensors_to(tensors, [&](std::span<const std::byte> b) {
    joined.insert(joined.end(), b.begin(), b.end());
    ++pieces;
  });
  EXPECT_EQ(pieces, 5u);  // the header, then the four non-empty tensors straight from their buffers
  EXPECT_EQ(n, joined.size());
  EXPECT_TRUE(joined == to_safetensors(tensors));
}

TEST_P(BlobStreamTest, ADatasetSavedInPiecesRoundTripsExactly) {
  const NamedTensors tensors = awkward_tensors();
  const auto bytes = to_safetensors(tensors);
  ASSERT_GT(bytes.size(), 3 * kMiB);  // four chunks, the last one partial
  Hub hub(db_->uri(), "p");
  hub.save_dataset(tensors, "awkward");
  auto rec = hub.find_top_dataset("awkward");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->document.parts.at("tensors.safetensors"), sha256_hex(bytes));
  EXPECT_TRUE(hub.read_blob(sha256_hex(bytes)) == bytes);
  ASSERT_EQ(rec->tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) EXPECT_TRUE(rec->tensors.at(name).data == t.data) << name;
  // Weights go the same way.
  hub.save_model({{"layers", Json::array()}}, tensors, "m");
  auto model = hub.find_top_model("m");
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->weights.at("d_two_chunks").data == tensors.at("d_two_chunks").data);
  EXPECT_EQ(hub.count_blobs(), 2);  // the dataset's bytes, shared by the weights; model.json
}

// A source whose bytes change between the hashing read and the storing read.
class ChangingSource final : public BlobSource {
 public:
  std::uint64_t size() const override { return 3 * kMiB; }
  void write(const std::function<void(std::span<const std::byte>)>& sink) const override {
    std::vector<std::byte> piece(kMiB, std::byte{static_cast<unsigned char>(reads_++)});
    for (int i = 0; i < 3; ++i) sink(piece);
    if (reads_ > 1) sink(piece);  // and longer the second time
  }

 private:
  mutable std::atomic<int> reads_{0};
};

TEST_P(BlobStreamTest, ASourceThatChangesWhileStoredIsDataLossAndStoresNothing) {
  Hub hub(db_->uri(), "p");
  const ChangingSource source;
  const std::string message = testing::error_message_of(
      ErrorKind::kDataLoss,
      [&] { hub.save_document(Collection::kDatasets, {{"dataset_name", "x"}}, PartSources{{"t", &source}}); },
      "changing source");
  EXPECT_NE(message.find("part \"t\" gave 4194304 bytes, not the 3145728"), std::string::npos) << message;
  EXPECT_TRUE(hub.find_datasets().empty());
  EXPECT_EQ(hub.count_blobs(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, BlobStreamTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
