// PostgreSQL's compression of blob chunks (schema version 4): lz4 where the server offers it,
// pglz (PostgreSQL's default) where it does not; new hubs and hubs migrated from version 3.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

// True when the server can compress with lz4 (PostgreSQL 14 or later, built with lz4): lz4 is
// then one of default_toast_compression's values.
bool server_has_lz4(Hub& hub) {
  return hub.sql()
             .execute("SELECT count(*) FROM pg_settings WHERE name = 'default_toast_compression' "
                      "AND 'lz4' = ANY (enumvals)")
             .int64(0, 0) == 1;
}

bool server_is_14_or_later(Hub& hub) {
  return hub.sql().execute("SELECT current_setting('server_version_num')::int").int64(0, 0) >= 140000;
}

// 1.2 MB of zeros (two chunks), which any compression shrinks.
NamedTensors zeros() {
  NamedTensors t;
  t["x"] = Tensor::from<float>(DType::kF32, {300000}, std::vector<float>(300000, 0.0f));
  return t;
}

// The compression method of blob_chunks.data: "l" lz4, "p" pglz, "" the server's default.
std::string column_compression(Hub& hub) {
  return hub.sql()
      .execute("SELECT attcompression::text FROM pg_attribute WHERE attrelid = 'blob_chunks'::regclass "
               "AND attname = 'data'")
      .text(0, 0);
}

TEST(PostgresBlobCompression, ChunksAreLz4WhereTheServerHasIt) {
  auto db = testing::PostgresTestDatabase::create();
  if (!db) GTEST_SKIP() << testing::kNoPostgres;
  Hub hub(db->uri(), "p");
  if (!server_is_14_or_later(hub)) GTEST_SKIP() << "column compression methods need PostgreSQL 14";
  const bool lz4 = server_has_lz4(hub);
  EXPECT_EQ(column_compression(hub), lz4 ? "l" : "");
  hub.save_dataset(zeros(), "zeros");
  const auto methods = hub.sql().execute("SELECT pg_column_compression(data) FROM blob_chunks ORDER BY idx");
  ASSERT_EQ(methods.size(), 2u);
  for (std::size_t i = 0; i < methods.size(); ++i) EXPECT_EQ(methods.text(i, 0), lz4 ? "lz4" : "pglz") << i;
  const auto back = hub.find_top_dataset("zeros");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tensors.at("x").data, zeros().at("x").data);
}

TEST(PostgresBlobCompression, AVersion3HubIsMigratedAndItsPglzChunksStillRead) {
  auto db = testing::PostgresTestDatabase::create();
  if (!db) GTEST_SKIP() << testing::kNoPostgres;
  {
    // A hub as version 3 left it: pglz chunks, no compression set on the column.
    Hub hub(db->uri(), "p");
    if (!server_is_14_or_later(hub)) GTEST_SKIP() << "column compression methods need PostgreSQL 14";
    hub.sql().execute("ALTER TABLE blob_chunks ALTER COLUMN data SET COMPRESSION default", {}, sql::Access::kWrite);
    hub.sql().execute("UPDATE tensorhub_schema SET version = 3", {}, sql::Access::kWrite);
    hub.save_dataset(zeros(), "old");
    EXPECT_EQ(hub.sql().execute("SELECT pg_column_compression(data) FROM blob_chunks LIMIT 1").text(0, 0), "pglz");
  }
  Hub hub(db->uri(), "p");  // migrates to version 4
  EXPECT_GE(hub.sql().execute("SELECT version FROM tensorhub_schema").int64(0, 0), 4);
  EXPECT_EQ(column_compression(hub), server_has_lz4(hub) ? "l" : "");
  const auto back = hub.find_top_dataset("old");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tensors.at("x").data, zeros().at("x").data);
}

}  // namespace
}  // namespace tensorhub
