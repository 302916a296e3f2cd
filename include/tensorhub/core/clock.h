// Time as tensorhub stores it: UTC microseconds since the Unix epoch.
#pragma once

#include <cstdint>
#include <string>

namespace tensorhub {

/// Wall-clock time now, UTC, in microseconds since 1970-01-01T00:00:00Z.
std::int64_t now_micros();

/// "2026-11-30T12:34:56.789012Z" (ISO 8601, UTC) for a time in microseconds.
std::string format_time(std::int64_t micros);

}  // namespace tensorhub
