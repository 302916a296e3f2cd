// The Projector view's JSON API (`tensorhub ui --logdir DIR`, under /api/projector): the
// embeddings of TensorBoard projector configs found under DIR, read and checked by
// summary/projector.h (read_projector: paths that leave the config's directory, tensor rows
// that disagree with the metadata, a TSV value that is not a number, ... are refused with a
// message naming the file and line, which the page shows as it is).
//
// A projector run is a directory at or below DIR (symbolic links not followed) that directly
// holds projector_config.pbtxt, named by its path relative to DIR with '/' separators ("."
// for DIR itself); TensorBoard's projector plugin looks in run directories, their
// plugins/projector/ and DIR, all of which this covers. Only files a listed config names, as
// resolve_projector_path allows them, are ever read.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/core/json.h"
#include "tensorhub/summary/projector.h"

namespace tensorhub {

/// The projector runs under `logdir`, sorted (see above). Throws NotFound if `logdir` is not
/// a directory.
std::vector<std::string> find_projector_runs(const std::filesystem::path& logdir);

/// A run's embeddings read once and kept while the config and the files it names are
/// unchanged (same sizes and modification times). Thread-safe.
class ProjectorCache {
 public:
  ProjectorCache();
  ~ProjectorCache();
  /// The embeddings of `run` under `logdir` (read_projector's checks, and every tensor value
  /// finite). Throws NotFound for no --logdir or a run find_projector_runs does not list,
  /// InvalidArgument with read_projector's message for bad files, Unavailable for unreadable
  /// ones.
  std::shared_ptr<const std::vector<LoadedEmbedding>> get(const std::filesystem::path& logdir, const std::string& run);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// GET /api/projector: {"logdir": DIR | null, "runs": [{"run", "embeddings": [{"tensor_name",
/// "tensor_shape": [rows, cols] (as the config says; [] when it says nothing)}], "error": null |
/// why the config itself does not parse}]}. Only the configs are read here, not the tensors.
/// Throws NotFound if `logdir` is given but is not a directory.
Json projector_runs_json(const std::filesystem::path& logdir);

/// The embedding of a run by tensor_name ("" or absent: the first), or NotFound naming the
/// names there are.
const LoadedEmbedding& find_embedding(const std::vector<LoadedEmbedding>& embeddings, const std::string& tensor);

/// GET /api/projector/embedding?run=&tensor=: what the page needs besides the numbers,
///   {"run", "tensor_name", "embeddings": [names in the run], "rows", "cols",
///    "metadata": null | {"columns": [...], "rows": [[...] per point]},
///    "sprite": null | {"width", "height", "single_image_dim": [width, height]}}
/// tensor_name: the config's, else "embeddings[i]" by position.
Json projector_embedding_json(const std::string& run, const std::vector<LoadedEmbedding>& embeddings,
                              const LoadedEmbedding& embedding);

/// GET /api/projector/tensor?run=&tensor=: rows * cols little-endian float32, row-major.
std::string projector_tensor_bytes(const LoadedEmbedding& embedding);

/// GET /api/projector/sprite?run=&tensor=: the sprite PNG's path (checked by read_projector;
/// the server sends the file's bytes). Throws NotFound when the embedding has no sprite.
std::filesystem::path projector_sprite_path(const std::filesystem::path& logdir, const std::string& run,
                                            const LoadedEmbedding& embedding);

}  // namespace tensorhub
