// from_hub (data/hub_source.h): a sharded hub dataset as a pipeline source, on every backend:
// the records of every shard in order, shard selection, a blob cache that fetches each shard
// once, passes on a prefetch thread with their own connection, a missing blob as an error, and
// a corrupt shard that ignore_errors() skips to the next shard.
#include "tensorhub/data/hub_source.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/store/blob_cache.h"

namespace tensorhub {
namespace {

using testing::TempDir;

// Three shards of records "s<shard>-r<i>" (shard k holds k + 2 records).
class HubSourceTest : public testing::BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    ShardedDatasetSpec spec;
    spec.compression = "GZIP";
    for (int s = 0; s < 3; ++s) {
      const auto path = dir_ / ("part-" + std::to_string(s) + ".tfrecord.gz");
      TFRecordWriter w(path, {.compression = TFRecordCompression::kGzip});
      for (int i = 0; i < s + 2; ++i) w.write("s" + std::to_string(s) + "-r" + std::to_string(i));
      w.close();
      spec.files.push_back({path, s + 2});
    }
    save_sharded_dataset(*hub_, "parts", spec);
    dataset_ = *find_sharded_dataset(*hub_, "parts");
  }

  static std::vector<std::string> records(const Dataset& ds) {
    std::vector<std::string> out;
    for (const NamedTensors& e : ds) out.push_back(tensor_bytes(e.at("record")));
    return out;
  }

  std::unique_ptr<Hub> hub_;
  TempDir dir_;
  ShardedDataset dataset_;
};

TEST_P(HubSourceTest, EveryRecordOfEveryShardInOrder) {
  const Dataset ds = from_hub(hub_->uri(), dataset_);
  const std::vector<std::string> want = {"s0-r0", "s0-r1", "s1-r0", "s1-r1", "s1-r2",
                                         "s2-r0", "s2-r1", "s2-r2", "s2-r3"};
  EXPECT_EQ(records(ds), want);
  EXPECT_EQ(records(ds), want);  // a second pass reads them again
  // Behind a prefetch thread the pass uses a connection of its own.
  EXPECT_EQ(records(ds.prefetch(2)), want);
}

TEST_P(HubSourceTest, ShardSelectionKeepsEveryNumShardsthShard) {
  EXPECT_EQ(records(from_hub(hub_->uri(), dataset_, nullptr, 2, 0)),
            (std::vector<std::string>{"s0-r0", "s0-r1", "s2-r0", "s2-r1", "s2-r2", "s2-r3"}));
  EXPECT_EQ(records(from_hub(hub_->uri(), dataset_, nullptr, 2, 1)),
            (std::vector<std::string>{"s1-r0", "s1-r1", "s1-r2"}));
  testing::expect_error([&] { from_hub(hub_->uri(), dataset_, nullptr, 2, 2); }, ErrorKind::kInvalidArgument,
                        {"num_shards = 2 and index = 2"});
}

TEST_P(HubSourceTest, ABlobCacheFetchesEachShardOnce) {
  BlobCache cache({.directory = dir_ / "cache"});
  const Dataset ds = from_hub(hub_->uri(), dataset_, &cache);
  EXPECT_EQ(records(ds).size(), 9u);
  EXPECT_EQ(cache.stats().fetches, 3);
  EXPECT_EQ(cache.stats().hits, 0);
  EXPECT_EQ(records(ds).size(), 9u);
  EXPECT_EQ(cache.stats().fetches, 3);
  EXPECT_EQ(cache.stats().hits, 3);
  for (const auto& shard : dataset_.shards) EXPECT_TRUE(cache.contains(shard.sha256));
}

TEST_P(HubSourceTest, AMissingShardIsAnErrorAndACorruptOneIsSkippedByIgnoreErrors) {
  ShardedDataset missing = dataset_;
  missing.shards[1].sha256 = std::string(64, 'a');  // no such blob
  DatasetIterator it = from_hub(hub_->uri(), missing).iterator();
  EXPECT_EQ(tensor_bytes(it.next()->at("record")), "s0-r0");
  EXPECT_EQ(tensor_bytes(it.next()->at("record")), "s0-r1");
  testing::expect_error([&] { it.next(); }, ErrorKind::kNotFound, {std::string(64, 'a')});
  // A shard holding more records than its document says is DataLoss at the extra record; the
  // rest of that shard is skipped and the next one read.
  ShardedDataset miscounted = dataset_;
  miscounted.shards[1].records = 1;
  const Dataset skipping = from_hub(hub_->uri(), miscounted).ignore_errors();
  EXPECT_EQ(records(skipping), (std::vector<std::string>{"s0-r0", "s0-r1", "s1-r0", "s2-r0", "s2-r1", "s2-r2", "s2-r3"}));
  EXPECT_EQ(skipping.ignored_errors(), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, HubSourceTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
