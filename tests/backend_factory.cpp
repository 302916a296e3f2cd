#include "backend_factory.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace tensorhub::testing {
namespace {

void admin_exec(const std::string& admin_uri, const std::string& sql) {
  PGconn* c = PQconnectdb(admin_uri.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    const std::string why = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("cannot connect to the test PostgreSQL server: " + why);
  }
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string why = PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error(sql + ": " + why);
}

// The admin URI with its database path replaced by `db`.
std::string with_database(const std::string& uri, const std::string& db) {
  const auto scheme = uri.find("://");
  const auto slash = uri.find('/', scheme + 3);
  const auto query = uri.find('?', scheme + 3);
  const std::string base = uri.substr(0, slash == std::string::npos ? query : slash);
  const std::string params = query == std::string::npos ? "" : uri.substr(query);
  return base + "/" + db + params;
}

}  // namespace

std::unique_ptr<TestDatabase> PostgresTestDatabase::create() {
  const char* admin = std::getenv("TENSORHUB_TEST_POSTGRES_URI");
  if (!admin || !*admin) return nullptr;
  static std::atomic<int> counter{0};
  const std::string name = "th_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  return std::unique_ptr<TestDatabase>(new PostgresTestDatabase(admin, name));
}

PostgresTestDatabase::PostgresTestDatabase(std::string admin_uri, std::string name)
    : admin_uri_(std::move(admin_uri)), name_(std::move(name)), uri_(with_database(admin_uri_, name_)) {
  admin_exec(admin_uri_, "CREATE DATABASE " + name_);
}

PostgresTestDatabase::~PostgresTestDatabase() {
  try {
    admin_exec(admin_uri_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
    // A leftover test database on a private server is harmless.
  }
}

}  // namespace tensorhub::testing
