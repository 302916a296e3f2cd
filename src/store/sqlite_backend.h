// The embedded SQLite backend (one database file, WAL mode, many processes).
#pragma once

#include <memory>
#include <string>

#include "tensorhub/store/backend.h"

namespace tensorhub {

/// Opens (creating if needed) the SQLite hub at `path` and migrates its schema.
std::unique_ptr<Backend> open_sqlite_backend(const std::string& path);

}  // namespace tensorhub
