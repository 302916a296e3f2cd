// from_hub: a sharded hub dataset (store/dataset_shards.h) as a pipeline source, read shard by
// shard (data/hub_dataset.h's HubShardReader), so a dataset larger than memory streams.
//
//   auto shards = find_sharded_dataset(hub, "fmnist-train");
//   Dataset ds = from_hub(hub.uri(), *shards, hub.blob_cache())
//                    .map(parse).shuffle(10000, 1).batch(256).prefetch(Dataset::kAutotune);
#pragma once

#include <cstdint>
#include <string>

#include "tensorhub/data/dataset.h"
#include "tensorhub/store/dataset_shards.h"

namespace tensorhub {

class BlobCache;  // tensorhub/store/blob_cache.h

/// {"record": bytes (U8 [length])} for every record of `dataset`'s shards, shard by shard in
/// the document's order (TFRecordDataset's elements). Each shard's blob is fetched whole into a
/// verified local file before any of its records is handed out: through `cache` when given (a
/// machine then fetches each shard once, every later pass and process reads the local file),
/// else into an unnamed temporary file, removed when the shard has been read. Memory: one
/// record and the reader's buffer.
/// Each pass opens its own connection to the hub at `uri` (OpenMode::kExisting) when it needs
/// its first shard, so a pass running on a prefetch thread never shares the caller's
/// connection (one connection serves one thread at a time).
/// num_shards / index keep the shards whose position mod num_shards == index (tf.data's
/// advice: shard the files, not the records, so each worker reads only its own shards).
/// Throws InvalidArgument unless num_shards >= 1 and 0 <= index < num_shards. next() throws
/// what HubShardReader throws (NotFound for a missing blob, DataLoss naming the shard and the
/// record's offset); after such an error the rest of that shard is skipped, so that
/// ignore_errors() goes on with the next shard.
/// REQUIRES: `cache`, when given, outlives every pass.
Dataset from_hub(std::string uri, ShardedDataset dataset, BlobCache* cache = nullptr, std::int64_t num_shards = 1,
                 std::int64_t index = 0);

}  // namespace tensorhub
