// from_hub (hub_source.h): a source node of the Dataset pipeline over a sharded hub dataset.
#include "tensorhub/data/hub_source.h"

#include <optional>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

struct HubShards {
  std::string uri;
  ShardedDataset dataset;
  std::vector<DatasetShard> shards;  // the ones this source reads, in order
  BlobCache* cache;
};

class HubShardsIterator : public detail::ElementIterator {
 public:
  explicit HubShardsIterator(std::shared_ptr<const HubShards> source) : source_(std::move(source)) {}

  std::optional<NamedTensors> next() override {
    while (next_shard_ < source_->shards.size() || reader_) {
      if (!reader_) open_next();
      try {
        if (reader_->read(record_)) return NamedTensors{{"record", bytes_tensor(record_)}};
      } catch (...) {
        reader_.reset();  // the rest of a corrupt shard cannot be framed: go on with the next
        throw;
      }
      reader_.reset();
    }
    return std::nullopt;
  }

 private:
  // Opens the next shard; on failure that shard counts as read (ignore_errors goes on).
  void open_next() {
    const DatasetShard& shard = source_->shards[next_shard_++];
    if (!hub_) {
      // Blobs belong to no project; the dataset's own names the connection in messages.
      const std::string& project = source_->dataset.document.project_name;
      hub_.emplace(source_->uri, project.empty() ? "default" : project, OpenMode::kReadOnly);  // shards are only read
    }
    reader_.emplace(*hub_, source_->dataset, shard, source_->cache);
  }

  std::shared_ptr<const HubShards> source_;
  std::optional<Hub> hub_;  // this pass's own connection
  std::optional<HubShardReader> reader_;
  std::size_t next_shard_ = 0;
  std::string record_;
};

class HubShardsNode : public detail::DatasetNode {
 public:
  explicit HubShardsNode(std::shared_ptr<const HubShards> source) : source_(std::move(source)) {}
  detail::IteratorPtr make_iterator(const detail::ContextPtr&) const override {
    return std::make_unique<HubShardsIterator>(source_);
  }
  // The records of this reader's shards, counted when they were stored.
  std::int64_t cardinality() const override {
    std::int64_t n = 0;
    for (const auto& shard : source_->shards) n += shard.records;
    return n;
  }

 private:
  std::shared_ptr<const HubShards> source_;
};

}  // namespace

Dataset from_hub(std::string uri, ShardedDataset dataset, BlobCache* cache, std::int64_t num_shards,
                 std::int64_t index) {
  if (num_shards < 1 || index < 0 || index >= num_shards)
    throw InvalidArgument("from_hub: num_shards = " + std::to_string(num_shards) + " and index = " +
                          std::to_string(index) + " must satisfy num_shards >= 1 and 0 <= index < num_shards");
  auto source = std::make_shared<HubShards>();
  for (std::size_t i = 0; i < dataset.shards.size(); ++i)
    if (static_cast<std::int64_t>(i) % num_shards == index) source->shards.push_back(dataset.shards[i]);
  source->uri = std::move(uri);
  source->dataset = std::move(dataset);
  source->cache = cache;
  return Dataset(std::make_shared<HubShardsNode>(std::move(source)));
}

}  // namespace tensorhub
