// Sessions, the login limiter and the cookie parsing of the dashboard's logins (auth.h).
#include "auth.h"

#include <algorithm>
#include <cctype>

#include "tensorhub/core/secure_random.h"

namespace tensorhub {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Sessions::Sessions(std::chrono::seconds lifetime, std::size_t max_sessions)
    : lifetime_(lifetime), max_sessions_(std::max<std::size_t>(1, max_sessions)) {}

std::pair<std::string, Session> Sessions::create(const std::string& user, const std::string& token_sha256) {
  std::string id = secure_random_hex(32);
  Session s{user, token_sha256, secure_random_hex(32), std::chrono::steady_clock::now() + lifetime_};
  MutexLock lock(mutex_);
  while (sessions_.size() >= max_sessions_ && !order_.empty()) {
    sessions_.erase(order_.front());
    order_.pop_front();
  }
  sessions_[id] = s;
  order_.push_back(id);
  return {id, s};
}

std::optional<Session> Sessions::find(const std::string& id) {
  MutexLock lock(mutex_);
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= std::chrono::steady_clock::now()) {
    sessions_.erase(it);  // its id stays in order_ until pushed out: erasing an absent key is harmless
    return std::nullopt;
  }
  return it->second;
}

void Sessions::remove(const std::string& id) {
  MutexLock lock(mutex_);
  sessions_.erase(id);
}

std::size_t Sessions::size() const {
  MutexLock lock(mutex_);
  return sessions_.size();
}

LoginLimiter::LoginLimiter(int burst, std::chrono::seconds window) : burst_(std::max(1, burst)), window_(window) {}

void LoginLimiter::forget_old(std::deque<Clock::time_point>& times, Clock::time_point now) const {
  while (!times.empty() && times.front() + window_ <= now) times.pop_front();
}

std::optional<int> LoginLimiter::retry_after(const std::string& address, Clock::time_point now) {
  MutexLock lock(mutex_);
  const auto it = failures_.find(address);
  if (it == failures_.end()) return std::nullopt;
  forget_old(it->second, now);
  if (it->second.empty()) {
    failures_.erase(it);
    return std::nullopt;
  }
  if (static_cast<int>(it->second.size()) < burst_) return std::nullopt;
  const auto wait = it->second.front() + window_ - now;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(wait + std::chrono::milliseconds(999));
  return std::max<int>(1, static_cast<int>(seconds.count()));
}

void LoginLimiter::failed(const std::string& address, Clock::time_point now) {
  MutexLock lock(mutex_);
  auto& times = failures_[address];
  forget_old(times, now);
  times.push_back(now);
  // A burst's worth is all the limit reads: older failures beyond it change nothing.
  while (static_cast<int>(times.size()) > burst_) times.pop_front();
}

std::optional<std::string> request_cookie(const HttpRequest& request, std::string_view name) {
  for (const auto& [key, value] : request.headers) {
    if (!iequals(key, "Cookie")) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      const std::size_t semi = rest.find(';');
      const std::string_view pair = trim(rest.substr(0, semi));
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      const std::size_t eq = pair.find('=');
      if (eq == std::string_view::npos) continue;
      if (trim(pair.substr(0, eq)) == name) return std::string(trim(pair.substr(eq + 1)));
    }
  }
  return std::nullopt;
}

std::optional<std::string> bearer_token(const HttpRequest& request) {
  const auto value = request.header("Authorization");
  if (!value) return std::nullopt;
  const std::string_view v = trim(*value);
  if (v.size() < 7 || !iequals(v.substr(0, 6), "Bearer") || v[6] != ' ') return std::nullopt;
  const std::string_view token = trim(v.substr(7));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

std::string session_cookie(const std::string& id, std::int64_t max_age_s, bool secure) {
  return std::string(kSessionCookie) + "=" + id + "; Path=/; Max-Age=" + std::to_string(max_age_s) +
         "; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "");
}

}  // namespace tensorhub
