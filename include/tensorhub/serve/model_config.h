// ModelConfig: one model of TF Serving's --model_config_file (model_server_config.proto's
// ModelConfig), and the parser of that file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/serve/version_policy.h"

namespace tensorhub {

/// One model served from a file system base path (<base_path>/<version>/).
struct ModelConfig {
  std::string name;
  std::string base_path;
  VersionPolicy policy;
  std::map<std::string, std::int64_t> labels;  ///< version_labels, e.g. {"stable": 1}
  /// traffic_split (tensorhub's field): (label, weight) pairs by label name, weights positive;
  /// requests naming no version or label are shared between those labels' versions by weight
  /// (Source::traffic_split). Empty: the newest version answers, as TF Serving.
  std::vector<std::pair<std::string, double>> traffic;
};

/// Parses TF Serving's --model_config_file (text-format ModelServerConfig with a
/// model_config_list of config { name base_path model_platform model_version_policy
/// version_labels }), and tensorhub's traffic_split { key: "<label>" value: <weight> } beside
/// version_labels. Throws InvalidArgument naming the line for a syntax error, for a
/// model_platform other than "tensorflow" or "tensorhub", and for a traffic_split whose label
/// is not one of the model's version_labels or whose weight is not a positive finite number.
std::vector<ModelConfig> parse_model_config_file(const std::string& text);

}  // namespace tensorhub
