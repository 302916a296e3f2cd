// Types for the TensorBoard hparams plugin: hyperparameter domains, metrics, values and
// session status, as tensorboard.plugins.hparams.api (hp.HParam, hp.Metric) defines them.
// EventFileWriter (event_file_writer.h) writes them as the plugin's summaries.
#pragma once

#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tensorhub {

/// One hyperparameter value: a number (double), a boolean or a string, as the plugin's
/// google.protobuf.Value number_value / bool_value / string_value. Integers become numbers;
/// a string literal is a string (not a bool, unlike a plain std::variant).
class HParamValue {
 public:
  HParamValue(bool v) : v_(v) {}
  template <std::floating_point T>
  HParamValue(T v) : v_(static_cast<double>(v)) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  HParamValue(T v) : v_(static_cast<double>(v)) {}
  HParamValue(std::string v) : v_(std::move(v)) {}
  HParamValue(std::string_view v) : v_(std::string(v)) {}
  HParamValue(const char* v) : v_(std::string(v)) {}

  bool is_number() const noexcept { return std::holds_alternative<double>(v_); }
  bool is_bool() const noexcept { return std::holds_alternative<bool>(v_); }
  bool is_string() const noexcept { return std::holds_alternative<std::string>(v_); }
  /// The held value; std::bad_variant_access if it is of another kind.
  double number() const { return std::get<double>(v_); }
  bool boolean() const { return std::get<bool>(v_); }
  const std::string& string() const { return std::get<std::string>(v_); }
  bool operator==(const HParamValue&) const = default;

 private:
  std::variant<double, bool, std::string> v_;
};

/// A real interval [min_value, max_value] (api.proto Interval).
struct HParamInterval {
  double min_value = 0;
  double max_value = 0;
};

/// A hyperparameter and its domain (api.proto HParamInfo). Give `values` (a discrete domain,
/// all of one kind) or `interval` (a real interval), or neither (no domain).
/// The HParamInfo type is taken from the domain: numbers or an interval -> DATA_TYPE_FLOAT64,
/// booleans -> DATA_TYPE_BOOL, strings -> DATA_TYPE_STRING, no domain -> DATA_TYPE_UNSET (as
/// TensorBoard's hp.Discrete / hp.RealInterval / hp.IntInterval do).
struct HParam {
  std::string name{};
  std::vector<HParamValue> values{};
  std::optional<HParamInterval> interval{};
  std::string display_name{};
  std::string description{};
};

/// Which data set a metric comes from (api.proto DatasetType).
enum class DatasetType { kUnknown = 0, kTraining = 1, kValidation = 2 };

/// A metric shown in the hparams dashboard (api.proto MetricInfo): the scalar summary `tag`
/// written in the session's run, in the sub-directory `group` ("" = the session's own run).
struct HParamMetric {
  std::string tag{};
  std::string group{};
  std::string display_name{};
  std::string description{};
  DatasetType dataset_type = DatasetType::kUnknown;
};

/// How a session ended (api.proto Status).
enum class SessionStatus { kUnknown = 0, kSuccess = 1, kFailure = 2, kRunning = 3 };

}  // namespace tensorhub
