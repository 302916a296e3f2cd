// Sharded hub datasets: a dataset stored as the files it came in (TFRecord shards), each file
// one blob, with its schema and record counts in the dataset's document. Such a dataset can be
// larger than memory: it is saved file by file, one 1 MiB chunk in memory at a time, and read
// shard by shard (data/hub_dataset.h reads a shard's records).
//
// The dataset's document (collection datasets) holds, besides the caller's tags:
//   "dataset_name": "fmnist",
//   "format":       "tfrecord",
//   "compression":  "NONE" | "GZIP" | "ZLIB"   (every shard's, TensorFlow's names),
//   "features":     {...}                       (optional: feature specs as JSON, the form of
//                                                data/hub_dataset.h's feature_specs_from_json),
//   "records":      total number of records,
//   "shards": [{"part": "shard-00000", "file": "train-00000-of-00002.tfrecord",
//               "records": 30000, "bytes": 24117248}, ...]          (in reading order)
// and one part per shard: "shard-00000", ... -> the SHA-256 of the file's bytes as they were
// (compressed or not). Identical files share one blob.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// One shard of a sharded dataset.
struct DatasetShard {
  std::string part;           ///< the document's part name: "shard-00000", "shard-00001", ...
  std::string sha256;         ///< its blob (read it with Hub::read_blob, BlobCache, ...)
  std::string file;           ///< the file's name when it was imported (no directory)
  std::int64_t records = 0;   ///< number of records in it
  std::uint64_t bytes = 0;    ///< size of the blob (the file as stored) in bytes
};

/// A sharded dataset as its document describes it.
struct ShardedDataset {
  Document document;
  std::string format;               ///< "tfrecord"
  std::string compression;          ///< "NONE", "GZIP" or "ZLIB"
  Json features;                    ///< feature specs (JSON), or null when none was given
  std::vector<DatasetShard> shards; ///< in reading order
  std::int64_t records = 0;         ///< sum of the shards' records
};

/// A file to store as a shard, with what the caller found in it.
struct ShardFile {
  std::filesystem::path path;
  std::int64_t records = 0;  ///< number of records (the caller counted them while checking)
};

/// What save_sharded_dataset stores besides the files.
struct ShardedDatasetSpec {
  std::string format = "tfrecord";
  std::string compression = "NONE";  ///< how the files are compressed
  Json features;                     ///< feature specs (JSON) or null
  std::vector<ShardFile> files;      ///< in reading order; at least one
};

/// The part name of shard `index`: "shard-00000" (five digits, more past 99,999).
std::string shard_part_name(std::size_t index);

/// Checks `tags` for save_sharded_dataset before anything is read: throws InvalidArgument for
/// non-object tags or a key reserved for the layout ("dataset_name", "format", "compression",
/// "features", "records", "shards"). Null is an empty object.
void check_sharded_dataset_tags(const Json& tags);

/// Saves `spec.files` as dataset `dataset_name` of hub's project: each file one blob, read in
/// 1 MiB pieces (twice: hashed, then stored), all in one transaction, so a failure leaves
/// nothing behind. `tags` (a JSON object) may not use the keys listed in the file comment.
/// Returns the document id. Throws InvalidArgument for no files, non-object tags or a
/// reserved tag; NotFound for a missing file; DataLoss if a file changes while it is stored;
/// what Backend::insert_document throws.
std::int64_t save_sharded_dataset(Hub& hub, const std::string& dataset_name, const ShardedDatasetSpec& spec,
                                  const Json& tags = Json::object());

/// True when `document` (a dataset) is sharded: its tags hold "shards".
bool is_sharded_dataset(const Document& document);

/// The layout of a sharded dataset's document. Throws DataLoss naming the document when its
/// tags or parts do not hold the layout above (e.g. a shard whose part is missing).
ShardedDataset sharded_dataset_of(const Document& document);

/// The first sharded dataset named `dataset_name` matching `filter`, in `sort` order (newest
/// first when empty); nothing when no dataset of that name matches. Throws
/// FailedPrecondition when the matching dataset holds tensors instead of shards, and what
/// sharded_dataset_of throws.
std::optional<ShardedDataset> find_sharded_dataset(Hub& hub, const std::string& dataset_name,
                                                   const Json& filter = Json::object(), const SortSpec& sort = {});

}  // namespace tensorhub
