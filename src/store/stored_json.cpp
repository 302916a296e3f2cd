// Non-finite numbers as MongoDB Extended JSON (document.h), and the JSON text the backends
// store: the one place where JSON enters and leaves the database (stored_json.h).
#include "tensorhub/store/stored_json.h"

#include <cmath>
#include <limits>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

constexpr const char* kNumberDouble = "$numberDouble";

// The Extended JSON text of a non-finite double: "NaN", "Infinity" or "-Infinity".
const char* non_finite_name(double x) {
  if (std::isnan(x)) return "NaN";
  return x > 0 ? "Infinity" : "-Infinity";
}

// The double an Extended JSON {"$numberDouble": ...} object stands for, if `j` is one of the
// three non-finite ones.
bool decode_one(const Json& j, double& out) {
  if (!j.is_object() || j.size() != 1) return false;
  const auto it = j.find(kNumberDouble);
  if (it == j.end() || !it->is_string()) return false;
  const auto& text = it->get_ref<const std::string&>();
  if (text == "NaN") out = std::numeric_limits<double>::quiet_NaN();
  else if (text == "Infinity") out = std::numeric_limits<double>::infinity();
  else if (text == "-Infinity") out = -std::numeric_limits<double>::infinity();
  else return false;
  return true;
}

// `value` with `f` applied to each member of an object or element of an array (f recurses);
// other values as they are.
Json map_children(const Json& value, Json (*f)(const Json&)) {
  if (value.is_object()) {
    Json out = Json::object();
    for (auto it = value.begin(); it != value.end(); ++it) out[it.key()] = f(it.value());
    return out;
  }
  if (value.is_array()) {
    Json out = Json::array();
    for (const auto& v : value) out.push_back(f(v));
    return out;
  }
  return value;
}

}  // namespace

Json encode_non_finite(const Json& value) {
  if (value.is_number_float()) {
    const double x = value.get<double>();
    return std::isfinite(x) ? value : Json{{kNumberDouble, non_finite_name(x)}};
  }
  return map_children(value, encode_non_finite);
}

Json decode_non_finite(const Json& value) {
  double x = 0;
  if (decode_one(value, x)) return x;
  return map_children(value, decode_non_finite);
}

std::string to_stored_json(const Json& value) { return encode_non_finite(value).dump(); }

Json from_stored_json(const std::string& text, const char* column) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) throw DataLoss(std::string("stored ") + column + " is not valid JSON");
  return decode_non_finite(j);
}

}  // namespace tensorhub
