// What both backends do when they read a blob back: check its chunks as they arrive, hash
// them, and verify the whole before the last chunk leaves (Backend::read_blob_chunks).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tensorhub/core/hash.h"
#include "tensorhub/store/backend.h"

namespace tensorhub::detail {

/// Checks one blob's chunks, fed in order, against its record (size, chunk count) and its
/// SHA-256, and passes each on to a sink; the last one only once the whole is verified.
class BlobVerifier {
 public:
  /// `size` and `chunk_count` are the blob's record; `where` names the hub for messages.
  /// Throws DataLoss if the record is negative.
  BlobVerifier(std::string sha256, std::int64_t size, std::int64_t chunk_count, std::string where);

  /// Chunk `index` of the blob: checks it is the next one and that the bytes do not exceed
  /// the recorded size, hashes it, verifies the whole blob if it is the last chunk, then
  /// passes it to `sink`. Throws DataLoss naming the blob for a missing chunk, an oversized
  /// blob, or (at the last chunk) a wrong size or hash.
  void chunk(std::int64_t index, std::span<const std::byte> bytes, const Backend::BlobChunkSink& sink);

  /// After the last stored chunk: throws DataLoss if chunks were missing (a blob of zero
  /// chunks is verified here). Returns the blob's size.
  std::uint64_t finish();

 private:
  void verify();  // throws DataLoss unless the bytes seen are exactly the blob

  std::string sha256_, where_;
  std::int64_t size_, chunk_count_;
  std::int64_t next_index_ = 0;
  std::uint64_t seen_ = 0;
  Sha256 hash_;
};

}  // namespace tensorhub::detail
