// The backends the hub and queue suites run against. Each suite is a value-parameterised
// fixture over backend_params(); adding a backend (PostgreSQL) means adding one entry here:
// a TestDatabase that creates a fresh, empty database and drops it on destruction.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tensorhub::testing {

/// A fresh, empty hub database that lives as long as this object. Every Hub a test opens on
/// uri() sees the same database, so tests can open several connections (projects, threads).
class TestDatabase {
 public:
  virtual ~TestDatabase() = default;
  /// URI to pass to Hub / open_backend.
  virtual std::string uri() const = 0;
};

/// SQLite: a new file in a new temporary directory.
class SqliteTestDatabase final : public TestDatabase {
 public:
  std::string uri() const override { return "sqlite://" + path().string(); }
  std::filesystem::path path() const { return dir_ / "hub.db"; }

 private:
  TempDir dir_;
};

/// PostgreSQL: a new database on the server named by $TENSORHUB_TEST_POSTGRES_URI (an admin
/// connection URI; scripts/test starts a private cluster and sets it), dropped afterwards.
class PostgresTestDatabase final : public TestDatabase {
 public:
  /// nullptr when TENSORHUB_TEST_POSTGRES_URI is unset: the tests then skip, saying why.
  static std::unique_ptr<TestDatabase> create();
  ~PostgresTestDatabase() override;
  std::string uri() const override { return uri_; }

 private:
  PostgresTestDatabase(std::string admin_uri, std::string name);
  std::string admin_uri_, name_, uri_;
};

/// Why PostgreSQL tests are skipped, for GTEST_SKIP.
inline const char* kNoPostgres =
    "PostgreSQL tests need TENSORHUB_TEST_POSTGRES_URI (scripts/test starts a private server and sets it)";

struct BackendParam {
  std::string name;  ///< test-name suffix, e.g. "sqlite"
  std::function<std::unique_ptr<TestDatabase>()> make;
};

inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }

/// Every backend the suites run against in this build.
inline std::vector<BackendParam> backend_params() {
  return {
      {"sqlite", [] { return std::unique_ptr<TestDatabase>(std::make_unique<SqliteTestDatabase>()); }},
      {"postgresql", [] { return PostgresTestDatabase::create(); }},
  };
}

/// A suite run once per backend (instantiate it over backend_params()): SetUp makes db_, a
/// fresh, empty database, or skips the test saying why where the backend is not available,
/// then calls set_up(), the suite's own setup (not run for a skipped test).
class BackendTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    db_ = GetParam().make();
    if (!db_) GTEST_SKIP() << kNoPostgres;
    set_up();
  }
  virtual void set_up() {}
  std::unique_ptr<TestDatabase> db_;
};

inline std::string backend_param_name(const ::testing::TestParamInfo<BackendParam>& info) {
  return info.param.name;
}

}  // namespace tensorhub::testing
