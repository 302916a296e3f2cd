// The PostgreSQL backend: one server shared by dispatchers and runners on many machines.
#pragma once

#include <memory>
#include <string>

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// Connects to `uri` (libpq's "postgresql://user:password@host:port/db?sslmode=..." form;
/// a password may also come from PGPASSWORD or ~/.pgpass) and migrates the schema; with
/// OpenMode::kCreate it creates tensorhub's tables when missing, with OpenMode::kExisting it
/// throws NotFound instead; both need no right but SELECT where the schema is up to date, and
/// throw FailedPrecondition ("the hub ... is read-only (...)") at once for a role without
/// INSERT on documents. OpenMode::kReadOnly writes nothing: a role with SELECT only reads
/// everything. Throws Unavailable if the server cannot be reached, FailedPrecondition if the
/// database was written by a newer tensorhub (or, kReadOnly, an older one).
std::unique_ptr<Backend> open_postgres_backend(const std::string& uri, OpenMode mode = OpenMode::kCreate);

}  // namespace tensorhub
