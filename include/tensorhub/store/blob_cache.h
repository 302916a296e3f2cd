// BlobCache: a per-machine, content-addressed cache of hub blobs, so that a blob crosses the
// network once per machine however many runners and trials read it.
//
//   tensorhub::BlobCache cache;  // ~/.cache/tensorhub/blobs, 10 GiB
//   tensorhub::CachedBlob blob = cache.open(hub, sha256);
//   tensorhub::TFRecordReader reader(blob.path());
//
// Layout: one read-only file per blob, named by its SHA-256 (64 lower-case hex digits), in one
// directory; temporary files (".tmp-*") while a blob is being fetched; ".lock" for eviction.
//
// Guarantees, across any number of processes sharing the directory:
//  - A file of the cache is complete and verified: a blob is fetched into a temporary file
//    (Backend::read_blob_chunks verifies its SHA-256 before its last chunk arrives) and only
//    then renamed to its name, atomically. A reader never sees a partial file. Processes that
//    fetch the same blob at once each write their own temporary file; the renames replace
//    one complete copy with another.
//  - Each open() of a cached file re-hashes it (BlobCacheOptions::verify_hits): a file damaged
//    on disk is removed and fetched again, never handed out.
//  - A CachedBlob holds the file open: eviction by another process (which unlinks the name)
//    never takes the bytes from under a reader.
//  - Size limit, least recently used out: open() stamps the file's modification time (the
//    "last used" time, nanoseconds from this process's clock); after each fetch, the cache
//    removes the least recently used files until it holds at most max_bytes, under an
//    exclusive flock of ".lock" so that two evictions do not race.
//
// Thread safety: a BlobCache object may be used from several threads at once (the Hub
// passed to open() may not: one connection per thread, as always).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/store/backend.h"

namespace tensorhub {
class Hub;  // tensorhub/store/hub.h
}

namespace tensorhub {

/// Where and how big. The defaults suit a runner machine.
struct BlobCacheOptions {
  /// The cache directory, created when missing; empty: default_blob_cache_dir().
  std::filesystem::path directory;
  /// Size limit in bytes of the cached files together (default 10 GiB). A blob larger than
  /// the limit is still fetched and handed out, then removed from the directory.
  std::uint64_t max_bytes = std::uint64_t{10} << 30;
  /// Re-hash a cached file on every open() (SHA-256, about 0.5-2 GB/s on one core) so that a
  /// file damaged on disk is detected and fetched again. Off: only its size is checked.
  bool verify_hits = true;
};

/// $TENSORHUB_BLOB_CACHE_DIR if set, else $XDG_CACHE_HOME/tensorhub/blobs, else
/// $HOME/.cache/tensorhub/blobs (the XDG base directory specification's default).
/// Throws FailedPrecondition when none of the three variables is set.
std::filesystem::path default_blob_cache_dir();

/// An open, verified, read-only file of the cache. Movable, not copyable; closes its file.
class CachedBlob {
 public:
  CachedBlob(int fd, std::string sha256, std::uint64_t size) noexcept;
  ~CachedBlob();
  CachedBlob(CachedBlob&& other) noexcept;
  CachedBlob& operator=(CachedBlob&& other) noexcept;
  CachedBlob(const CachedBlob&) = delete;
  CachedBlob& operator=(const CachedBlob&) = delete;

  /// The blob's SHA-256, 64 lowercase hex digits (also the cache file's name).
  const std::string& sha256() const noexcept { return sha256_; }
  /// Size in bytes.
  std::uint64_t size() const noexcept { return size_; }
  /// The open file descriptor (owned by this object).
  int fd() const noexcept { return fd_; }
  /// "/proc/self/fd/<fd>": a path that opens this same file (Linux), even after eviction
  /// removed its name, for readers that take a path (TFRecordReader). Valid while this
  /// object lives.
  std::filesystem::path path() const;
  /// The whole file in memory. Throws Unavailable if reading fails.
  std::vector<std::byte> read_all() const;

 private:
  int fd_ = -1;
  std::string sha256_;
  std::uint64_t size_ = 0;
};

/// Counters of one BlobCache object (this process's opens only), for tests and logs.
struct BlobCacheStats {
  std::int64_t hits = 0;     ///< opens served from a verified cached file
  std::int64_t fetches = 0;  ///< blobs fetched from a hub
  std::int64_t corrupt = 0;  ///< cached files that failed verification and were fetched again
  std::int64_t evicted = 0;  ///< files this process's evictions removed
};

class BlobCache;

/// The machine's cache as the environment configures it, for runners' tasks and trials:
/// directory default_blob_cache_dir(), limit $TENSORHUB_BLOB_CACHE_MAX_MB (MiB; default
/// 10240). nullptr when $TENSORHUB_BLOB_CACHE is "off" (read straight from the hub) or no
/// directory can be derived or created (a warning-free fallback: the hub still works).
/// Throws InvalidArgument for a $TENSORHUB_BLOB_CACHE_MAX_MB that is not a positive integer.
std::shared_ptr<BlobCache> machine_blob_cache();

/// Blob `sha256` of `hub` fetched into an unnamed temporary file under `directory` (default:
/// $TMPDIR or /tmp; O_TMPFILE, gone when closed), verified: for readers without a cache.
/// Throws what Backend::read_blob_chunks throws, Unavailable when the file cannot be written.
CachedBlob fetch_blob_to_temp_file(Hub& hub, const std::string& sha256,
                                   const std::filesystem::path& directory = {});

class BlobCache {
 public:
  /// Creates options.directory (mode 0755) when missing. Throws FailedPrecondition when no
  /// directory is given and none can be derived, Unavailable when it cannot be created.
  explicit BlobCache(BlobCacheOptions options = {});
  ~BlobCache();
  BlobCache(const BlobCache&) = delete;
  BlobCache& operator=(const BlobCache&) = delete;

  /// Blob `sha256`, from the cache when it holds a verified copy, else fetched from `hub`
  /// (one chunk in memory at a time) into the cache; then evicts down to max_bytes.
  /// Throws InvalidArgument when `sha256` is not 64 lower-case hex digits, what
  /// Backend::read_blob_chunks throws (NotFound, DataLoss naming the blob; nothing is cached
  /// then), Unavailable when the cache directory cannot be written (e.g. disk full).
  CachedBlob open(Hub& hub, const std::string& sha256);

  /// Whether a file for `sha256` is in the cache now (not verified).
  bool contains(const std::string& sha256) const;
  /// Bytes of the cached files together, now.
  std::uint64_t size_bytes() const;
  /// Removes least recently used files until at most `max_bytes` remain (the limit when
  /// called without argument); returns how many files went. Throws Unavailable when the lock
  /// file cannot be opened.
  std::int64_t evict(std::uint64_t max_bytes);
  std::int64_t evict() { return evict(options_.max_bytes); }

  /// The options this cache was opened with (directory, size limit, verification).
  const BlobCacheOptions& options() const noexcept { return options_; }
  /// Hits, fetches, corrupt files and evictions this process counted (not across processes).
  BlobCacheStats stats() const;

 private:
  struct State;
  std::optional<CachedBlob> open_cached(const std::string& sha256);
  CachedBlob fetch(Hub& hub, const std::string& sha256);

  BlobCacheOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace tensorhub
