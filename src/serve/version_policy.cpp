#include "tensorhub/serve/version_policy.h"

namespace tensorhub {

std::set<std::int64_t> aspired_versions(const VersionPolicy& p, const std::set<std::int64_t>& present) {
  std::set<std::int64_t> out;
  switch (p.kind) {
    case VersionPolicy::kAll: return present;
    case VersionPolicy::kSpecific:
      for (auto v : p.versions)
        if (present.count(v)) out.insert(v);
      return out;
    case VersionPolicy::kLatest: {
      int n = 0;
      for (auto it = present.rbegin(); it != present.rend() && n < p.latest; ++it, ++n) out.insert(*it);
      return out;
    }
  }
  return out;
}

}  // namespace tensorhub
