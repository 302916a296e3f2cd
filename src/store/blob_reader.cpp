#include "blob_reader.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tensorhub/core/error.h"

namespace tensorhub {

std::vector<std::byte> Backend::read_blob(const std::string& sha256) {
  std::vector<std::byte> out;
  if (const auto size = blob_size(sha256))  // one allocation; read_blob_chunks re-checks the size
    out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*size, std::uint64_t{1} << 30)));
  read_blob_chunks(sha256, [&](std::span<const std::byte> chunk) { out.insert(out.end(), chunk.begin(), chunk.end()); });
  return out;
}

namespace detail {

BlobVerifier::BlobVerifier(std::string sha256, std::int64_t size, std::int64_t chunk_count, std::string where)
    : sha256_(std::move(sha256)), where_(std::move(where)), size_(size), chunk_count_(chunk_count) {
  if (size_ < 0 || chunk_count_ < 0) throw DataLoss("blob " + sha256_ + ": negative size in its record in " + where_);
}

void BlobVerifier::chunk(std::int64_t index, std::span<const std::byte> bytes, const Backend::BlobChunkSink& sink) {
  if (index != next_index_ || index >= chunk_count_)
    throw DataLoss("blob " + sha256_ + " in " + where_ + ": chunk " + std::to_string(next_index_) +
                   " is missing (found chunk " + std::to_string(index) + " of " + std::to_string(chunk_count_) + ")");
  seen_ += bytes.size();
  if (seen_ > static_cast<std::uint64_t>(size_))
    throw DataLoss("blob " + sha256_ + " in " + where_ + ": chunks hold more than its recorded " +
                   std::to_string(size_) + " bytes");
  hash_.update(bytes);
  if (++next_index_ == chunk_count_) verify();  // before the last chunk leaves
  sink(bytes);
}

std::uint64_t BlobVerifier::finish() {
  if (next_index_ != chunk_count_)
    throw DataLoss("blob " + sha256_ + " in " + where_ + ": chunk " + std::to_string(next_index_) + " is missing; " +
                   std::to_string(seen_) + " bytes in " + std::to_string(next_index_) + " chunks, expected " +
                   std::to_string(size_) + " bytes in " + std::to_string(chunk_count_) + " (truncated)");
  if (chunk_count_ == 0) verify();
  return seen_;
}

void BlobVerifier::verify() {
  if (seen_ != static_cast<std::uint64_t>(size_))
    throw DataLoss("blob " + sha256_ + " in " + where_ + ": " + std::to_string(seen_) + " bytes, expected " +
                   std::to_string(size_) + " (truncated)");
  const std::string actual = hash_.hex_digest();
  if (actual != sha256_)
    throw DataLoss("blob " + sha256_ + " in " + where_ + " is corrupt: its bytes hash to " + actual +
                   "; the stored data was modified or damaged");
}

}  // namespace detail
}  // namespace tensorhub
