// TensorBoard's embedding projector files: projector_config.pbtxt, tensor and metadata TSVs,
// sprite PNGs; written and read back with the checks TensorBoard's projector applies.
//
// Format sources (tensorflow/tensorboard):
//   - tensorboard/plugins/projector/projector_config.proto: the ProjectorConfig message
//     (embeddings { tensor_name tensor_path metadata_path bookmarks_path tensor_shape
//     sprite { image_path single_image_dim } }), ours in
//     proto/tensorhub/projector/projector_config.proto; the file is protobuf text format.
//   - tensorboard/plugins/projector/projector_plugin.py: the plugin looks for
//     projector_config.pbtxt in every run directory (a directory holding event files), in each
//     run's plugins/projector/, and in the log directory itself (run "."); paths in the config
//     are relative to the config's directory and may not resolve outside it
//     (_rel_to_abs_asset_path); a tensor_path file is read without TensorFlow
//     (_read_tensor_tsv_file: one row per non-empty line, values separated by tabs, each
//     parsed by Python's float()).
//   - tensorboard/plugins/projector/vz_projector/data-provider.ts (parseMetadata) and data.ts:
//     in a metadata TSV, lines that are blank are skipped; the first line is a header of
//     column names if it holds a tab (so one-column metadata has no header, several-column
//     metadata must have one); the number of data rows must equal the tensor's rows. Sprite
//     images are at most 8192 x 8192 px (MAX_SPRITE_IMAGE_SIZE_PX); single_image_dim is
//     [width, height]; images fill the sprite row by row, floor(sprite width / width) per row
//     (make_sprite lays out ceil(sqrt(n)) per row, as TensorBoard's projector tutorial).
//
// Example:
//   tensorhub::ProjectorEmbedding e{.tensor_name = "embedding", .tensor_path = "embedding.tsv",
//                                   .metadata_path = "metadata.tsv"};
//   tensorhub::write_tensor_tsv(dir / "embedding.tsv", weights.data(), rows, cols);
//   tensorhub::write_metadata_tsv(dir / "metadata.tsv", {.rows = {{"king"}, {"queen"}}});
//   e.tensor_shape = {rows, cols};
//   tensorhub::write_projector_config(dir, {.embeddings = {e}});
//   auto loaded = tensorhub::read_projector(dir / "projector_config.pbtxt");  // all checked
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tensorhub {

/// The config file's name, as TensorBoard's projector plugin looks for it (metadata.py).
inline constexpr const char* kProjectorConfigFile = "projector_config.pbtxt";

/// A sprite (SpriteMetadata): a PNG grid of one small image per point.
struct ProjectorSprite {
  std::string image_path{};
  /// [width, height] of one image, in pixels.
  std::uint32_t single_image_width = 0, single_image_height = 0;
  bool operator==(const ProjectorSprite&) const = default;
};

/// One embedding of a projector config (EmbeddingInfo). Paths are relative to the config's
/// directory (or absolute inside it). Empty strings are absent fields.
struct ProjectorEmbedding {
  std::string tensor_name{};
  std::string tensor_path{};
  std::string metadata_path{};
  std::string bookmarks_path{};
  /// [rows, columns] of the tensor; empty: TensorBoard infers it from the TSV.
  std::vector<std::uint32_t> tensor_shape{};
  std::optional<ProjectorSprite> sprite{};
  bool operator==(const ProjectorEmbedding&) const = default;
};

/// A ProjectorConfig. tensorhub writes TSV tensors, never a TensorFlow checkpoint, so
/// model_checkpoint_path is only carried through when a config read has one.
struct ProjectorConfig {
  std::string model_checkpoint_path{};
  std::vector<ProjectorEmbedding> embeddings{};
  bool operator==(const ProjectorConfig&) const = default;
};

/// The config in protobuf text format, as TensorBoard's text_format.Parse reads it.
std::string projector_config_to_text(const ProjectorConfig& config);

/// Parses protobuf text format. Throws InvalidArgument "<source_name>:<line>:<column>: <what>"
/// for text that is not a ProjectorConfig (unknown field, wrong type), as TensorBoard's
/// text_format.Parse would refuse it, and for a sprite whose single_image_dim does not have 2
/// entries.
ProjectorConfig parse_projector_config(std::string_view text, const std::string& source_name);

/// Writes `dir`/projector_config.pbtxt (creating `dir`), replacing it atomically. Returns the
/// file's path. Throws Unavailable naming the path if it cannot be written.
std::filesystem::path write_projector_config(const std::filesystem::path& dir, const ProjectorConfig& config);

/// Reads and parses a projector_config.pbtxt. Throws Unavailable if it cannot be read, else as
/// parse_projector_config.
ProjectorConfig read_projector_config(const std::filesystem::path& file);

/// Resolves an asset path of a config the way TensorBoard does (_rel_to_abs_asset_path: "~"
/// expanded, relative paths joined to the config's directory, symbolic links resolved) and
/// returns it. Throws InvalidArgument "<config file>: <field> \"<path>\" resolves outside the
/// config's directory <dir>" when it leaves that directory, as TensorBoard refuses it, or
/// cannot be resolved; Unavailable when the config's own directory cannot be.
std::filesystem::path resolve_projector_path(const std::filesystem::path& config_file,
                                             const std::string& path, std::string_view field);

/// A 2-D float tensor, row-major.
struct ProjectorTensor {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> values{};  ///< rows * cols values
};

/// Writes `rows` x `cols` floats (row-major at `data`) as TSV: one line per row, values
/// separated by tabs, each as the shortest decimal text that reads back to the same float32
/// (std::to_chars: "0.1", "1e-05"). Throws InvalidArgument for rows or cols < 1, or a NaN or infinite value
/// (naming its row and column: TensorBoard's projector cannot place it); Unavailable if the
/// file cannot be written. The file is replaced atomically.
void write_tensor_tsv(const std::filesystem::path& file, const float* data, std::int64_t rows, std::int64_t cols);

/// Reads a tensor TSV as TensorBoard's _read_tensor_tsv_file does (empty lines skipped; each
/// value as Python's float() takes it: surrounding spaces allowed, "nan"/"inf" taken).
/// Throws InvalidArgument "<file>:<line>: value <k> \"<text>\" is not a number" for a value
/// that is not a number, "<file>:<line>: <n> values, but line <m> has <c>" for ragged rows,
/// "<file>: no rows" for an empty file; Unavailable if it cannot be read.
ProjectorTensor read_tensor_tsv(const std::filesystem::path& file);

/// A metadata TSV: column names and one row of labels per point. With one column the
/// column name is not written (TensorBoard's rule: a one-column file has no header; its
/// column is shown as "label"), with several it is the header line.
struct ProjectorMetadata {
  std::vector<std::string> columns{"label"};
  std::vector<std::vector<std::string>> rows{};
};

/// Writes metadata as TSV (header line only for several columns). Throws InvalidArgument
/// naming the row and column for a label holding a tab, a newline or a carriage return, a
/// one-column label that is empty or blank (TensorBoard skips blank lines, so every later
/// label would move to the wrong point), a row whose number of cells differs from the
/// number of columns, or no columns; Unavailable if the file cannot be written.
void write_metadata_tsv(const std::filesystem::path& file, const ProjectorMetadata& metadata);

/// Reads a metadata TSV by TensorBoard's rules (see the top of this file): blank lines
/// skipped, a first line with a tab is the header. Rows with fewer cells than columns are
/// padded with "" (TensorBoard shows them as missing); a row with more cells than the header
/// throws InvalidArgument "<file>:<line>: ...". Throws Unavailable if it cannot be read.
ProjectorMetadata read_metadata_tsv(const std::filesystem::path& file);

/// An 8-bit image, row-major, channels interleaved (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).
struct ProjectorImage {
  std::int64_t width = 0, height = 0;
  int channels = 1;
  std::vector<std::uint8_t> pixels{};  ///< height * width * channels
};

/// Lays `n` images of `height` x `width` x `channels` uint8 (row-major, [n, h, w, c]) out as
/// a sprite: a square grid of ceil(sqrt(n)) images per row, row by row, unused cells black
/// (transparent with an alpha channel). Throws InvalidArgument for n < 1, empty images,
/// channels outside 1..4, or a sprite wider or taller than 8192 px (TensorBoard refuses it;
/// use fewer or smaller images).
ProjectorImage make_sprite(const std::uint8_t* images, std::int64_t n, std::int64_t height,
                           std::int64_t width, int channels);

/// Writes an image as PNG (libpng; 8-bit, the channels' PNG colour type). Throws
/// InvalidArgument for a pixel buffer that does not match its size; Unavailable if the file
/// cannot be written.
void write_png(const std::filesystem::path& file, const ProjectorImage& image);

/// Reads a PNG as 8-bit pixels in the file's channels (palette images become RGB or RGBA,
/// 16-bit ones 8-bit). Throws InvalidArgument "<file>: not a PNG image (...)" for anything
/// libpng refuses, and for a PNG over 8192 px a side (TensorBoard's sprite limit), checked on
/// the header before any pixel is allocated; Unavailable if it cannot be read.
ProjectorImage read_png(const std::filesystem::path& file);

/// One embedding of a config with its files loaded and checked.
struct LoadedEmbedding {
  ProjectorEmbedding info;
  ProjectorTensor tensor;
  std::optional<ProjectorMetadata> metadata;
  std::optional<ProjectorImage> sprite;
};

/// Reads a projector config and every file it names, checked as TensorBoard's projector would
/// show them. Throws InvalidArgument naming the file (and line) for: a path that leaves the
/// config's directory; an embedding without tensor_path (tensorhub reads TSV tensors only,
/// not checkpoints); a TSV that read_tensor_tsv refuses; a tensor_shape that differs from the
/// TSV's; metadata whose number of data rows differs from the tensor's rows (the message says
/// whether a header line was taken, TensorBoard's one-column/several-columns rule); a sprite
/// without a [width, height] single_image_dim, or whose PNG holds fewer cells than the tensor
/// has rows (the projector places image i at column i % floor(W / width), row
/// i / floor(W / width)), or is larger than 8192 px. Throws
/// Unavailable (naming the file) for a file that cannot be read.
std::vector<LoadedEmbedding> read_projector(const std::filesystem::path& config_file);

}  // namespace tensorhub
