// The task table's schema, kept by queue/ (the store only knows documents and blobs).
#pragma once

#include "tensorhub/store/sql.h"

namespace tensorhub::detail {

/// The "queue" module's tables (tasks and their indexes) for sql::Connection::ensure_schema;
/// TaskQueue ensures it before its first statement on a connection.
const sql::Schema& task_schema();

}  // namespace tensorhub::detail
