#include "tensorhub/serve/model_config.h"

#include <algorithm>

#include "serving_config.pb.h"
#include "tensorhub/core/error.h"
#include "text_proto.h"

namespace tensorhub {

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
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tensorhub
