#include "tensorhub/serve/file_system_source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "tensorhub/core/error.h"

namespace tensorhub {

FileSystemSource::FileSystemSource(std::string base_path, std::vector<std::pair<std::string, double>> traffic)
    : base_path_(std::move(base_path)), traffic_(std::move(traffic)) {}

std::map<std::int64_t, Loader> FileSystemSource::list_versions() {
  std::map<std::int64_t, Loader> out;
  std::map<std::int64_t, std::filesystem::path> listed;
  std::error_code ec;
  if (!std::filesystem::is_directory(base_path_, ec))
    throw Unavailable("model base path " + base_path_ + " is not a directory" + (ec ? " (" + ec.message() + ")" : "") +
                      ": create it, or fix base_path / --model_base_path");
  for (const auto& entry : std::filesystem::directory_iterator(base_path_, ec)) {
    std::error_code entry_ec;  // a version deleted while listing is simply not listed
    if (!entry.is_directory(entry_ec)) continue;
    const std::string n = entry.path().filename().string();
    if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    const std::int64_t version = std::stoll(n);
    out[version] = [dir = entry.path()] { return std::shared_ptr<const Servable>(load_servable(dir)); };
    listed[version] = entry.path();
  }
  if (ec) throw Unavailable("cannot list model base path " + base_path_ + ": " + ec.message());
  listed_ = std::move(listed);
  return out;
}

std::optional<WarmupRequests> FileSystemSource::warmup_requests(std::int64_t version) {
  const auto it = listed_.find(version);
  if (it == listed_.end()) return std::nullopt;
  return warmup_requests_of(it->second);
}

std::string FileSystemSource::describe() const { return "base path " + base_path_; }

std::string FileSystemSource::empty_message() const {
  return "base path " + base_path_ + " holds no version directory (<base_path>/<version number>/)";
}

}  // namespace tensorhub
