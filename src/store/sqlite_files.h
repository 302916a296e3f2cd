// What the SQLite backend asks the file system about a hub's files: whether this user may write
// them (and why not, in words), and a stamp that changes whenever a file is written, for reading
// a hub through SQLite's immutable mode safely (sqlite_backend.cpp).
#pragma once

#include <sys/types.h>

#include <ctime>
#include <string>

namespace tensorhub::detail {

/// Why this process may not write the SQLite hub at `path` (the file, its directory, its
/// -wal and -shm files, the mount), in words for an error message ("its directory /d is not
/// writable by user nobody"), or "" when nothing stops it. A missing file is judged by its
/// directory (SQLite creates it there). Uses the effective user and the kernel's own check
/// (faccessat with AT_EACCESS: modes, ACLs, read-only mounts).
std::string why_not_writable(const std::string& path);

/// A file's identity and last change as stat(2) gives them; `exists` false for a missing file.
/// Two stamps differ when the file was written, truncated, replaced or removed in between
/// (nanosecond times, as the file system keeps them).
struct FileStamp {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{};
  timespec changed{};

  /// The stamp of `path` now.
  static FileStamp of(const std::string& path);
  friend bool operator==(const FileStamp& a, const FileStamp& b) noexcept;
};

/// The stamps of a SQLite hub's file and of its -wal file.
struct HubStamp {
  FileStamp database, wal;

  static HubStamp of(const std::string& path) { return {FileStamp::of(path), FileStamp::of(path + "-wal")}; }
  friend bool operator==(const HubStamp& a, const HubStamp& b) noexcept = default;
};

/// "file:<path>?immutable=1": SQLite's URI that reads `path` as a file nothing changes
/// (no locks, no -wal or -shm files), for sqlite3_open_v2 with SQLITE_OPEN_URI. The path's
/// '%', '?' and '#' are escaped as the URI filename rules ask (sqlite.org/uri.html).
std::string immutable_uri(const std::string& path);

}  // namespace tensorhub::detail
