// The seed of the Projector view (tests/ui/projector.test.mjs, bench/ui_projector.mjs): projector
// runs under DIR/projector-logs, written with summary/projector.h's writers (the TensorBoard
// callback's), and three bad ones written by hand:
//   - words:  40 words x 16 dimensions in three groups (royalty, animals, colours) around
//             three centres, metadata columns "word" and "group";
//   - images: 25 points x 8 dimensions with a sprite of 25 8x8 grey images (image i: its
//             first i % 8 + 1 rows lit, brighter with i), one-column metadata;
//   - big:    10,000 points x 64 dimensions in 10 Gaussian clusters, metadata "label"
//             ("p0".."p9999") and "cluster": the size, for smoothness and the bench;
//   - bad-path:   tensor_path "../outside.tsv" (the file exists, outside the config's directory);
//   - bad-rows:   a 5-row tensor with 4 metadata rows;
//   - bad-number: a tensor TSV whose line 2 holds "abc".
// Returns {"projector": {"logdir", "words": {"run", "tensor", "tsv", "metadata"}, "images",
// "big", "bad_path", "bad_rows", "bad_number"}}.
#include <cmath>
#include <fstream>
#include <random>

#include "seed.h"
#include "tensorhub/summary/projector.h"

namespace tensorhub::testing {
namespace {

namespace fs = std::filesystem;

// A run of one embedding: tensor.tsv, metadata.tsv and projector_config.pbtxt in dir.
void write_run(const fs::path& dir, const std::string& name, const std::vector<float>& values, std::int64_t cols,
               const ProjectorMetadata& metadata, std::optional<ProjectorSprite> sprite = std::nullopt) {
  fs::create_directories(dir);
  const auto rows = static_cast<std::int64_t>(values.size()) / cols;
  write_tensor_tsv(dir / "tensor.tsv", values.data(), rows, cols);
  write_metadata_tsv(dir / "metadata.tsv", metadata);
  ProjectorEmbedding e{.tensor_name = name, .tensor_path = "tensor.tsv", .metadata_path = "metadata.tsv"};
  e.tensor_shape = {static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols)};
  e.sprite = std::move(sprite);
  write_projector_config(dir, {.embeddings = {e}});
}

Json words(const fs::path& logs) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> groups = {
      {"royalty", {"king", "queen", "prince", "princess", "monarch", "throne", "crown", "duke", "duchess", "emperor",
                   "empress", "royal", "kingdom"}},
      {"animal", {"dog", "cat", "horse", "cow", "sheep", "goat", "lion", "tiger", "wolf", "fox", "bear", "mouse", "rabbit"}},
      {"colour", {"red", "green", "blue", "yellow", "purple", "orange", "black", "white", "grey", "pink", "brown", "violet",
                  "cyan", "magenta"}}};
  std::mt19937 rng(21);
  std::normal_distribution<float> noise(0, 0.35f);
  std::vector<float> values;
  ProjectorMetadata m{.columns = {"word", "group"}};
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (const auto& w : groups[g].second) {
      for (int k = 0; k < 16; ++k) values.push_back((k % 3 == static_cast<int>(g) ? 1.5f : 0.0f) + noise(rng));
      m.rows.push_back({w, groups[g].first});
    }
  const fs::path dir = logs / "words";
  write_run(dir, "word_embedding", values, 16, m);
  return {{"run", "words"}, {"tensor", "word_embedding"}, {"tsv", (dir / "tensor.tsv").string()},
          {"rows", m.rows.size()}, {"cols", 16}};
}

Json images(const fs::path& logs) {
  constexpr int n = 25, side = 8;
  std::vector<std::uint8_t> pixels(n * side * side, 0);
  std::vector<float> values;
  ProjectorMetadata m;
  for (int i = 0; i < n; ++i) {
    // Image i: its first (i % 8) + 1 rows lit, at a brightness that grows with i.
    for (int y = 0; y <= i % side; ++y)
      for (int x = 0; x < side; ++x) pixels[(i * side + y) * side + x] = static_cast<std::uint8_t>(80 + 7 * i);
    for (int k = 0; k < 8; ++k) values.push_back(static_cast<float>(std::sin(0.3 * i + k)));
    m.rows.push_back({"img" + std::to_string(i)});
  }
  const fs::path dir = logs / "images";
  fs::create_directories(dir);
  write_png(dir / "sprite.png", make_sprite(pixels.data(), n, side, side, 1));
  write_run(dir, "images", values, 8, m, ProjectorSprite{.image_path = "sprite.png", .single_image_width = side,
                                                         .single_image_height = side});
  return {{"run", "images"}, {"rows", n}, {"single_image_dim", {side, side}}, {"sprite", (dir / "sprite.png").string()}};
}

Json big(const fs::path& logs) {
  constexpr int n = 10000, d = 64, clusters = 10;
  std::mt19937 rng(4);
  std::normal_distribution<float> z(0, 1);
  std::vector<float> centres(clusters * d);
  for (auto& c : centres) c = 3 * z(rng);
  std::vector<float> values;
  values.reserve(n * d);
  ProjectorMetadata m{.columns = {"label", "cluster"}};
  for (int i = 0; i < n; ++i) {
    const int c = i % clusters;
    for (int k = 0; k < d; ++k) values.push_back(centres[c * d + k] + z(rng));
    m.rows.push_back({"p" + std::to_string(i), "c" + std::to_string(c)});
  }
  const fs::path dir = logs / "big";
  write_run(dir, "big", values, d, m);
  return {{"run", "big"}, {"rows", n}, {"cols", d}, {"tsv", (dir / "tensor.tsv").string()}};
}

void write_file(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

std::string config_text(const std::string& tensor_path, const std::string& metadata_path = "") {
  return "embeddings {\n  tensor_name: \"bad\"\n  tensor_path: \"" + tensor_path + "\"\n" +
         (metadata_path.empty() ? "" : "  metadata_path: \"" + metadata_path + "\"\n") + "}\n";
}

Json bad_runs(const fs::path& logs) {
  write_file(logs / "outside.tsv", "1\t2\n3\t4\n");
  write_file(logs / "bad-path" / kProjectorConfigFile, config_text("../outside.tsv"));
  write_file(logs / "bad-rows" / "tensor.tsv", "1\t2\n3\t4\n5\t6\n7\t8\n9\t10\n");
  write_file(logs / "bad-rows" / "metadata.tsv", "a\nb\nc\nd\n");
  write_file(logs / "bad-rows" / kProjectorConfigFile, config_text("tensor.tsv", "metadata.tsv"));
  write_file(logs / "bad-number" / "tensor.tsv", "0.5\t1\t2\n0.25\tabc\t3\n");
  write_file(logs / "bad-number" / kProjectorConfigFile, config_text("tensor.tsv"));
  return {{"bad_path", "bad-path"}, {"bad_rows", "bad-rows"}, {"bad_number", "bad-number"}};
}

}  // namespace

Json seed_projector(Hub&, const fs::path& dir) {
  const fs::path logs = dir / "projector-logs";
  Json facts = {{"logdir", logs.string()}, {"words", words(logs)}, {"images", images(logs)}, {"big", big(logs)}};
  facts.update(bad_runs(logs));
  return {{"projector", facts}};
}

}  // namespace tensorhub::testing
