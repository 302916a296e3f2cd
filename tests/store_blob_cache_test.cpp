// Streaming blob reads (Hub::read_blob_chunks) and the per-machine blob cache (BlobCache),
// on every backend: chunks as stored, verification before the last chunk leaves, a cache
// filled once and verified, a damaged cache file fetched again, least-recently-used eviction,
// and real processes filling one blob at the same time.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using testing::TempDir;

constexpr std::size_t kMiB = 1 << 20;

// Bytes that differ everywhere, so a misplaced chunk cannot go unnoticed.
std::vector<std::byte> noise(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n);
  for (auto& b : out) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::byte>(seed >> 56);
  }
  return out;
}

// Runs `sql` on the hub's database directly (to damage stored chunks as a disk would).
void exec_sql(const std::string& uri, const std::string& sqlite_sql, const std::string& postgres_sql) {
  if (uri.starts_with("sqlite://")) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(uri.substr(9).c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sqlite_sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    return;
  }
  PGconn* c = PQconnectdb(uri.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r = PQexec(c, postgres_sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

// Overwrites chunk `idx` of blob `sha` with zero bytes of the same length.
void zero_chunk(const std::string& uri, const std::string& sha, int idx) {
  const std::string where = " WHERE sha256 = '" + sha + "' AND idx = " + std::to_string(idx);
  exec_sql(uri, "UPDATE blob_chunks SET data = zeroblob(length(data))" + where,
           "UPDATE blob_chunks SET data = decode(repeat('00', length(data)), 'hex')" + where);
}

std::vector<std::byte> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  return {b, b + s.size()};
}

std::vector<std::string> temp_files(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with(".tmp-")) out.push_back(e.path().filename());
  return out;
}

class BlobCacheTest : public testing::BackendTest {
 protected:
  void set_up() override { hub_ = std::make_unique<Hub>(db_->uri(), "p"); }

  // Stores `bytes` as a one-part document; returns their SHA-256.
  std::string store(const std::vector<std::byte>& bytes, const std::string& name = "blob") {
    hub_->save_document(Collection::kDatasets, {{"dataset_name", name}}, Parts{{"data", bytes}});
    return sha256_hex(bytes);
  }

  BlobCache cache(std::uint64_t max_bytes = std::uint64_t{1} << 30) {
    return BlobCache(BlobCacheOptions{cache_dir_.path(), max_bytes, true});
  }

  TempDir cache_dir_;
  std::unique_ptr<Hub> hub_;
};

TEST_P(BlobCacheTest, ReadBlobChunksHandsOutTheStoredChunksInOrder) {
  const auto bytes = noise(2 * kMiB + kMiB / 2, 1);
  const std::string sha = store(bytes);
  std::vector<std::size_t> sizes;
  std::vector<std::byte> joined;
  const auto n = hub_->read_blob_chunks(sha, [&](std::span<const std::byte> chunk) {
    sizes.push_back(chunk.size());
    joined.insert(joined.end(), chunk.begin(), chunk.end());
  });
  EXPECT_EQ(n, bytes.size());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{kMiB, kMiB, kMiB / 2}));
  EXPECT_TRUE(joined == bytes);
  EXPECT_EQ(open_backend(db_->uri())->blob_size(sha), bytes.size());
  EXPECT_EQ(open_backend(db_->uri())->blob_size(std::string(64, 'a')), std::nullopt);
  testing::expect_error([&] { hub_->read_blob_chunks(std::string(64, 'a'), [](auto) {}); },
                        ErrorKind::kNotFound, {std::string(64, 'a')});
}

TEST_P(BlobCacheTest, ACorruptBlobFailsBeforeItsLastChunkLeaves) {
  const auto bytes = noise(2 * kMiB + 10, 2);
  const std::string sha = store(bytes);
  zero_chunk(db_->uri(), sha, 1);  // the middle chunk
  int chunks = 0;
  testing::expect_error(
      [&] { hub_->read_blob_chunks(sha, [&](std::span<const std::byte>) { ++chunks; }); },
      ErrorKind::kDataLoss, {"blob " + sha, "is corrupt"});
  EXPECT_EQ(chunks, 2);  // chunks 0 and 1, never the last one: the sink never saw the whole blob
  testing::expect_error([&] { hub_->read_blob(sha); }, ErrorKind::kDataLoss, {sha});
}

TEST_P(BlobCacheTest, AMissingChunkIsDataLossNamingIt) {
  const auto bytes = noise(2 * kMiB, 3);
  const std::string sha = store(bytes);
  const std::string where = " WHERE sha256 = '" + sha + "' AND idx = 1";
  exec_sql(db_->uri(), "DELETE FROM blob_chunks" + where, "DELETE FROM blob_chunks" + where);
  testing::expect_error([&] { hub_->read_blob_chunks(sha, [](auto) {}); }, ErrorKind::kDataLoss,
                        {"blob " + sha, "chunk 1", "truncated"});
}

TEST_P(BlobCacheTest, FillsOnceThenServesVerifiedHits) {
  const auto bytes = noise(kMiB + 7, 4);
  const std::string sha = store(bytes);
  BlobCache c = cache();
  EXPECT_FALSE(c.contains(sha));
  {
    const CachedBlob blob = c.open(*hub_, sha);
    EXPECT_EQ(blob.size(), bytes.size());
    EXPECT_TRUE(blob.read_all() == bytes);
    EXPECT_TRUE(file_bytes(blob.path()) == bytes);  // /proc/self/fd/N opens the same file
  }
  EXPECT_TRUE(c.contains(sha));
  EXPECT_TRUE(file_bytes(cache_dir_.path() / sha) == bytes);
  EXPECT_TRUE(c.open(*hub_, sha).read_all() == bytes);
  const auto s = c.stats();
  EXPECT_EQ(s.fetches, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_TRUE(temp_files(cache_dir_.path()).empty());
  testing::expect_error([&] { c.open(*hub_, "../../etc/passwd"); }, ErrorKind::kInvalidArgument,
                        {"not a SHA-256"});
}

TEST_P(BlobCacheTest, ADamagedCacheFileIsDetectedAndFetchedAgain) {
  const auto bytes = noise(3000, 5);
  const std::string sha = store(bytes);
  BlobCache c = cache();
  c.open(*hub_, sha);
  const auto path = cache_dir_.path() / sha;
  std::filesystem::permissions(path, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1234);
    f.put('\x5a' ^ static_cast<char>(bytes[1234]));  // same size, one byte differs
  }
  ASSERT_FALSE(file_bytes(path) == bytes);
  EXPECT_TRUE(c.open(*hub_, sha).read_all() == bytes);
  EXPECT_TRUE(file_bytes(path) == bytes);  // replaced by a verified copy
  const auto s = c.stats();
  EXPECT_EQ(s.corrupt, 1);
  EXPECT_EQ(s.fetches, 2);
  EXPECT_EQ(s.hits, 0);
}

TEST_P(BlobCacheTest, ACorruptBlobInTheHubLeavesNothingInTheCache) {
  const auto bytes = noise(2 * kMiB + 1, 6);
  const std::string sha = store(bytes);
  zero_chunk(db_->uri(), sha, 0);
  BlobCache c = cache();
  testing::expect_error([&] { c.open(*hub_, sha); }, ErrorKind::kDataLoss, {"blob " + sha});
  EXPECT_FALSE(c.contains(sha));
  EXPECT_TRUE(temp_files(cache_dir_.path()).empty());
  EXPECT_EQ(c.size_bytes(), 0u);
}

TEST_P(BlobCacheTest, EvictsTheLeastRecentlyUsedFirst) {
  const std::string a = store(noise(1000, 7), "a"), b = store(noise(1000, 8), "b"), c3 = store(noise(1000, 9), "c");
  BlobCache c = cache(2500);  // room for two
  c.open(*hub_, a);
  c.open(*hub_, b);
  c.open(*hub_, a);  // a is now more recently used than b
  EXPECT_EQ(c.stats().evicted, 0);
  c.open(*hub_, c3);  // three do not fit: b goes
  EXPECT_TRUE(c.contains(a));
  EXPECT_FALSE(c.contains(b));
  EXPECT_TRUE(c.contains(c3));
  EXPECT_EQ(c.size_bytes(), 2000u);
  EXPECT_EQ(c.stats().evicted, 1);
  c.open(*hub_, b);  // fetched again; now a is the oldest
  EXPECT_FALSE(c.contains(a));
  EXPECT_EQ(c.stats().fetches, 4);
  EXPECT_EQ(c.evict(1000), 1);  // explicit: down to one file, the newest (b)
  EXPECT_TRUE(c.contains(b));
}

TEST_P(BlobCacheTest, AReaderKeepsItsFileWhenEvictionRemovesIt) {
  const auto bytes = noise(5000, 10);
  const std::string sha = store(bytes);
  BlobCache c = cache();
  const CachedBlob blob = c.open(*hub_, sha);
  EXPECT_EQ(c.evict(0), 1);
  EXPECT_FALSE(c.contains(sha));
  EXPECT_TRUE(blob.read_all() == bytes);
  EXPECT_TRUE(file_bytes(blob.path()) == bytes);
}

// Six processes open the same blob at once, each with its own connection and BlobCache object
// on one directory: each gets the exact bytes, and the directory ends with one complete file.
TEST_P(BlobCacheTest, ConcurrentProcessesFillingOneBlobEachGetItWhole) {
  const auto bytes = noise(3 * kMiB + 123, 11);
  const std::string sha = store(bytes);
  hub_.reset();  // no connection crosses the fork
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 6; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      char x;
      (void)::read(go[0], &x, 1);  // all start together when the parent closes the pipe
      int code = 1;
      try {
        Hub hub(db_->uri(), "p", OpenMode::kExisting);
        BlobCache c(BlobCacheOptions{cache_dir_.path(), std::uint64_t{1} << 30, true});
        code = c.open(hub, sha).read_all() == bytes ? 0 : 2;
      } catch (...) {
        code = 3;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(cache_dir_.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".lock", sha}));
  EXPECT_TRUE(file_bytes(cache_dir_.path() / sha) == bytes);
}

TEST_P(BlobCacheTest, AHubReadsDatasetsThroughItsCache) {
  NamedTensors t;
  t["x"] = Tensor::from<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  hub_->save_dataset(t, "d");
  auto shared = std::make_shared<BlobCache>(BlobCacheOptions{cache_dir_.path(), std::uint64_t{1} << 30, true});
  hub_->set_blob_cache(shared);
  ASSERT_TRUE(hub_->find_top_dataset("d"));
  const auto rec = hub_->find_top_dataset("d");
  EXPECT_EQ(rec->tensors.at("x").as<float>()[3], 4.0f);
  EXPECT_EQ(shared->stats().fetches, 1);
  EXPECT_EQ(shared->stats().hits, 1);
  EXPECT_TRUE(shared->contains(rec->document.parts.at("tensors.safetensors")));

  // The same cache given when the hub is opened (HubOptions::blob_cache): a hit.
  Hub opened(HubOptions{.uri = db_->uri(), .project_name = "p", .mode = OpenMode::kExisting, .blob_cache = shared});
  EXPECT_EQ(opened.blob_cache(), shared.get());
  EXPECT_EQ(opened.find_top_dataset("d")->tensors.at("x").as<float>()[0], 1.0f);
  EXPECT_EQ(shared->stats().fetches, 1);
  EXPECT_EQ(shared->stats().hits, 2);
}

TEST_P(BlobCacheTest, FetchToATemporaryFileVerifiesToo) {
  const auto bytes = noise(kMiB + 1, 12);
  const std::string sha = store(bytes);
  EXPECT_TRUE(fetch_blob_to_temp_file(*hub_, sha, cache_dir_.path()).read_all() == bytes);
  EXPECT_TRUE(std::filesystem::is_empty(cache_dir_.path()));  // unnamed: nothing left behind
  zero_chunk(db_->uri(), sha, 1);
  testing::expect_error([&] { fetch_blob_to_temp_file(*hub_, sha, cache_dir_.path()); },
                        ErrorKind::kDataLoss, {"blob " + sha});
}

// Yields other bytes of the same size on each call, as a file rewritten while it is stored.
class ChangingSource final : public BlobSource {
 public:
  std::uint64_t size() const override { return 3 * kMiB; }
  void write(const std::function<void(std::span<const std::byte>)>& sink) const override {
    sink(noise(3 * kMiB, ++calls_));
  }

 private:
  mutable std::uint64_t calls_ = 0;
};

TEST_P(BlobCacheTest, ASourceThatChangesWhileStoredStoresNothing) {
  const ChangingSource source;
  testing::expect_error(
      [&] { hub_->save_document(Collection::kDatasets, {{"dataset_name", "x"}}, {{"data", &source}}); },
      ErrorKind::kDataLoss, {"part \"data\" changed while being stored", "nothing was saved"});
  EXPECT_TRUE(hub_->find_datasets().empty());
  EXPECT_EQ(hub_->count_blobs(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, BlobCacheTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

TEST(BlobCacheDir, FollowsTheEnvironment) {
  const char* saved[] = {std::getenv("TENSORHUB_BLOB_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")};
  const std::string keep[] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  ::unsetenv("TENSORHUB_BLOB_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(default_blob_cache_dir(), std::filesystem::path("/x/cache/tensorhub/blobs"));
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_blob_cache_dir(), std::filesystem::path("/home/u/.cache/tensorhub/blobs"));
  ::setenv("TENSORHUB_BLOB_CACHE_DIR", "/y", 1);
  EXPECT_EQ(default_blob_cache_dir(), std::filesystem::path("/y"));
  const char* names[] = {"TENSORHUB_BLOB_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (saved[i]) ::setenv(names[i], keep[i].c_str(), 1);
    else ::unsetenv(names[i]);
  }
}

TEST(MachineBlobCache, IsConfiguredByTheEnvironment) {
  TempDir dir;
  testing::EnvVars env;
  env.set("TENSORHUB_BLOB_CACHE_DIR", (dir / "c").c_str());
  env.set("TENSORHUB_BLOB_CACHE", nullptr);
  env.set("TENSORHUB_BLOB_CACHE_MAX_MB", "64");
  const auto cache = machine_blob_cache();
  ASSERT_TRUE(cache);
  EXPECT_EQ(cache->options().directory, dir / "c");
  EXPECT_EQ(cache->options().max_bytes, std::uint64_t{64} << 20);
  EXPECT_TRUE(std::filesystem::is_directory(dir / "c"));
  env.set("TENSORHUB_BLOB_CACHE_MAX_MB", "lots");
  testing::expect_error([] { machine_blob_cache(); }, ErrorKind::kInvalidArgument, {"TENSORHUB_BLOB_CACHE_MAX_MB=lots"});
  env.set("TENSORHUB_BLOB_CACHE", "off");
  EXPECT_EQ(machine_blob_cache(), nullptr);
}

}  // namespace
}  // namespace tensorhub
