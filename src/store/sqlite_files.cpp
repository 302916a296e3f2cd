#include "sqlite_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace tensorhub::detail {
namespace {

// False only when the kernel refuses this user write access (a missing path is no refusal:
// SQLite's own error then says what is missing).
bool may_write(const std::string& path) {
  if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0) return true;
  return errno != EACCES && errno != EPERM && errno != EROFS;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string user_name() {
  const uid_t uid = ::geteuid();
  if (const passwd* pw = ::getpwuid(uid)) return pw->pw_name;
  return "uid " + std::to_string(uid);
}

}  // namespace

std::string why_not_writable(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct statvfs fs {};
  if (::statvfs(exists(path) ? path.c_str() : dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY))
    return "its file system is mounted read-only";
  if (exists(path) && !may_write(path)) return "the file " + path + " is not writable by user " + user_name();
  if (!may_write(dir))
    return "its directory " + dir + " is not writable by user " + user_name() +
           ", and SQLite makes the hub's -wal and -shm files there";
  // Left behind by another user's reader in a directory both may write: SQLite opens them
  // read-only then, and every write fails.
  for (const char* suffix : {"-wal", "-shm"})
    if (exists(path + suffix) && !may_write(path + suffix))
      return "its file " + path + suffix + " is not writable by user " + user_name() +
             " (made by another user; its owner may remove it while no process has the hub open)";
  return "";
}

FileStamp FileStamp::of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

bool operator==(const FileStamp& a, const FileStamp& b) noexcept {
  const auto same = [](const timespec& x, const timespec& y) { return x.tv_sec == y.tv_sec && x.tv_nsec == y.tv_nsec; };
  return a.exists == b.exists && a.device == b.device && a.inode == b.inode && a.size == b.size &&
         same(a.modified, b.modified) && same(a.changed, b.changed);
}

std::string immutable_uri(const std::string& path) {
  std::string out = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "?immutable=1";
}

}  // namespace tensorhub::detail
