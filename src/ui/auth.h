// The dashboard's logins (tensorhub ui with users, store/users.h): sessions, the rate limit on
// failed logins, and the cookie and header parsing they need.
//
// How a request is authenticated (ui_server.cpp, on a worker: the user is looked up in the hub
// on every request, so that a deleted user is refused from its next request):
//  - a browser logs in once, POST /api/login {"token": "thu_..."}, and receives a session
//    cookie (HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it;
//    Secure under TLS) and the session's CSRF token, which every POST of the page sends back in
//    X-CSRF-Token. The cookie alone changes nothing: a form of another site on the same host
//    (same-site for SameSite, e.g. another port of 127.0.0.1) cannot send that header;
//  - a script sends `Authorization: Bearer thu_...` (RFC 6750 section 2.1) with each request;
//    no cookie is involved, so no CSRF token is needed.
// Failed logins (a wrong token by either way) are counted per client address: past `burst`
// failures in `window`, every login from that address is answered 429 with Retry-After, even
// with a right token, until the oldest failure leaves the window, so 256-bit tokens cannot be
// guessed and a guesser cannot tell a right token from the refusal.
//
// Thread safety: Sessions and LoginLimiter are safe from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tensorhub/core/http_server.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub {

/// The session cookie's name.
inline constexpr const char* kSessionCookie = "tensorhub_session";

/// A logged-in browser: whose token it presented, and the CSRF token its POSTs must carry.
struct Session {
  std::string user;          ///< the user's name when it logged in (the hub says who it is now)
  std::string token_sha256;  ///< the hub's key of the user (users.h): looked up on each request
  std::string csrf_token;    ///< 64 hex characters, sent back in X-CSRF-Token
  std::chrono::steady_clock::time_point expires;
};

class Sessions {
 public:
  /// Sessions last `lifetime` from their login; beyond `max_sessions` the oldest is dropped
  /// (its browser logs in again).
  explicit Sessions(std::chrono::seconds lifetime = std::chrono::hours(12), std::size_t max_sessions = 10000);
  /// A new session for the user whose token hashes to `token_sha256`; returns its id (64 hex
  /// characters from OpenSSL's CSPRNG, the cookie's value) and the session.
  std::pair<std::string, Session> create(const std::string& user, const std::string& token_sha256)
      TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// The session of id `id`, or nullopt when unknown or expired (an expired one is forgotten).
  std::optional<Session> find(const std::string& id) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// Forgets session `id` (log out); nothing when unknown.
  void remove(const std::string& id) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// How many sessions are held (expired ones included until looked up or pushed out).
  std::size_t size() const TENSORHUB_LOCKS_EXCLUDED(mutex_);
  std::chrono::seconds lifetime() const { return lifetime_; }

 private:
  const std::chrono::seconds lifetime_;
  const std::size_t max_sessions_;
  mutable Mutex mutex_;
  std::map<std::string, Session> sessions_ TENSORHUB_GUARDED_BY(mutex_);
  std::deque<std::string> order_ TENSORHUB_GUARDED_BY(mutex_);  ///< ids by creation, oldest first
};

class LoginLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  /// At most `burst` failed logins per client address within any `window`.
  explicit LoginLimiter(int burst = 10, std::chrono::seconds window = std::chrono::seconds(60));
  /// nullopt when `address` may try to log in at `now`; else the whole seconds (at least 1)
  /// until it may (the Retry-After of the 429).
  std::optional<int> retry_after(const std::string& address, Clock::time_point now = Clock::now())
      TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// Counts a failed login of `address` at `now`.
  void failed(const std::string& address, Clock::time_point now = Clock::now()) TENSORHUB_LOCKS_EXCLUDED(mutex_);

 private:
  void forget_old(std::deque<Clock::time_point>& times, Clock::time_point now) const;
  const int burst_;
  const std::chrono::seconds window_;
  Mutex mutex_;
  std::map<std::string, std::deque<Clock::time_point>> failures_ TENSORHUB_GUARDED_BY(mutex_);
};

/// The value of cookie `name` in the request's Cookie headers (RFC 6265 section 5.4:
/// "a=1; b=2"), or nullopt.
std::optional<std::string> request_cookie(const HttpRequest& request, std::string_view name);

/// The token of an `Authorization: Bearer <token>` header (RFC 6750 section 2.1; the scheme
/// case-insensitive); nullopt when there is none, the token is empty, or the header is of
/// another scheme (a proxy's Basic credentials are no token of ours, and no wrong one).
std::optional<std::string> bearer_token(const HttpRequest& request);

/// The Set-Cookie value of session `id`: HttpOnly, SameSite=Strict, Path=/, Max-Age of
/// `max_age_s` (0 with an empty id: delete the cookie), and Secure when `secure` (served over TLS).
std::string session_cookie(const std::string& id, std::int64_t max_age_s, bool secure);

}  // namespace tensorhub
