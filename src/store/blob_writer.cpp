#include "blob_writer.h"

#include <algorithm>

#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"

namespace tensorhub {
namespace {

void check_size(const BlobSource& source, std::uint64_t written, const std::string& part) {
  if (written != source.size())
    throw DataLoss("part \"" + part + "\" gave " + std::to_string(written) + " bytes, not the " +
                   std::to_string(source.size()) + " it announced (changed while being stored?)");
}

}  // namespace

std::int64_t Backend::insert_document(Collection c, const std::string& project, const Json& tags,
                                      const Parts& parts) {
  std::vector<BytesBlobSource> sources;
  sources.reserve(parts.size());
  PartSources refs;
  for (const auto& [name, bytes] : parts) refs[name] = &sources.emplace_back(bytes);
  return insert_document(c, project, tags, refs);
}

std::string sha256_of(const BlobSource& source, const std::string& part) {
  Sha256 hash;
  std::uint64_t written = 0;
  source.write([&](std::span<const std::byte> bytes) {
    hash.update(bytes);
    written += bytes.size();
  });
  check_size(source, written, part);
  return hash.hex_digest();
}

void write_chunks(const BlobSource& source, const std::string& sha256, const std::string& part,
                  const std::function<void(std::int64_t, std::span<const std::byte>)>& store) {
  std::vector<std::byte> buffer;
  std::int64_t index = 0;
  std::uint64_t written = 0;
  Sha256 hash;
  source.write([&](std::span<const std::byte> bytes) {
    written += bytes.size();
    hash.update(bytes);
    while (!bytes.empty()) {
      // A whole chunk inside the piece goes as it is; only chunks spanning pieces are copied.
      if (buffer.empty() && bytes.size() >= kChunkBytes) {
        store(index++, bytes.first(kChunkBytes));
        bytes = bytes.subspan(kChunkBytes);
        continue;
      }
      if (buffer.capacity() < kChunkBytes) buffer.reserve(kChunkBytes);
      const std::size_t n = std::min(bytes.size(), kChunkBytes - buffer.size());
      buffer.insert(buffer.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      bytes = bytes.subspan(n);
      if (buffer.size() == kChunkBytes) {
        store(index++, buffer);
        buffer.clear();
      }
    }
  });
  if (!buffer.empty()) store(index++, buffer);
  check_size(source, written, part);
  if (hash.hex_digest() != sha256)
    throw DataLoss("part \"" + part + "\" changed while being stored (its bytes no longer hash to " + sha256 +
                   "); nothing was saved");
}

}  // namespace tensorhub
