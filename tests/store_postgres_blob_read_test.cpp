// Reading a blob from PostgreSQL as one streamed query (its chunks handed over row by row):
// damage found part-way through is DataLoss naming the blob, and the connection stays usable
// for the next read (the rest of the stream is drained).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

// 4.4 MB of distinct floats: five chunks.
NamedTensors five_chunks() {
  std::vector<float> v(1'100'000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  NamedTensors t;
  t["x"] = Tensor::from<float>(DType::kF32, {static_cast<std::int64_t>(v.size())}, v);
  return t;
}

NamedTensors small() {
  NamedTensors t;
  t["y"] = Tensor::from<std::int64_t>(DType::kI64, {3}, {1, -2, 3});
  return t;
}

TEST(PostgresBlobRead, DamageMidStreamIsDataLossAndTheConnectionStaysUsable) {
  auto db = testing::PostgresTestDatabase::create();
  if (!db) GTEST_SKIP() << testing::kNoPostgres;
  Hub hub(db->uri(), "p");
  hub.save_dataset(five_chunks(), "victim");
  hub.save_dataset(small(), "bystander");
  const std::string sha = sha256_hex(to_safetensors(five_chunks()));
  ASSERT_EQ(hub.sql().execute("SELECT count(*) FROM blob_chunks WHERE sha256 = ?", {sha}).int64(0, 0), 5);
  const auto back = hub.find_top_dataset("victim");  // undamaged: every chunk, in order
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tensors.at("x").data, five_chunks().at("x").data);

  auto expect_loss_then_bystander = [&](const std::vector<std::string>& words, const char* label) {
    const std::string message =
        testing::error_message_of(ErrorKind::kDataLoss, [&] { hub.find_top_dataset("victim"); }, label);
    for (const auto& w : words) EXPECT_NE(message.find(w), std::string::npos) << label << ": " << message;
    const auto other = hub.find_top_dataset("bystander");  // the same connection, after the error
    ASSERT_TRUE(other) << label;
    EXPECT_EQ(other->tensors.at("y").data, small().at("y").data) << label;
  };
  // Chunk 1 zeroed: the hash, checked at the last chunk, fails.
  hub.sql().execute("UPDATE blob_chunks SET data = decode(repeat('00', length(data)), 'hex') "
                    "WHERE sha256 = ? AND idx = 1", {sha}, sql::Access::kWrite);
  expect_loss_then_bystander({"blob " + sha, "is corrupt"}, "chunk 1 zeroed");
  // Chunk 1 gone: refused at chunk 2, with chunks 3 and 4 still on their way.
  hub.sql().execute("DELETE FROM blob_chunks WHERE sha256 = ? AND idx = 1", {sha}, sql::Access::kWrite);
  expect_loss_then_bystander({"blob " + sha, "chunk 1 is missing"}, "chunk 1 deleted");
}

}  // namespace
}  // namespace tensorhub
