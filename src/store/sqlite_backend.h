// The embedded SQLite backend (one database file, WAL mode, many processes).
#pragma once

#include <memory>
#include <string>

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// Opens the SQLite hub at `path` and migrates its schema; OpenMode::kCreate creates the file
/// when missing, OpenMode::kExisting throws NotFound unless the file exists and holds
/// tensorhub's schema (and then changes nothing before that check); both throw
/// FailedPrecondition at once where this user may not write the hub. OpenMode::kReadOnly
/// opens an existing hub and never writes it (see OpenMode::kReadOnly for how it reads).
std::unique_ptr<Backend> open_sqlite_backend(const std::string& path, OpenMode mode = OpenMode::kCreate);

}  // namespace tensorhub
