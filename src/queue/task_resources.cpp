// TaskResources and memory sizes (task.h): parsing, formatting, validation and JSON.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tensorhub/core/error.h"
#include "tensorhub/queue/task.h"

namespace tensorhub {
namespace {

// The most cores a task may ask for: far beyond any one machine (the largest have a few
// thousand), so only a typo is refused.
constexpr double kMaxCpus = 1e6;

constexpr const char* kMemoryForms =
    "give bytes (\"1048576\") or a number with a unit: K, M, G, T or KiB, MiB, GiB, TiB (1024-based, "
    "as Slurm's --mem: \"8G\" = \"8GiB\"), KB, MB, GB, TB (1000-based), B";

// The multiplier of a unit (lowercased, spaces removed), or 0 when it is none we accept.
double unit_factor(const std::string& unit) {
  static const char* const kLetters = "kmgt";
  if (unit.empty() || unit == "b") return 1;
  const char* letter = std::strchr(kLetters, unit[0]);
  if (letter == nullptr || unit[0] == '\0') return 0;
  const int power = static_cast<int>(letter - kLetters) + 1;
  const std::string rest = unit.substr(1);
  if (rest.empty() || rest == "i" || rest == "ib") return std::pow(1024.0, power);
  if (rest == "b") return std::pow(1000.0, power);
  return 0;
}

}  // namespace

std::int64_t parse_memory_size(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("memory size \"" + text + "\" " + why + "; " + kMemoryForms);
  };
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const std::size_t number_start = i;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(number_start, i - number_start);
  std::string unit;
  for (; i < text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(text[i])))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1)
    throw bad(text.find('-') != std::string::npos ? "is negative" : "does not start with a number");
  const double factor = unit_factor(unit);
  if (factor == 0) throw bad("has an unknown unit \"" + unit + "\"");
  if (factor == 1 && number.find('.') != std::string::npos) throw bad("is a fraction of a byte");
  // strtod, not stod: a number too long for a double is "too large" below, not std::out_of_range.
  const double bytes = std::floor(std::strtod(number.c_str(), nullptr) * factor);
  if (!(bytes < 9.2e18)) throw bad("is too large");
  return static_cast<std::int64_t>(bytes);
}

std::string format_memory_size(std::int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (unit < 5 && std::fabs(value) >= 1024) {
    value /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  std::string number = buf;
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  return number + " " + kUnits[unit];
}

void TaskResources::validate(const std::string& where) const {
  if (!std::isfinite(cpus) || cpus < 0)
    throw InvalidArgument(where + "resources cpus must be a finite number >= 0 (0: no request), got " +
                          std::to_string(cpus));
  // More cores than any machine has is a typo (1e30 for 1e3), not a request to wait for one.
  if (cpus > kMaxCpus)
    throw InvalidArgument(where + "resources cpus " + format_cpus(cpus) + " is more than " +
                          format_cpus(kMaxCpus) + " cores; no runner has that many");
  if (gpus < 0) throw InvalidArgument(where + "resources gpus must be a count >= 0, got " + std::to_string(gpus));
  if (memory_bytes < 0)
    throw InvalidArgument(where + "resources memory must be >= 0 bytes, got " + std::to_string(memory_bytes));
}

Json TaskResources::to_json() const {
  return {{"cpus", cpus}, {"gpus", gpus}, {"memory", format_memory_size(memory_bytes)}, {"memory_bytes", memory_bytes}};
}

TaskResources TaskResources::from_json(const Json& json) {
  if (json.is_null()) return {};
  if (!json.is_object())
    throw InvalidArgument("resources must be an object like {\"cpus\": 2, \"gpus\": 1, \"memory\": \"8GiB\"}, got " +
                          json.dump());
  TaskResources r;
  for (const auto& [key, value] : json.items()) {
    if (key == "cpus") {
      if (!value.is_number()) throw InvalidArgument("resources cpus must be a number, got " + value.dump());
      r.cpus = value.get<double>();
    } else if (key == "gpus") {
      if (!value.is_number_integer() && !(value.is_number_float() && value.get<double>() == std::floor(value.get<double>())))
        throw InvalidArgument("resources gpus must be a whole count of GPUs, got " + value.dump());
      const double n = value.get<double>();
      if (n < 0 || n > std::numeric_limits<int>::max())
        throw InvalidArgument("resources gpus must be a count >= 0, got " + value.dump());
      r.gpus = static_cast<int>(n);
    } else if (key == "memory" || key == "memory_bytes") {
      if (value.is_string() && key == "memory") {
        r.memory_bytes = parse_memory_size(value.get<std::string>());
      } else if (value.is_number_integer()) {
        r.memory_bytes = value.get<std::int64_t>();
      } else {
        throw InvalidArgument("resources " + key + " must be bytes (an integer) or a size like \"8GiB\", got " +
                              value.dump());
      }
    } else {
      throw InvalidArgument("resources has an unknown key \"" + key + "\"; known: cpus, gpus, memory");
    }
  }
  r.validate("");
  return r;
}

std::string format_cpus(double cpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", cpus);
  return buf;
}

std::string TaskResources::to_string() const {
  if (empty()) return "nothing";
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (cpus != 0) {
    add(format_cpus(cpus) + (cpus == 1 ? " cpu" : " cpus"));
  }
  if (gpus != 0) add(std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs"));
  if (memory_bytes != 0) add(format_memory_size(memory_bytes));
  return out;
}

}  // namespace tensorhub
