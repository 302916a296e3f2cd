// The Projector view's API (projector_api.h) over summary/projector.h's reader.
#include "projector_api.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/summary/event_file_reader.h"

namespace tensorhub {

namespace fs = std::filesystem;

std::vector<std::string> find_projector_runs(const fs::path& logdir) {
  std::error_code ec;
  if (!fs::is_directory(logdir, ec)) throw NotFound("--logdir " + logdir.string() + " is not a directory");
  std::vector<std::string> runs;
  if (fs::is_regular_file(logdir / kProjectorConfigFile, ec)) runs.push_back(".");
  // Symbolic links are not followed: a run is always a directory inside DIR.
  for (auto it = fs::recursive_directory_iterator(logdir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink(ec) || !it->is_directory(ec)) continue;
    if (fs::is_regular_file(it->path() / kProjectorConfigFile, ec))
      runs.push_back(it->path().lexically_relative(logdir).generic_string());
  }
  std::sort(runs.begin(), runs.end());
  return runs;
}

namespace {

fs::path run_config(const fs::path& logdir, const std::string& run) {
  if (logdir.empty()) throw NotFound("no projector runs: start tensorhub ui with --logdir DIR");
  const auto runs = find_projector_runs(logdir);
  if (std::find(runs.begin(), runs.end(), run) == runs.end())
    throw NotFound("no projector run '" + run + "' under " + logdir.string() + " (a directory holding " +
                   kProjectorConfigFile + ")");
  return run_directory(logdir, run) / kProjectorConfigFile;
}

using Stamp = std::vector<std::tuple<std::string, std::uintmax_t, fs::file_time_type>>;

// Sizes and times of the config and of every file it names that can be resolved; a config
// that does not parse has no stamp (read_projector then throws its error).
Stamp stamp_of(const fs::path& config) {
  std::error_code ec;
  Stamp stamp;
  const auto add = [&](const fs::path& p) {
    stamp.emplace_back(p.string(), fs::file_size(p, ec), fs::last_write_time(p, ec));
  };
  add(config);
  try {
    for (const auto& e : read_projector_config(config).embeddings)
      for (const std::string* path : {&e.tensor_path, &e.metadata_path, e.sprite ? &e.sprite->image_path : nullptr})
        if (path && !path->empty()) add(resolve_projector_path(config, *path, "path"));
  } catch (const Error&) {
    return {};
  }
  return stamp;
}

// read_projector accepts "nan" and "inf" (Python's float() does); a point there cannot be
// placed, so the page is told where it is.
void check_finite(const fs::path& config, const std::vector<LoadedEmbedding>& embeddings) {
  for (const auto& e : embeddings) {
    const auto& t = e.tensor;
    for (std::size_t i = 0; i < t.values.size(); ++i)
      if (!std::isfinite(t.values[i]))
        throw InvalidArgument(config.string() + ": " + e.info.tensor_path + " row " +
                              std::to_string(i / static_cast<std::size_t>(t.cols) + 1) + ", value " +
                              std::to_string(i % static_cast<std::size_t>(t.cols) + 1) +
                              " is not finite; the projector cannot place that point");
  }
}

std::string embedding_name(const std::vector<LoadedEmbedding>& all, const LoadedEmbedding& e) {
  if (!e.info.tensor_name.empty()) return e.info.tensor_name;
  return "embeddings[" + std::to_string(&e - all.data()) + "]";
}

}  // namespace

struct ProjectorCache::Impl {
  struct Entry {
    Stamp stamp;
    std::shared_ptr<const std::vector<LoadedEmbedding>> embeddings;
  };
  Mutex mutex;
  std::map<fs::path, Entry> entries TENSORHUB_GUARDED_BY(mutex);
};

ProjectorCache::ProjectorCache() : impl_(std::make_unique<Impl>()) {}
ProjectorCache::~ProjectorCache() = default;

std::shared_ptr<const std::vector<LoadedEmbedding>> ProjectorCache::get(const fs::path& logdir, const std::string& run) {
  const fs::path config = run_config(logdir, run);
  Stamp stamp = stamp_of(config);
  // Read under the lock: the page asks for the embedding and its tensor at once, and one
  // 10,000 x 64 TSV is read once, not twice side by side.
  MutexLock lock(impl_->mutex);
  const auto it = impl_->entries.find(config);
  if (!stamp.empty() && it != impl_->entries.end() && it->second.stamp == stamp) return it->second.embeddings;
  auto embeddings = std::make_shared<const std::vector<LoadedEmbedding>>(read_projector(config));
  check_finite(config, *embeddings);
  if (embeddings->empty()) throw InvalidArgument(config.string() + " names no embeddings");
  if (!stamp.empty()) impl_->entries[config] = {std::move(stamp), embeddings};
  return embeddings;
}

Json projector_runs_json(const fs::path& logdir) {
  Json runs = Json::array();
  if (!logdir.empty())
    for (const auto& run : find_projector_runs(logdir)) {
      Json row = {{"run", run}, {"embeddings", Json::array()}, {"error", nullptr}};
      try {
        const auto config = read_projector_config(run_directory(logdir, run) / kProjectorConfigFile);
        for (std::size_t i = 0; i < config.embeddings.size(); ++i) {
          const auto& e = config.embeddings[i];
          row["embeddings"].push_back({{"tensor_name", e.tensor_name.empty() ? "embeddings[" + std::to_string(i) + "]" : e.tensor_name},
                                       {"tensor_shape", e.tensor_shape}});
        }
      } catch (const Error& e) {
        row["error"] = e.message();
      }
      runs.push_back(std::move(row));
    }
  return {{"logdir", logdir.empty() ? Json(nullptr) : Json(logdir.string())}, {"runs", std::move(runs)}};
}

const LoadedEmbedding& find_embedding(const std::vector<LoadedEmbedding>& embeddings, const std::string& tensor) {
  if (tensor.empty()) return embeddings.front();
  std::string names;
  for (const auto& e : embeddings) {
    const std::string name = embedding_name(embeddings, e);
    if (name == tensor) return e;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw NotFound("no embedding '" + tensor + "' in this run; it has " + names);
}

Json projector_embedding_json(const std::string& run, const std::vector<LoadedEmbedding>& embeddings,
                              const LoadedEmbedding& e) {
  Json names = Json::array();
  for (const auto& other : embeddings) names.push_back(embedding_name(embeddings, other));
  Json metadata = nullptr, sprite = nullptr;
  if (e.metadata) metadata = {{"columns", e.metadata->columns}, {"rows", e.metadata->rows}};
  if (e.sprite && e.info.sprite)
    sprite = {{"width", e.sprite->width}, {"height", e.sprite->height},
              {"single_image_dim", {e.info.sprite->single_image_width, e.info.sprite->single_image_height}}};
  return {{"run", run}, {"tensor_name", embedding_name(embeddings, e)}, {"embeddings", names},
          {"rows", e.tensor.rows}, {"cols", e.tensor.cols}, {"metadata", metadata}, {"sprite", sprite}};
}

std::string projector_tensor_bytes(const LoadedEmbedding& e) {
  static_assert(std::endian::native == std::endian::little, "float32 leave as the machine holds them: little-endian");
  std::string bytes(e.tensor.values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), e.tensor.values.data(), bytes.size());
  return bytes;
}

fs::path projector_sprite_path(const fs::path& logdir, const std::string& run, const LoadedEmbedding& e) {
  if (!e.info.sprite || e.info.sprite->image_path.empty()) throw NotFound("this embedding has no sprite");
  const fs::path config = run_config(logdir, run);
  return resolve_projector_path(config, e.info.sprite->image_path, "sprite.image_path");
}

}  // namespace tensorhub
