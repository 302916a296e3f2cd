// The PostgreSQL backend: one server shared by dispatchers and runners on many machines.
#pragma once

#include <memory>
#include <string>

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// Connects to `uri` (libpq's "postgresql://user:password@host:port/db?sslmode=..." form;
/// a password may also come from PGPASSWORD or ~/.pgpass) and migrates the schema; with
/// OpenMode::kCreate it creates tensorhub's tables when missing, with OpenMode::kExisting it
/// throws NotFound instead. Throws Unavailable if the server cannot be reached,
/// FailedPrecondition if the database was written by a newer tensorhub.
std::unique_ptr<Backend> open_postgres_backend(const std::string& uri, OpenMode mode = OpenMode::kCreate);

}  // namespace tensorhub
