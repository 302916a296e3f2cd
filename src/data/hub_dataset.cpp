#include "tensorhub/data/hub_dataset.h"

#include <optional>
#include <utility>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// `message` with every occurrence of `from` replaced by `to`.
std::string replace_all(std::string message, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; !from.empty() && (pos = message.find(from, pos)) != std::string::npos; pos += to.size())
    message.replace(pos, from.size(), to);
  return message;
}

// The shard as error messages name it: "dataset 'fmnist' shard-00001 (train-1.tfrecord)".
std::string shard_name(const ShardedDataset& dataset, const DatasetShard& shard) {
  const std::string name = dataset.document.tags.value("dataset_name", std::string("?"));
  return "dataset '" + name + "' " + shard.part + " (" + shard.file + ")";
}

CachedBlob fetch(Hub& hub, const DatasetShard& shard, BlobCache* cache) {
  return cache ? cache->open(hub, shard.sha256) : fetch_blob_to_temp_file(hub, shard.sha256);
}

}  // namespace

TFRecordCompression hub_compression(const ShardedDataset& dataset) {
  try {
    return parse_tfrecord_compression(dataset.compression);
  } catch (const Error& e) {
    throw DataLoss("dataset document " + std::to_string(dataset.document.id) + ": " + e.message());
  }
}

std::optional<FeatureSpecs> hub_feature_specs(const ShardedDataset& dataset) {
  if (dataset.features.is_null()) return std::nullopt;
  try {
    return feature_specs_from_json(dataset.features);
  } catch (const Error& e) {
    throw DataLoss("dataset document " + std::to_string(dataset.document.id) + " holds invalid features: " +
                   e.message());
  }
}

struct HubShardReader::Impl {
  DatasetShard shard;
  std::string name;  // shard_name()
  CachedBlob blob;
  std::optional<TFRecordReader> reader;
  std::int64_t index = 0;

  // Runs `fn`, renaming the reader's "/proc/self/fd/N" to the shard in any error.
  template <typename Fn>
  auto named(Fn&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      throw Error(e.kind(), replace_all(e.message(), blob.path().string(), name));
    }
  }
};

HubShardReader::HubShardReader(Hub& hub, const ShardedDataset& dataset, const DatasetShard& shard,
                               BlobCache* cache)
    : impl_(new Impl{shard, shard_name(dataset, shard), fetch(hub, shard, cache), std::nullopt, 0}) {
  const TFRecordCompression compression = hub_compression(dataset);
  impl_->named([&] { impl_->reader.emplace(impl_->blob.path(), compression); });
}

HubShardReader::~HubShardReader() = default;
HubShardReader::HubShardReader(HubShardReader&&) noexcept = default;
HubShardReader& HubShardReader::operator=(HubShardReader&&) noexcept = default;

bool HubShardReader::read(std::string& record) {
  Impl& m = *impl_;
  if (!m.named([&] { return m.reader->read(record); })) {
    if (m.index != m.shard.records)
      throw DataLoss(m.name + " holds " + std::to_string(m.index) + " records, but its dataset document says " +
                     std::to_string(m.shard.records));
    return false;
  }
  if (++m.index > m.shard.records)
    throw DataLoss(m.name + " holds more than the " + std::to_string(m.shard.records) +
                   " records its dataset document says");
  return true;
}

std::int64_t HubShardReader::index() const noexcept { return impl_->index; }

RecordSource HubShardReader::source() const {
  return {impl_->name, impl_->index, static_cast<std::int64_t>(impl_->reader->offset())};
}

const DatasetShard& HubShardReader::shard() const noexcept { return impl_->shard; }

}  // namespace tensorhub
