// VersionPolicy: which of the versions a source lists are served, after TF Serving's
// ServableVersionPolicy (model_version_policy in a ModelConfig).
#pragma once

#include <cstdint>
#include <set>

namespace tensorhub {

/// model_version_policy of TF Serving's ModelConfig: the latest N versions (default 1), all
/// versions, or specific versions.
struct VersionPolicy {
  enum Kind { kLatest, kAll, kSpecific } kind = kLatest;
  int latest = 1;                   ///< for kLatest: how many of the highest versions
  std::set<std::int64_t> versions;  ///< for kSpecific
};

/// The versions of `present` that `policy` wants served: the `latest` highest, all of them,
/// or those of `policy.versions` that are present.
std::set<std::int64_t> aspired_versions(const VersionPolicy& policy, const std::set<std::int64_t>& present);

}  // namespace tensorhub
