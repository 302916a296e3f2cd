// Helpers for tests of hubs a user may only read: running code as another user (root passes
// every file mode, so only another user meets a read-only SQLite file as a user does), and a
// PostgreSQL role that may only SELECT.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub::testing {

/// The uid and gid a test runs readers as: "nobody" when this process is root, else its own
/// (a non-root tester already meets file modes as any user does).
struct ReaderIds {
  uid_t uid;
  gid_t gid;
  std::string name;
};

inline ReaderIds reader_ids() {
  if (::geteuid() != 0) {
    const passwd* me = ::getpwuid(::geteuid());
    return {::geteuid(), ::getegid(), me ? me->pw_name : std::to_string(::geteuid())};
  }
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) throw std::runtime_error("no user nobody to run readers as");
  return {nobody->pw_uid, nobody->pw_gid, "nobody"};
}

/// `body` run in a child process as reader_ids() (fork, then setgroups/setgid/setuid), with a
/// line channel back to the test and a "go" channel to it, so that the test can act (as
/// root: write the hub) between the child's steps. The child never returns into the test
/// (it ends with _exit): the body reports with say(), waits with wait_for_go(); a tensorhub
/// Error it throws comes back as the line "error <Kind>: <message>", and the last line of a
/// body that returned is "done".
class ReaderProcess {
 public:
  using Body = std::function<void(ReaderProcess&)>;

  explicit ReaderProcess(const Body& body) {
    const ReaderIds ids = reader_ids();
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      to_parent_ = up[1];
      from_parent_ = down[0];
      run_child(body, ids);  // never returns
    }
    ::close(up[1]);
    ::close(down[0]);
    from_child_ = up[0];
    to_child_ = down[1];
  }
  ~ReaderProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_child_ >= 0) ::close(from_child_);
    if (to_child_ >= 0) ::close(to_child_);
  }
  ReaderProcess(const ReaderProcess&) = delete;
  ReaderProcess& operator=(const ReaderProcess&) = delete;

  // ---- in the child ---------------------------------------------------------------------

  /// Sends one line (newlines in it become spaces) to the test.
  void say(std::string line) {
    for (char& c : line)
      if (c == '\n') c = ' ';
    line += '\n';
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t n = ::write(to_parent_, line.data() + done, line.size() - done);
      if (n <= 0) ::_exit(3);
      done += static_cast<std::size_t>(n);
    }
  }
  /// Waits for the test's next go().
  void wait_for_go() {
    char c = 0;
    if (::read(from_parent_, &c, 1) != 1) ::_exit(4);
  }

  // ---- in the test ----------------------------------------------------------------------

  /// The child's next line, or nullopt when it sent none within `limit` (or ended).
  std::optional<std::string> next_line(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{from_child_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  /// Lets the child past its wait_for_go().
  void go() {
    const char c = 'g';
    if (::write(to_child_, &c, 1) != 1) throw std::runtime_error("the reader process is gone");
  }
  /// Every further line until the child ends (at most `limit`), then its exit.
  std::vector<std::string> rest(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    std::vector<std::string> lines;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (auto line = next_line(std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline - std::chrono::steady_clock::now()))) {
      lines.push_back(*line);
    }
    return lines;
  }

 private:
  [[noreturn]] void run_child(const Body& body, const ReaderIds& ids) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(ids.gid) != 0 || ::setuid(ids.uid) != 0)) {
      say("error setuid failed");
      ::_exit(2);
    }
    try {
      body(*this);
      say("done");
    } catch (const Error& e) {
      say("error " + std::string(to_string(e.kind())) + ": " + e.message());
    } catch (const std::exception& e) {
      say(std::string("error std::exception: ") + e.what());
    }
    ::_exit(0);  // no destructor or atexit handler of the test's runs here
  }

  pid_t pid_ = -1;
  int to_parent_ = -1, from_parent_ = -1;  // the child's ends
  int from_child_ = -1, to_child_ = -1;    // the test's ends
  std::string buffer_;
};

/// Runs `fn` and returns "ok" or "error <Kind>: <message>", with the milliseconds it took
/// after a '|' (e.g. "error FailedPrecondition: the hub ... is read-only (...)|3").
inline std::string outcome_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  std::string out = "ok";
  try {
    fn();
  } catch (const Error& e) {
    out = "error " + std::string(to_string(e.kind())) + ": " + e.message();
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return out + "|" + std::to_string(ms.count());
}

/// `uri` ("postgresql://user[:password]@host:port/db...") with its user replaced by `user`
/// and no password (the test server trusts local connections).
inline std::string uri_with_user(const std::string& uri, const std::string& user) {
  const auto start = uri.find("://") + 3;
  const auto slash = uri.find('/', start);
  const auto at = uri.rfind('@', slash);
  const std::string host = at == std::string::npos || at < start ? uri.substr(start) : uri.substr(at + 1);
  return uri.substr(0, start) + user + "@" + host;
}

/// A PostgreSQL role that may log in and SELECT every table of the database's public schema
/// that exists when it is made (grant_select() again for tables made later), dropped on
/// destruction. `admin` is a Hub opened on the database by a superuser.
class SelectOnlyRole {
 public:
  SelectOnlyRole(Hub& admin, const std::string& database_uri) : admin_(admin) {
    static std::atomic<int> counter{0};
    name_ = "th_reader_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    admin_.sql().execute("CREATE ROLE " + name_ + " LOGIN", {}, sql::Access::kWrite);
    grant_select();
    uri_ = uri_with_user(database_uri, name_);
  }
  ~SelectOnlyRole() {
    try {
      admin_.sql().execute("DROP OWNED BY " + name_, {}, sql::Access::kWrite);
      admin_.sql().execute("DROP ROLE " + name_, {}, sql::Access::kWrite);
    } catch (const std::exception&) {
      // A role left on the private test server is harmless.
    }
  }
  SelectOnlyRole(const SelectOnlyRole&) = delete;
  SelectOnlyRole& operator=(const SelectOnlyRole&) = delete;

  /// SELECT on every table of the public schema now.
  void grant_select() {
    admin_.sql().execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + name_, {}, sql::Access::kWrite);
  }
  const std::string& name() const { return name_; }
  /// The database's URI as this role.
  const std::string& uri() const { return uri_; }

 private:
  Hub& admin_;
  std::string name_, uri_;
};

}  // namespace tensorhub::testing
