#include "tensorhub/serve/model_config.h"

#include <algorithm>
#include <cmath>

#include "serving_config.pb.h"
#include "tensorhub/core/error.h"
#include "text_proto.h"

namespace tensorhub {
namespace {

// A config's traffic_split, by label name (a proto map has no order; the weights' cumulative
// line, where a request id's hash lands, must not change between reads of one file).
std::vector<std::pair<std::string, double>> traffic_of(const serving::ModelConfig& c,
                                                       const std::map<std::string, std::int64_t>& labels) {
  std::vector<std::pair<std::string, double>> out(c.traffic_split().begin(), c.traffic_split().end());
  std::sort(out.begin(), out.end());
  double total = 0;
  for (const auto& [label, weight] : out) {
    const std::string where = "model " + c.name() + ": traffic_split { key: \"" + label + "\" }";
    if (!labels.count(label)) {
      std::string known;
      for (const auto& [l, v] : labels) known += (known.empty() ? "" : ", ") + l;
      throw InvalidArgument(where + " is not one of its version_labels (" + (known.empty() ? "it has none" : known) +
                            "): add version_labels { key: \"" + label + "\" value: <version> }");
    }
    if (!std::isfinite(weight) || weight <= 0)
      throw InvalidArgument(where + " has weight " + std::to_string(weight) + "; give a positive number, e.g. 90 and 10");
    total += weight;
  }
  if (!std::isfinite(total))
    throw InvalidArgument("model " + c.name() + ": traffic_split's weights add up past the largest double; give "
                          "smaller ones, e.g. 90 and 10");
  return out;
}

}  // namespace

std::vector<ModelConfig> parse_model_config_file(const std::string& text) {
  serving::ModelServerConfig proto;
  parse_text_proto(text, &proto, "--model_config_file");
  std::vector<ModelConfig> out;
  for (const auto& c : proto.model_config_list().config()) {
    ModelConfig m;
    m.name = c.name();
    m.base_path = c.base_path();
    if (!c.model_platform().empty() && c.model_platform() != "tensorflow" && c.model_platform() != "tensorhub")
      throw InvalidArgument("model " + c.name() + ": model_platform \"" + c.model_platform() +
                            "\" is not supported; use \"tensorflow\" (any of our model formats)");
    const auto& p = c.model_version_policy();
    if (p.has_all()) {
      m.policy.kind = VersionPolicy::kAll;
    } else if (p.has_specific()) {
      m.policy.kind = VersionPolicy::kSpecific;
      m.policy.versions.insert(p.specific().versions().begin(), p.specific().versions().end());
    } else if (p.has_latest()) {
      m.policy.latest = std::max<int>(1, static_cast<int>(p.latest().num_versions()));
    }
    for (const auto& [label, version] : c.version_labels()) m.labels[label] = version;
    m.traffic = traffic_of(c, m.labels);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tensorhub
