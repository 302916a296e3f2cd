// What both backends do with a BlobSource: hash it, and cut it into the 1 MiB chunks they
// store (DESIGN.md), one chunk in memory at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// Bytes per stored chunk.
inline constexpr std::size_t kChunkBytes = 1 << 20;

/// Number of chunks a blob of `size` bytes is stored in.
inline std::int64_t chunk_count_of(std::uint64_t size) {
  return static_cast<std::int64_t>((size + kChunkBytes - 1) / kChunkBytes);
}

/// SHA-256 (hex) of a source's bytes. Throws DataLoss if it yields other than size() bytes.
std::string sha256_of(const BlobSource& source, const std::string& part);

/// Passes the source's bytes to `store(index, chunk)` as chunks 0, 1, ... of kChunkBytes
/// (the last one shorter). Throws DataLoss if it yields other than size() bytes, or bytes
/// that do not hash to `sha256` (the source changed since it was hashed, e.g. a file being
/// rewritten): the caller's transaction then stores nothing.
void write_chunks(const BlobSource& source, const std::string& sha256, const std::string& part,
                  const std::function<void(std::int64_t index, std::span<const std::byte> chunk)>& store);

}  // namespace tensorhub
