// Opening a hub: OpenMode::kExisting never creates one, URIs are percent-decoded, passwords
// never show; and the space of deleted blobs goes back to the file system. Run on every
// backend (SQLite files, PostgreSQL databases), plus SQLite-only checks on real files.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::SqliteTestDatabase;
using testing::TempDir;
using testing::TestDatabase;

// `mb` MiB of pseudo-random bytes (one blob of 2^20 * mb bytes plus the safetensors header).
NamedTensors random_tensors(int mb, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(mb) << 20);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(gen());
  NamedTensors t;
  t["x"] = Tensor::from<std::uint8_t>(DType::kU8, {static_cast<std::int64_t>(bytes.size())}, bytes);
  return t;
}

std::int64_t bytes_on_disk(const std::filesystem::path& p) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

class OpenModeTest : public testing::BackendTest {};

TEST_P(OpenModeTest, ExistingOnlyOpensNoHubWhereThereIsNoneAndCreatesNothing) {
  // The test database is empty: a SQLite path with no file, a PostgreSQL database with no tables.
  for (int i = 0; i < 2; ++i) {  // the second time proves the first created nothing
    const std::string msg = testing::error_message_of(
        ErrorKind::kNotFound, [&] { Hub(db_->uri(), "p", OpenMode::kExisting); }, "no hub yet");
    EXPECT_NE(msg.find("no hub at "), std::string::npos) << msg;
    EXPECT_NE(msg.find("check the hub URI"), std::string::npos) << msg;
  }
  if (auto* sqlite = dynamic_cast<SqliteTestDatabase*>(db_.get())) {
    EXPECT_FALSE(std::filesystem::exists(sqlite->path()));
  }

  // Created by a writer, the same hub then opens for readers and shows what was saved.
  Hub(db_->uri(), "p").save_training_log({{"epoch", 1}});
  Hub reader(db_->uri(), "p", OpenMode::kExisting);
  ASSERT_EQ(reader.find_training_logs().size(), 1u);
  EXPECT_EQ(reader.find_training_logs()[0].tags["epoch"], 1);
}

TEST_P(OpenModeTest, DeletingALargeDatasetGivesItsSpaceBack) {
  Hub hub(db_->uri(), "p");
  hub.save_dataset(random_tensors(1, 1), "small");
  const std::int64_t with_small = hub.storage_bytes();
  hub.save_dataset(random_tensors(24, 2), "large");
  const std::int64_t with_large = hub.storage_bytes();
  ASSERT_GT(with_large, with_small + (24 << 20)) << "24 MiB of random bytes take at least that much";

  EXPECT_EQ(hub.delete_datasets({{"dataset_name", "large"}}), 1);
  // SQLite shrinks the file on delete; PostgreSQL leaves the space to autovacuum, and
  // compact() (VACUUM FULL) returns it.
  if (!hub.uri().starts_with("sqlite://")) hub.compact();
  const std::int64_t after = hub.storage_bytes();
  EXPECT_LT(after, with_small + (4 << 20)) << "before: " << with_large << " bytes";
  ASSERT_TRUE(hub.find_top_dataset("small"));  // the rest is intact
  EXPECT_EQ(hub.find_top_dataset("small")->tensors.at("x").data.size(), 1u << 20);
}

INSTANTIATE_TEST_SUITE_P(Backends, OpenModeTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

// ---- SQLite files ----------------------------------------------------------------------------

TEST(SqliteOpenMode, AFileThatIsNoHubIsLeftAsItWas) {
  TempDir dir;
  const auto empty = dir / "empty.db";
  std::ofstream(empty).close();
  const std::string msg = testing::error_message_of(
      ErrorKind::kNotFound, [&] { Hub("sqlite://" + empty.string(), "p", OpenMode::kExisting); }, "empty file");
  EXPECT_NE(msg.find("holds no tensorhub hub"), std::string::npos) << msg;
  EXPECT_EQ(bytes_on_disk(empty), 0);  // not switched to WAL, no tables
  EXPECT_FALSE(std::filesystem::exists(dir / "empty.db-wal"));
}

TEST(SqliteOpenMode, PercentEscapesInThePathAreDecodedAndTheUriRoundTrips) {
  TempDir dir;
  Hub hub("sqlite://" + (dir / "my%20hub%2525.db").string(), "p");
  hub.save_training_log({{"step", 3}});
  EXPECT_TRUE(std::filesystem::exists(dir / "my hub%25.db"));
  EXPECT_EQ(hub.uri(), "sqlite://" + (dir / "my%20hub%2525.db").string());
  // What a runner hands its tasks opens the same file.
  Hub again(hub.uri(), "p", OpenMode::kExisting);
  EXPECT_EQ(again.find_training_logs().size(), 1u);
  const std::string msg = testing::error_message_of(
      ErrorKind::kInvalidArgument, [&] { Hub("sqlite://" + (dir / "bad%zz.db").string(), "p"); }, "bad escape");
  EXPECT_NE(msg.find("not followed by two hex digits"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad%zz.db"));
}

TEST(SqliteOpenMode, AHubMadeWithoutIncrementalVacuumShrinksOnCompact) {
  SqliteTestDatabase db;
  {
    Hub hub(db.uri(), "p");
    hub.save_training_log({{"step", 1}});
  }
  {  // as hubs made before tensorhub set auto_vacuum: none
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA auto_vacuum=NONE; VACUUM;", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  Hub hub(db.uri(), "p");
  hub.save_dataset(random_tensors(16, 3), "large");
  hub.delete_datasets({{"dataset_name", "large"}});
  const std::int64_t kept = bytes_on_disk(db.path());
  EXPECT_GT(kept, 16 << 20) << "without auto_vacuum the freed pages stay in the file";
  hub.compact();
  EXPECT_LT(bytes_on_disk(db.path()), 1 << 20);
  EXPECT_EQ(hub.find_training_logs().size(), 1u);
  // From now on a delete shrinks the file by itself.
  hub.save_dataset(random_tensors(16, 4), "large");
  EXPECT_GT(bytes_on_disk(db.path()), 16 << 20);
  hub.delete_datasets({{"dataset_name", "large"}});
  EXPECT_LT(bytes_on_disk(db.path()), 1 << 20);
}

// ---- URIs ------------------------------------------------------------------------------------

TEST(HubUri, MaskPasswordsHidesEveryPasswordAndNothingElse) {
  EXPECT_EQ(mask_passwords("postgresql://user:secret@host:5432/db"), "postgresql://user:***@host:5432/db");
  EXPECT_EQ(mask_passwords("postgres://u:p%40ss@h/db?sslmode=require"), "postgres://u:***@h/db?sslmode=require");
  // An unescaped '@' in the password: the last '@' before the host ends it.
  EXPECT_EQ(mask_passwords("postgresql://u:a@b@host/db"), "postgresql://u:***@host/db");
  EXPECT_EQ(mask_passwords("postgresql://host/db?user=u&password=secret&sslmode=disable"),
            "postgresql://host/db?user=u&password=***&sslmode=disable");
  EXPECT_EQ(mask_passwords("host=h password=secret dbname=d"), "host=h password=*** dbname=d");
  EXPECT_EQ(mask_passwords("password='a b' user=u"), "password='***' user=u");
  // In a message, every URI is masked; text around it is kept.
  EXPECT_EQ(mask_passwords("cannot connect to \"postgresql://a:x@h/d\" or postgresql://b:y@h/d: refused"),
            "cannot connect to \"postgresql://a:***@h/d\" or postgresql://b:***@h/d: refused");
  // Nothing to mask.
  for (const char* plain : {"postgresql://user@host/db", "postgresql://host:5432/db", "sqlite:///tmp/a:b@c.db",
                            "sqlite:///tmp/hub.db", "no uri here", "", "postgresql://u:@h/d"}) {
    EXPECT_EQ(mask_passwords(plain), plain);
  }
}

TEST(HubUri, PercentDecoding) {
  EXPECT_EQ(percent_decode("/tmp/a%20b%2Fc%2fd", "x"), "/tmp/a b/c/d");
  EXPECT_EQ(percent_decode("a+b", "x"), "a+b");
  for (const char* bad : {"%", "%2", "%zz", "a%g0"})
    testing::error_message_of(ErrorKind::kInvalidArgument, [&] { percent_decode(bad, "x"); }, bad);
  EXPECT_EQ(percent_encode_path("/a b/%/?#/c"), "/a%20b/%25/%3F%23/c");
  EXPECT_EQ(sqlite_path_of_uri("sqlite:///a%20b/c.db?mode=x"), "/a b/c.db");
  EXPECT_EQ(sqlite_path_of_uri("sqlite://rel.db"), (std::filesystem::current_path() / "rel.db").string());
}

TEST(HubUri, MaskUriPasswordMasksAPasswordWithSpacesAndQuotesWhole) {
  // A message's mask stops at a space or a quote; a URI alone is masked up to its last '@'.
  EXPECT_EQ(mask_uri_password("postgresql://u:pa ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(mask_uri_password("postgresql://u:it's@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(mask_uri_password("postgresql://u:a@b@h/db?password=x"), "postgresql://u:***@h/db?password=***");
  EXPECT_EQ(mask_uri_password("postgresql://u@h/db"), "postgresql://u@h/db");  // no password
  EXPECT_EQ(mask_uri_password("sqlite:///tmp/a@b/hub.db"), "sqlite:///tmp/a@b/hub.db");
  EXPECT_EQ(mask_uri_password("postgresql://h/db"), "postgresql://h/db");
}

TEST(HubUri, AnUnknownSchemeIsRefusedWithThePasswordMasked) {
  const std::string msg = testing::error_message_of(
      ErrorKind::kInvalidArgument, [] { Hub("postgresq://user:secret@host/db", "p"); }, "typo in scheme");
  EXPECT_NE(msg.find("postgresq://user:***@host/db"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("secret"), std::string::npos) << msg;
}

TEST(HubUri, AnUnreachableServerIsReportedWithThePasswordMasked) {
  // Port 1 on the loopback: nothing listens there, the connection is refused at once.
  const std::string msg = testing::error_message_of(
      ErrorKind::kUnavailable, [] { Hub("postgresql://user:secret@127.0.0.1:1/db?connect_timeout=5", "p"); },
      "unreachable");
  EXPECT_NE(msg.find("user:***@127.0.0.1:1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("secret"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tensorhub
