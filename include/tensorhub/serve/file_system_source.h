// FileSystemSource: the versions of a model on disk, one numbered directory per version
// (<base_path>/<version>/, e.g. /models/mlp/3 or TF Serving's zero-padded 00000123), after TF
// Serving's FileSystemStoragePathSource.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/serve/source.h"

namespace tensorhub {

class FileSystemSource final : public Source {
 public:
  /// `base_path` need not exist yet: listing it fails (and is retried) until it does.
  /// `traffic`: the config's traffic_split (ModelConfig::traffic), none by default.
  explicit FileSystemSource(std::string base_path, std::vector<std::pair<std::string, double>> traffic = {});

  /// Directories of the base path whose names are whole non-negative numbers (at most 18
  /// digits), by version; each loader reads the directory with load_servable(). Files and
  /// other names are ignored. Throws Unavailable if the base path cannot be listed (missing,
  /// not a directory, no permission).
  std::map<std::int64_t, Loader> list_versions() override;
  std::string describe() const override;
  std::string empty_message() const override;
  /// <version directory>/assets.extra/tf_serving_warmup_requests when the file exists.
  std::optional<WarmupRequests> warmup_requests(std::int64_t version) override;
  std::vector<std::pair<std::string, double>> traffic_split() const override { return traffic_; }

 private:
  std::string base_path_;
  std::vector<std::pair<std::string, double>> traffic_;
  std::map<std::int64_t, std::filesystem::path> listed_;  // the last listing's version directories
};

}  // namespace tensorhub
