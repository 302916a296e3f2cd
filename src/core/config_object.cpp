// ConfigObject (config_object.h): typed fields of a JSON object, unknown keys refused.
#include "tensorhub/core/config_object.h"

#include <algorithm>
#include <cmath>

#include "tensorhub/core/error.h"

namespace tensorhub {

using Json = nlohmann::json;

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

ConfigObject::ConfigObject(const Json& j, std::string path, const std::vector<std::string>& allowed,
                           Wording wording)
    : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) throw InvalidArgument(path_ + " must be a JSON object, got " + j_.dump());
  for (const auto& [key, value] : j_.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const char* joint = wording == Wording::kHas ? " has unknown field \"" : ": unknown field \"";
    throw InvalidArgument(path_ + joint + key + "\"; allowed: " + join_names(allowed));
  }
}

bool ConfigObject::has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

std::string ConfigObject::string(const std::string& key, const std::string& fallback, bool required) const {
  if (!has(key)) {
    if (required) throw InvalidArgument(name(key) + " is required (a string)");
    return fallback;
  }
  if (!at(key).is_string()) throw InvalidArgument(name(key) + " must be a string, got " + at(key).dump());
  return at(key).get<std::string>();
}

std::int64_t ConfigObject::integer(const std::string& key, std::int64_t fallback, std::int64_t min,
                                   std::int64_t max) const {
  if (!has(key)) return fallback;
  const Json& v = at(key);
  if (!v.is_number_integer()) throw InvalidArgument(name(key) + " must be an integer, got " + v.dump());
  // An unsigned value beyond int64 would wrap in get<int64_t>(); refuse it before converting.
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    throw InvalidArgument(name(key) + " must be at most " + std::to_string(max) + ", got " + v.dump());
  const std::int64_t n = v.get<std::int64_t>();
  if (n < min || n > max)
    throw InvalidArgument(name(key) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                          "], got " + v.dump());
  return n;
}

double ConfigObject::number(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const Json& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw InvalidArgument(name(key) + " must be a finite number, got " + v.dump());
  return v.get<double>();
}

bool ConfigObject::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!at(key).is_boolean()) throw InvalidArgument(name(key) + " must be true or false, got " + at(key).dump());
  return at(key).get<bool>();
}

Json ConfigObject::object(const std::string& key) const {
  if (!has(key)) return Json::object();
  if (!at(key).is_object()) throw InvalidArgument(name(key) + " must be a JSON object, got " + at(key).dump());
  return at(key);
}

}  // namespace tensorhub
