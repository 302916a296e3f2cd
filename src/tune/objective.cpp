// Objective: a metric name and a direction, parsed as `tensorhub tune --objective` takes it.
#include <cmath>

#include "tensorhub/core/error.h"
#include "tensorhub/tune/oracle.h"

namespace tensorhub {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Keras Tuner's inference (keras_tuner.engine.objective / metrics_tracking): a loss is
// minimised, an accuracy maximised; anything else must say which.
std::optional<bool> infer_maximize(const std::string& name) {
  if (ends_with(name, "loss")) return false;
  if (name == "acc" || name == "accuracy" || ends_with(name, "_acc") || ends_with(name, "_accuracy")) return true;
  return std::nullopt;
}

}  // namespace

Objective Objective::parse(const std::string& text) {
  Objective o;
  const auto colon = text.rfind(':');
  o.name = colon == std::string::npos ? text : text.substr(0, colon);
  if (o.name.empty()) throw InvalidArgument("objective: empty metric name; example: val_accuracy:max");
  if (colon != std::string::npos) {
    const std::string dir = text.substr(colon + 1);
    if (dir == "max") o.maximize = true;
    else if (dir == "min") o.maximize = false;
    else throw InvalidArgument("objective '" + text + "': direction must be min or max, not '" + dir + "'");
    return o;
  }
  const auto inferred = infer_maximize(o.name);
  if (!inferred) {
    throw InvalidArgument("objective '" + text + "': cannot tell whether to minimise or maximise it; write '" +
                          text + ":min' or '" + text + ":max'");
  }
  o.maximize = *inferred;
  return o;
}

bool Objective::better(double a, double b) const {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return maximize ? a > b : a < b;
}

std::string Objective::to_string() const { return name + (maximize ? ":max" : ":min"); }

}  // namespace tensorhub
