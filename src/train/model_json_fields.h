// Private to src/train: field readers of model.json shared by the layer parser
// (layer_spec.cpp) and the optimizer parser (model.cpp). No libtorch.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorhub::detail {

/// Largest layer we agree to allocate (elements of one weight matrix): a typo in "units" must
/// be an error, not an attempt to allocate terabytes.
constexpr std::int64_t kMaxLayerParams = std::int64_t{1} << 31;

/// "\"s\"".
std::string in_quotes(const std::string& s);
/// %g of v.
std::string number_string(double v);

/// Refuses keys of `obj` outside `allowed` (a typo such as "learning_rte" must not be
/// ignored); the message lists the allowed keys sorted: "<where> has unknown field ...".
void check_keys(const nlohmann::json& obj, const std::string& where, const std::set<std::string>& allowed);

/// obj[key] as a number in the interval from min to max (each end closed unless said open),
/// or default_value when absent. Throws InvalidArgument "<where>.<key> = v is outside [a, b)".
double get_number(const nlohmann::json& obj, const std::string& key, const std::string& where,
                  double default_value, double min, double max, bool min_open = false,
                  bool max_open = false);

/// obj[key] as true or false, or default_value when absent (null is an error).
bool get_bool(const nlohmann::json& obj, const std::string& key, const std::string& where, bool default_value);

/// A shape per example: [784], [28, 28], or [] for a scalar (Keras's shape=()).
std::vector<std::int64_t> get_shape(const nlohmann::json& v, const std::string& where);

}  // namespace tensorhub::detail
