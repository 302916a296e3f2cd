#include "tensorhub/store/blob_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <utility>

#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kReadBytes = 1 << 20;  // pieces in which cached files are hashed and read

[[noreturn]] void fail_io(const std::string& what, const fs::path& path, int err) {
  throw Unavailable("blob cache: cannot " + what + " " + path.string() + ": " + std::strerror(err));
}

bool is_sha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Now, in nanoseconds of the real-time clock, strictly increasing within this process: the
// "last used" stamps order files even when two opens fall in one clock tick.
timespec next_stamp() {
  static std::atomic<std::int64_t> last{0};
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::int64_t ns = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  std::int64_t prev = last.load();
  do {
    if (ns <= prev) ns = prev + 1;
  } while (!last.compare_exchange_weak(prev, ns));
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// Stamps the file as used now (its mtime; atime left alone). Best effort: a file another
// user owns keeps its stamp.
void touch(int fd) {
  const timespec times[2] = {{0, UTIME_OMIT}, next_stamp()};
  (void)::futimens(fd, times);
}

// Calls `piece` with the file's bytes in order, from offset 0, kReadBytes at a time.
void read_pieces(int fd, const fs::path& path, const std::function<void(std::span<const std::byte>)>& piece) {
  std::vector<std::byte> buffer(kReadBytes);
  for (off_t offset = 0;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("read", path, errno);
    if (n == 0) return;
    piece(std::span(buffer).first(static_cast<std::size_t>(n)));
    offset += n;
  }
}

std::string sha256_of_file(int fd, const fs::path& path) {
  Sha256 hash;
  read_pieces(fd, path, [&](std::span<const std::byte> bytes) { hash.update(bytes); });
  return hash.hex_digest();
}

void write_all(int fd, std::span<const std::byte> bytes, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("write", path, errno);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// A file of the cache as eviction sees it.
struct Entry {
  fs::path path;
  std::uint64_t size;
  std::int64_t used_ns;  // mtime
};

std::vector<Entry> list_entries(const fs::path& dir) {
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!is_sha256(e.path().filename().string())) continue;
    struct stat st{};
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // evicted meanwhile
    out.push_back({e.path(), static_cast<std::uint64_t>(st.st_size),
                   std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  return out;
}

// Temporary files older than this were left by a process that died while fetching.
constexpr std::int64_t kStaleTempNs = std::int64_t{3600} * 1'000'000'000;

void remove_stale_temps(const fs::path& dir) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const std::int64_t now_ns = std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.path().filename().string().starts_with(".tmp-")) continue;
    struct stat st{};
    if (::stat(e.path().c_str(), &st) != 0) continue;
    if (now_ns - (std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec) > kStaleTempNs)
      ::unlink(e.path().c_str());
  }
}

// Closes its descriptor unless released.
struct UniqueFd {
  int fd;
  ~UniqueFd() {
    if (fd >= 0) ::close(fd);
  }
  int release() noexcept { return std::exchange(fd, -1); }
};

// Holds an exclusive flock on `path` (created if missing) while it lives.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fail_io("open the lock file", path, errno);
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) fail_io("lock", path, errno);
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

fs::path default_blob_cache_dir() {
  if (const char* dir = std::getenv("TENSORHUB_BLOB_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "tensorhub" / "blobs";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "tensorhub" / "blobs";
  throw FailedPrecondition(
      "no blob cache directory: set TENSORHUB_BLOB_CACHE_DIR, XDG_CACHE_HOME or HOME, or pass BlobCacheOptions::directory");
}

std::shared_ptr<BlobCache> machine_blob_cache() {
  if (const char* mode = std::getenv("TENSORHUB_BLOB_CACHE"); mode && std::string(mode) == "off") return nullptr;
  BlobCacheOptions options;
  if (const char* mb = std::getenv("TENSORHUB_BLOB_CACHE_MAX_MB"); mb && *mb) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(mb, &end, 10);
    if (*end != '\0' || v == 0 || mb[0] == '-')
      throw InvalidArgument(std::string("TENSORHUB_BLOB_CACHE_MAX_MB=") + mb + " is not a positive number of MiB");
    options.max_bytes = static_cast<std::uint64_t>(v) << 20;
  }
  try {
    return std::make_shared<BlobCache>(std::move(options));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInvalidArgument) throw;
    return nullptr;  // no usable directory: read straight from the hub
  }
}

// ---- CachedBlob ------------------------------------------------------------------------------

CachedBlob::CachedBlob(int fd, std::string sha256, std::uint64_t size) noexcept
    : fd_(fd), sha256_(std::move(sha256)), size_(size) {}

CachedBlob::~CachedBlob() {
  if (fd_ >= 0) ::close(fd_);
}

CachedBlob::CachedBlob(CachedBlob&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), sha256_(std::move(other.sha256_)), size_(other.size_) {}

CachedBlob& CachedBlob::operator=(CachedBlob&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    sha256_ = std::move(other.sha256_);
    size_ = other.size_;
  }
  return *this;
}

fs::path CachedBlob::path() const { return "/proc/self/fd/" + std::to_string(fd_); }

std::vector<std::byte> CachedBlob::read_all() const {
  std::vector<std::byte> out;
  out.reserve(size_);
  read_pieces(fd_, path(), [&](std::span<const std::byte> b) { out.insert(out.end(), b.begin(), b.end()); });
  if (out.size() != size_)
    throw Unavailable("blob cache: file of blob " + sha256_ + " holds " + std::to_string(out.size()) +
                      " bytes, expected " + std::to_string(size_));
  return out;
}

CachedBlob fetch_blob_to_temp_file(Hub& hub, const std::string& sha256, const fs::path& directory) {
  const fs::path dir = directory.empty() ? fs::temp_directory_path() : directory;
  UniqueFd file{::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)};
  if (file.fd < 0) fail_io("create a temporary file in", dir, errno);
  const std::uint64_t size = hub.read_blob_chunks(
      sha256, [&](std::span<const std::byte> chunk) { write_all(file.fd, chunk, dir / ("blob " + sha256)); });
  return CachedBlob(file.release(), sha256, size);
}

// ---- BlobCache -------------------------------------------------------------------------------

struct BlobCache::State {
  mutable Mutex mutex;
  BlobCacheStats stats TENSORHUB_GUARDED_BY(mutex);
  std::mt19937_64 random TENSORHUB_GUARDED_BY(mutex){std::random_device{}()};
};

BlobCache::BlobCache(BlobCacheOptions options) : options_(std::move(options)), state_(std::make_unique<State>()) {
  if (options_.directory.empty()) options_.directory = default_blob_cache_dir();
  std::error_code ec;
  fs::create_directories(options_.directory, ec);
  if (ec || !fs::is_directory(options_.directory))
    throw Unavailable("blob cache: cannot create the directory " + options_.directory.string() + ": " +
                      (ec ? ec.message() : "not a directory"));
}

BlobCache::~BlobCache() = default;

CachedBlob BlobCache::open(Hub& hub, const std::string& sha256) {
  if (!is_sha256(sha256))
    throw InvalidArgument("blob cache: \"" + sha256 + "\" is not a SHA-256 (64 lower-case hex digits)");
  if (auto cached = open_cached(sha256)) return std::move(*cached);
  CachedBlob blob = fetch(hub, sha256);
  evict();
  return blob;
}

// The cached file, verified and stamped as used; nothing when absent. A file that fails
// verification is removed (if still the same file) and counted.
std::optional<CachedBlob> BlobCache::open_cached(const std::string& sha256) {
  const fs::path path = options_.directory / sha256;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail_io("open", path, errno);
  }
  UniqueFd file{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) fail_io("stat", path, errno);
  if (!options_.verify_hits || sha256_of_file(fd, path) == sha256) {
    touch(fd);
    MutexLock lock(state_->mutex);
    ++state_->stats.hits;
    return CachedBlob(file.release(), sha256, static_cast<std::uint64_t>(st.st_size));
  }
  // Damaged on disk. Remove it unless another process replaced it with a fresh copy already.
  struct stat now{};
  if (::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) ::unlink(path.c_str());
  MutexLock lock(state_->mutex);
  ++state_->stats.corrupt;
  return std::nullopt;
}

// Streams the blob into a temporary file of the cache directory and renames it to its name
// once read_blob_chunks has verified it. The returned file is the renamed one.
CachedBlob BlobCache::fetch(Hub& hub, const std::string& sha256) {
  std::uint64_t nonce;
  {
    MutexLock lock(state_->mutex);
    nonce = state_->random();
  }
  const fs::path tmp = options_.directory / (".tmp-" + sha256 + "-" + std::to_string(::getpid()) + "-" +
                                             std::to_string(nonce));
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) fail_io("create", tmp, errno);
  UniqueFd file{fd};
  std::uint64_t size = 0;
  try {
    size = hub.read_blob_chunks(sha256, [&](std::span<const std::byte> chunk) { write_all(fd, chunk, tmp); });
    touch(fd);
    if (::rename(tmp.c_str(), (options_.directory / sha256).c_str()) != 0) fail_io("rename", tmp, errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  MutexLock lock(state_->mutex);
  ++state_->stats.fetches;
  return CachedBlob(file.release(), sha256, size);
}

bool BlobCache::contains(const std::string& sha256) const {
  std::error_code ec;
  return is_sha256(sha256) && fs::is_regular_file(options_.directory / sha256, ec);
}

std::uint64_t BlobCache::size_bytes() const {
  std::uint64_t total = 0;
  for (const auto& e : list_entries(options_.directory)) total += e.size;
  return total;
}

std::int64_t BlobCache::evict(std::uint64_t max_bytes) {
  FileLock lock(options_.directory / ".lock");
  remove_stale_temps(options_.directory);
  auto entries = list_entries(options_.directory);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.size;
  if (total <= max_bytes) return 0;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.path < b.path;
  });
  std::int64_t removed = 0;
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    if (::unlink(e.path.c_str()) == 0) ++removed;
    total -= e.size;  // gone either way (another process may have removed it)
  }
  MutexLock guard(state_->mutex);
  state_->stats.evicted += removed;
  return removed;
}

BlobCacheStats BlobCache::stats() const {
  MutexLock lock(state_->mutex);
  return state_->stats;
}

}  // namespace tensorhub
