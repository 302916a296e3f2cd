// TensorBoard projector files (projector.h): config text format through protobuf's TextFormat
// on our copy of projector_config.proto, TSVs by hand, PNGs with libpng's simplified API.
#include "tensorhub/summary/projector.h"

#include <png.h>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/projector/projector_config.pb.h"

namespace tensorhub {

namespace fs = std::filesystem;
namespace ppb = ::tensorhub::projector;  // generated from proto/tensorhub/projector

namespace {

// TensorBoard's MAX_SPRITE_IMAGE_SIZE_PX (vz_projector/data-provider.ts).
constexpr std::int64_t kMaxSpritePx = 8192;

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string read_text(const fs::path& file) {
  const std::vector<std::byte> bytes = read_file_bytes(file);  // Unavailable naming the path
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_text(const fs::path& file, const std::string& text) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  if (ec) throw Unavailable("cannot create directory " + file.parent_path().string() + ": " + ec.message());
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  write_file_bytes(file, std::vector<std::byte>(p, p + text.size()));
}

// Lines of a text file, without their "\n" (and a "\r" before it), numbered from 1.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    cells.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return cells;
    start = tab + 1;
  }
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// Python's float(): optional surrounding whitespace, decimal or "nan"/"inf"/"infinity" (any
// case, signed), underscores between digits aside (not written by anyone here).
bool parse_python_float(const std::string& cell, float& out) {
  const std::size_t b = cell.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string::npos) return false;
  const std::size_t e = cell.find_last_not_of(" \t\r\n\f\v");
  const std::string s = cell.substr(b, e - b + 1);
  if (s.find_first_of("xXpP") != std::string::npos) return false;  // strtod's hex floats
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  out = static_cast<float>(v);  // numpy casts the float64 to float32 the same way
  return true;
}

ProjectorEmbedding from_proto(const ppb::EmbeddingInfo& e) {
  ProjectorEmbedding out;
  out.tensor_name = e.tensor_name();
  out.tensor_path = e.tensor_path();
  out.metadata_path = e.metadata_path();
  out.bookmarks_path = e.bookmarks_path();
  out.tensor_shape.assign(e.tensor_shape().begin(), e.tensor_shape().end());
  if (e.has_sprite()) {
    ProjectorSprite s;
    s.image_path = e.sprite().image_path();
    if (e.sprite().single_image_dim_size() >= 1) s.single_image_width = e.sprite().single_image_dim(0);
    if (e.sprite().single_image_dim_size() >= 2) s.single_image_height = e.sprite().single_image_dim(1);
    out.sprite = s;
  }
  return out;
}

// Collects protobuf's text-format errors as "<line>:<column>: <message>" (1-based).
class TextErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

// ---- config ----------------------------------------------------------------------------------

std::string projector_config_to_text(const ProjectorConfig& config) {
  ppb::ProjectorConfig pb;
  pb.set_model_checkpoint_path(config.model_checkpoint_path);
  for (const ProjectorEmbedding& e : config.embeddings) {
    ppb::EmbeddingInfo* info = pb.add_embeddings();
    info->set_tensor_name(e.tensor_name);
    info->set_tensor_path(e.tensor_path);
    info->set_metadata_path(e.metadata_path);
    info->set_bookmarks_path(e.bookmarks_path);
    for (std::uint32_t d : e.tensor_shape) info->add_tensor_shape(d);
    if (e.sprite) {
      info->mutable_sprite()->set_image_path(e.sprite->image_path);
      info->mutable_sprite()->add_single_image_dim(e.sprite->single_image_width);
      info->mutable_sprite()->add_single_image_dim(e.sprite->single_image_height);
    }
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(pb, &text);
  return text;
}

ProjectorConfig parse_projector_config(std::string_view text, const std::string& source_name) {
  ppb::ProjectorConfig pb;
  TextErrors errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &pb))
    throw InvalidArgument(source_name + ":" + (errors.first().empty() ? " not a ProjectorConfig" : errors.first()) +
                          " (TensorBoard's projector_config.pbtxt is protobuf text format of "
                          "ProjectorConfig: embeddings { tensor_name tensor_path metadata_path "
                          "tensor_shape sprite { image_path single_image_dim } })");
  ProjectorConfig out;
  out.model_checkpoint_path = pb.model_checkpoint_path();
  for (int i = 0; i < pb.embeddings_size(); ++i) {
    const auto& e = pb.embeddings(i);
    if (e.has_sprite() && e.sprite().single_image_dim_size() != 2)
      throw InvalidArgument(source_name + ": embeddings[" + std::to_string(i) + "] (" + e.tensor_name() +
                            ") sprite.single_image_dim has " + std::to_string(e.sprite().single_image_dim_size()) +
                            " entries; it must be [width, height]");
    out.embeddings.push_back(from_proto(e));
  }
  return out;
}

fs::path write_projector_config(const fs::path& dir, const ProjectorConfig& config) {
  const fs::path file = dir / kProjectorConfigFile;
  write_text(file, projector_config_to_text(config));
  return file;
}

ProjectorConfig read_projector_config(const fs::path& file) {
  return parse_projector_config(read_text(file), file.string());
}

fs::path resolve_projector_path(const fs::path& config_file, const std::string& path, std::string_view field) {
  std::error_code ec;
  const fs::path config_dir = fs::weakly_canonical(fs::absolute(config_file).parent_path(), ec);
  // An empty config_dir would let every path pass the check below: refuse instead.
  if (ec || config_dir.empty())
    throw Unavailable(config_file.string() + ": cannot resolve the config's directory" + (ec ? ": " + ec.message() : ""));
  std::string expanded = path;
  if ((expanded == "~" || expanded.rfind("~/", 0) == 0) && std::getenv("HOME"))
    expanded = std::string(std::getenv("HOME")) + expanded.substr(1);
  fs::path candidate = expanded;
  if (candidate.is_relative()) candidate = config_dir / candidate;
  candidate = fs::weakly_canonical(candidate, ec);
  if (ec) throw InvalidArgument(config_file.string() + ": " + std::string(field) + " " + in_quotes(path) +
                                " cannot be resolved: " + ec.message());
  // commonpath(config_dir, candidate) == config_dir: every component of the directory leads.
  auto c = candidate.begin();
  for (auto d = config_dir.begin(); d != config_dir.end(); ++d, ++c) {
    if (c == candidate.end() || *c != *d)
      throw InvalidArgument(config_file.string() + ": " + std::string(field) + " " + in_quotes(path) +
                            " resolves outside the config's directory " + config_dir.string() +
                            " (TensorBoard refuses such paths); keep the file beside the config");
  }
  return candidate;
}

// ---- tensor TSV ------------------------------------------------------------------------------

void write_tensor_tsv(const fs::path& file, const float* data, std::int64_t rows, std::int64_t cols) {
  if (rows < 1 || cols < 1 || data == nullptr)
    throw InvalidArgument("tensor TSV " + file.string() + ": needs at least one row and one column, got " +
                          std::to_string(rows) + " x " + std::to_string(cols));
  std::string text;
  text.reserve(static_cast<std::size_t>(rows * cols) * 12);
  char buf[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = data[r * cols + c];
      if (!std::isfinite(v))
        throw InvalidArgument("tensor TSV " + file.string() + ": row " + std::to_string(r) + ", column " +
                              std::to_string(c) + " is " + std::to_string(v) +
                              "; the projector cannot place a point with a NaN or infinite value");
      // The shortest text that reads back as the same float32 (std::to_chars' guarantee); about
      // 10x faster than printf's "%.9g", which dominated `tensorhub embed` of 10,000 x 800.
      const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
      if (c > 0) text += '\t';
      text.append(buf, end);
    }
    text += '\n';
  }
  write_text(file, text);
}

ProjectorTensor read_tensor_tsv(const fs::path& file) {
  const std::vector<std::string> lines = lines_of(read_text(file));
  ProjectorTensor t;
  std::size_t first_line = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // TensorBoard skips only truly empty lines
    const std::vector<std::string> cells = split_tabs(lines[i]);
    const std::string where = file.string() + ":" + std::to_string(i + 1);
    if (t.rows == 0) {
      t.cols = static_cast<std::int64_t>(cells.size());
      first_line = i + 1;
    } else if (static_cast<std::int64_t>(cells.size()) != t.cols) {
      throw InvalidArgument(where + ": " + std::to_string(cells.size()) + " values, but line " +
                            std::to_string(first_line) + " has " + std::to_string(t.cols) +
                            " (a tensor TSV has the same number of tab-separated values on every line)");
    }
    for (std::size_t k = 0; k < cells.size(); ++k) {
      float v = 0;
      if (!parse_python_float(cells[k], v))
        throw InvalidArgument(where + ": value " + std::to_string(k + 1) + " " + in_quotes(cells[k]) +
                              " is not a number (a tensor TSV holds only numbers, separated by tabs)");
      t.values.push_back(v);
    }
    ++t.rows;
  }
  if (t.rows == 0) throw InvalidArgument(file.string() + ": no rows (an empty tensor TSV)");
  return t;
}

// ---- metadata TSV ----------------------------------------------------------------------------

void write_metadata_tsv(const fs::path& file, const ProjectorMetadata& metadata) {
  const std::size_t ncols = metadata.columns.size();
  if (ncols == 0) throw InvalidArgument("metadata TSV " + file.string() + ": no columns");
  auto check = [&](const std::string& cell, const std::string& where) {
    if (cell.find_first_of("\t\n\r") != std::string::npos)
      throw InvalidArgument("metadata TSV " + file.string() + ": " + where + " " + in_quotes(cell) +
                            " holds a tab or a line break, which would split it; replace them");
  };
  std::string text;
  if (ncols > 1) {
    for (std::size_t c = 0; c < ncols; ++c) {
      check(metadata.columns[c], "column name " + std::to_string(c));
      text += (c ? "\t" : "") + metadata.columns[c];
    }
    text += '\n';
  }
  for (std::size_t r = 0; r < metadata.rows.size(); ++r) {
    const auto& row = metadata.rows[r];
    if (row.size() != ncols)
      throw InvalidArgument("metadata TSV " + file.string() + ": row " + std::to_string(r) + " has " +
                            std::to_string(row.size()) + " cells for " + std::to_string(ncols) + " columns");
    for (std::size_t c = 0; c < ncols; ++c) {
      check(row[c], "row " + std::to_string(r) + " column " + std::to_string(c));
      if (ncols == 1 && is_blank(row[c]))
        throw InvalidArgument("metadata TSV " + file.string() + ": row " + std::to_string(r) +
                              " has an empty label; TensorBoard skips blank lines, so every later label "
                              "would belong to the wrong point; give it a name (e.g. \"<pad>\")");
      text += (c ? "\t" : "") + row[c];
    }
    text += '\n';
  }
  write_text(file, text);
}

ProjectorMetadata read_metadata_tsv(const fs::path& file) {
  const std::vector<std::string> lines = lines_of(read_text(file));
  ProjectorMetadata m;
  bool first = true;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (is_blank(lines[i])) continue;  // parseMetadata: line.trim().length === 0
    std::vector<std::string> cells = split_tabs(lines[i]);
    if (first) {
      first = false;
      if (cells.size() > 1) {  // a tab in the first line: it is the header
        m.columns = std::move(cells);
        continue;
      }
    }
    if (cells.size() > m.columns.size())
      throw InvalidArgument(file.string() + ":" + std::to_string(i + 1) + ": " + std::to_string(cells.size()) +
                            " cells, but the metadata has " + std::to_string(m.columns.size()) +
                            (m.columns.size() == 1 ? " column (no header line: the first line has no tab)"
                                                   : " columns in its header line"));
    cells.resize(m.columns.size());
    m.rows.push_back(std::move(cells));
  }
  return m;
}

// ---- sprites ---------------------------------------------------------------------------------

ProjectorImage make_sprite(const std::uint8_t* images, std::int64_t n, std::int64_t height, std::int64_t width,
                           int channels) {
  if (n < 1 || height < 1 || width < 1 || images == nullptr)
    throw InvalidArgument("sprite: needs at least one image of at least 1 x 1 px, got " + std::to_string(n) +
                          " of " + std::to_string(height) + " x " + std::to_string(width));
  if (channels < 1 || channels > 4)
    throw InvalidArgument("sprite: images have " + std::to_string(channels) +
                          " channels; give 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA)");
  const auto per_row = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const std::int64_t grid_rows = (n + per_row - 1) / per_row;
  ProjectorImage s;
  s.width = per_row * width;
  s.height = grid_rows * height;
  s.channels = channels;
  if (s.width > kMaxSpritePx || s.height > kMaxSpritePx)
    throw InvalidArgument("sprite: " + std::to_string(n) + " images of " + std::to_string(width) + " x " +
                          std::to_string(height) + " px make a " + std::to_string(s.width) + " x " +
                          std::to_string(s.height) + " px sprite; TensorBoard's projector takes at most " +
                          std::to_string(kMaxSpritePx) + " px a side: use fewer or smaller images");
  s.pixels.assign(static_cast<std::size_t>(s.width * s.height * channels), 0);
  const std::size_t row_bytes = static_cast<std::size_t>(width * channels);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t x0 = (i % per_row) * width, y0 = (i / per_row) * height;
    for (std::int64_t y = 0; y < height; ++y)
      std::memcpy(&s.pixels[static_cast<std::size_t>(((y0 + y) * s.width + x0) * channels)],
                  images + static_cast<std::size_t>((i * height + y) * width * channels), row_bytes);
  }
  return s;
}

namespace {

png_uint_32 png_format(int channels) {
  switch (channels) {
    case 1: return PNG_FORMAT_GRAY;
    case 2: return PNG_FORMAT_GA;
    case 3: return PNG_FORMAT_RGB;
    default: return PNG_FORMAT_RGBA;
  }
}

}  // namespace

void write_png(const fs::path& file, const ProjectorImage& image) {
  if (image.channels < 1 || image.channels > 4 || image.width < 1 || image.height < 1 ||
      image.pixels.size() != static_cast<std::size_t>(image.width * image.height * image.channels))
    throw InvalidArgument("PNG " + file.string() + ": " + std::to_string(image.pixels.size()) +
                          " bytes of pixels do not make a " + std::to_string(image.width) + " x " +
                          std::to_string(image.height) + " image of " + std::to_string(image.channels) +
                          " channels");
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = png_format(image.channels);
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr))
    throw Internal("PNG " + file.string() + ": libpng: " + png.message);
  std::vector<std::byte> bytes(size);
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, image.pixels.data(), 0, nullptr))
    throw Internal("PNG " + file.string() + ": libpng: " + png.message);
  bytes.resize(size);
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  write_file_bytes(file, bytes);
}

ProjectorImage read_png(const fs::path& file) {
  const std::vector<std::byte> bytes = read_file_bytes(file);
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()))
    throw InvalidArgument(file.string() + ": not a PNG image (libpng: " + png.message + ")");
  // Before allocating width * height * channels bytes: the header alone can claim 4 GiB a
  // side, and TensorBoard takes no sprite above kMaxSpritePx a side anyway.
  if (png.width > kMaxSpritePx || png.height > kMaxSpritePx) {
    png_image_free(&png);
    throw InvalidArgument(file.string() + ": a PNG of " + std::to_string(png.width) + " x " +
                          std::to_string(png.height) + " px; TensorBoard's projector takes at most " +
                          std::to_string(kMaxSpritePx) + " px a side (a sprite), and so does tensorhub");
  }
  const bool alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0, color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
  ProjectorImage out;
  out.channels = (color ? 3 : 1) + (alpha ? 1 : 0);
  png.format = png_format(out.channels);  // 8 bits, no palette
  out.width = png.width;
  out.height = png.height;
  out.pixels.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, out.pixels.data(), 0, nullptr)) {
    png_image_free(&png);
    throw InvalidArgument(file.string() + ": not a PNG image (libpng: " + png.message + ")");
  }
  return out;
}

// ---- whole config ----------------------------------------------------------------------------

namespace {

std::string embedding_name(const ProjectorEmbedding& e, std::size_t i) {
  return "embeddings[" + std::to_string(i) + "]" + (e.tensor_name.empty() ? "" : " (" + e.tensor_name + ")");
}

void check_metadata_rows(const fs::path& path, const ProjectorMetadata& m, std::int64_t rows) {
  if (static_cast<std::int64_t>(m.rows.size()) == rows) return;
  std::string why = m.columns.size() > 1
                        ? "its first line has a tab, so it was taken as a header of " +
                              std::to_string(m.columns.size()) + " column names"
                        : "its first line has no tab, so there is no header line (one label per line)";
  throw InvalidArgument(path.string() + ": " + std::to_string(m.rows.size()) + " metadata rows, but the tensor has " +
                        std::to_string(rows) + " rows; " + why +
                        " (TensorBoard's rule; blank lines are skipped). One row per point, in the tensor's order");
}

void check_sprite(const fs::path& path, const ProjectorSprite& s, const ProjectorImage& img, std::int64_t rows) {
  if (s.single_image_width == 0 || s.single_image_height == 0)
    throw InvalidArgument(path.string() + ": the sprite needs single_image_dim [width, height], both positive");
  if (img.width > kMaxSpritePx || img.height > kMaxSpritePx)
    throw InvalidArgument(path.string() + ": the sprite is " + std::to_string(img.width) + " x " +
                          std::to_string(img.height) + " px; TensorBoard's projector takes at most " +
                          std::to_string(kMaxSpritePx) + " px a side");
  const std::int64_t per_row = img.width / s.single_image_width, grid_rows = img.height / s.single_image_height;
  if (per_row * grid_rows < rows)
    throw InvalidArgument(path.string() + ": the sprite of " + std::to_string(img.width) + " x " +
                          std::to_string(img.height) + " px holds " + std::to_string(per_row * grid_rows) +
                          " images of " + std::to_string(s.single_image_width) + " x " +
                          std::to_string(s.single_image_height) + " px, but the tensor has " + std::to_string(rows) +
                          " rows");
}

LoadedEmbedding load_embedding(const fs::path& config_file, const ProjectorEmbedding& e, std::size_t i) {
  const std::string name = embedding_name(e, i);
  if (e.tensor_path.empty())
    throw InvalidArgument(config_file.string() + ": " + name +
                          " has no tensor_path; tensorhub reads TSV tensors, not TensorFlow checkpoints");
  LoadedEmbedding out;
  out.info = e;
  out.tensor = read_tensor_tsv(resolve_projector_path(config_file, e.tensor_path, name + ".tensor_path"));
  if (!e.tensor_shape.empty() &&
      (e.tensor_shape.size() != 2 || e.tensor_shape[0] != out.tensor.rows || e.tensor_shape[1] != out.tensor.cols))
    throw InvalidArgument(config_file.string() + ": " + name + ".tensor_shape does not match " + e.tensor_path +
                          ", which holds " + std::to_string(out.tensor.rows) + " x " +
                          std::to_string(out.tensor.cols) + " values");
  if (!e.metadata_path.empty()) {
    const fs::path p = resolve_projector_path(config_file, e.metadata_path, name + ".metadata_path");
    out.metadata = read_metadata_tsv(p);
    check_metadata_rows(p, *out.metadata, out.tensor.rows);
  }
  if (e.sprite) {
    const fs::path p = resolve_projector_path(config_file, e.sprite->image_path, name + ".sprite.image_path");
    out.sprite = read_png(p);
    check_sprite(p, *e.sprite, *out.sprite, out.tensor.rows);
  }
  if (!e.bookmarks_path.empty()) resolve_projector_path(config_file, e.bookmarks_path, name + ".bookmarks_path");
  return out;
}

}  // namespace

std::vector<LoadedEmbedding> read_projector(const fs::path& config_file) {
  const ProjectorConfig config = read_projector_config(config_file);
  std::vector<LoadedEmbedding> out;
  for (std::size_t i = 0; i < config.embeddings.size(); ++i)
    out.push_back(load_embedding(config_file, config.embeddings[i], i));
  return out;
}

}  // namespace tensorhub
