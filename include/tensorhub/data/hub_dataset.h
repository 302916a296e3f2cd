// Reading sharded hub datasets (store/dataset_shards.h) record by record: the source a
// pipeline's `from_hub` builds on; and their feature specs as JSON (a dataset's "features",
// the features file of `dataset import --features`, a train spec's "features").
//
//   tensorhub::Hub hub(uri, "fmnist");
//   auto dataset = tensorhub::find_sharded_dataset(hub, "fmnist-train");   // shards + counts
//   tensorhub::BlobCache cache;                                            // per machine
//   for (const auto& shard : dataset->shards) {                            // shard(n, i): pick
//     tensorhub::HubShardReader reader(hub, *dataset, shard, &cache);
//     std::string record;
//     while (reader.read(record)) { ... parse with hub_feature_specs(*dataset) ... }
//   }
//
// Verification before use: a shard's blob is first fetched whole into a local file (the
// machine's BlobCache, or an unnamed temporary file) while its SHA-256 is checked
// (Backend::read_blob_chunks), and only a verified file is read; no record of a corrupt blob
// is ever handed out. Memory: one chunk while fetching, one record while reading (the file is
// read through TFRecordReader's buffer); disk: the shard, once per machine with a cache.
//
// Thread safety: a HubShardReader is used by one thread at a time. Its constructor uses the
// Hub (one connection: one thread at a time, or one Hub per thread); read() does not
// touch the Hub, so readers of different shards may run in parallel once constructed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tensorhub/core/json.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// Feature specs from JSON: the form of a sharded dataset's "features" (store/dataset_shards.h),
/// of `dataset import --features FILE` and of a train spec's "features"; one object per
/// feature, TensorFlow's class names (tf.io.FixedLenFeature etc.):
///   {"image": {"type": "FixedLenFeature", "shape": [], "dtype": "string"},
///    "label": {"type": "FixedLenFeature", "shape": [], "dtype": "int64", "default_value": [0]},
///    "tags":  {"type": "VarLenFeature", "dtype": "string"},
///    "frames": {"type": "FixedLenSequenceFeature", "shape": [2], "dtype": "float32",
///               "allow_missing": true, "default_value": 0}}
/// "shape" defaults to [], "allow_missing" to false; a default is a value or a flat list.
/// Throws InvalidArgument naming the feature and the key for anything else (not an object, an
/// unknown type or dtype, a wrong value type); the specs are not checked further here
/// (ExampleParser does that).
FeatureSpecs feature_specs_from_json(const Json& json);
/// The JSON form feature_specs_from_json reads (defaults as flat lists).
Json feature_specs_to_json(const FeatureSpecs& specs);

/// The dataset's compression as a TFRecordCompression. Throws DataLoss naming the document
/// for a name TFRecord does not know.
TFRecordCompression hub_compression(const ShardedDataset& dataset);

/// The dataset's feature specs (its "features" JSON), or nothing when it was imported
/// without them. Throws DataLoss naming the document when the stored JSON is not valid specs.
std::optional<FeatureSpecs> hub_feature_specs(const ShardedDataset& dataset);

/// Reads the records of one shard of a sharded hub dataset in order.
class HubShardReader {
 public:
  /// Fetches `shard`'s blob from `hub` into a verified local file, through `cache` when
  /// given (then a machine fetches each shard once), else into an unnamed temporary file
  /// under $TMPDIR, and opens it with the dataset's compression. Throws NotFound /
  /// DataLoss (naming the blob) as BlobCache::open, Unavailable for a local file error.
  HubShardReader(Hub& hub, const ShardedDataset& dataset, const DatasetShard& shard,
                 BlobCache* cache = nullptr);
  ~HubShardReader();
  HubShardReader(HubShardReader&&) noexcept;
  HubShardReader& operator=(HubShardReader&&) noexcept;

  /// Reads the next record into `record` and returns true, or false after the last one.
  /// Throws DataLoss naming the dataset, the shard (part and file name) and the record's byte
  /// offset (in the uncompressed stream) for a record that fails its CRC or is truncated, and
  /// when the shard holds a different number of records than its document says.
  bool read(std::string& record);

  /// Index (0-based) of the next record in the shard; after a read(), the record read + 1.
  std::int64_t index() const noexcept;
  /// Where the next record comes from, for ExampleParser's error messages: file = the shard's
  /// name ("<dataset>/<part> (<file>)"), index, byte offset.
  RecordSource source() const;
  const DatasetShard& shard() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorhub
