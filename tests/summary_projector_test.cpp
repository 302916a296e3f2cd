// Projector files (projector.h): the config's text format against the text TensorBoard's
// projector tutorial shows, TSVs read back, the sprite PNG decoded independently by a few lines
// of Python (zlib and PNG's filters by hand), and every bad input read_projector must refuse
// with the file and line named. tests/python/test_tensorboard.py has real TensorBoard read
// what the TensorBoard callback writes.
#include "tensorhub/summary/projector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "tensorhub/core/error.h"
#include "test_util.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Projector, ConfigTextIsTensorBoards) {
  ProjectorConfig c;
  ProjectorEmbedding e{.tensor_name = "embedding", .tensor_path = "embedding.tsv", .metadata_path = "metadata.tsv"};
  e.tensor_shape = {3, 2};
  e.sprite = ProjectorSprite{.image_path = "sprite.png", .single_image_width = 28, .single_image_height = 28};
  c.embeddings.push_back(e);
  const std::string text = projector_config_to_text(c);
  // The fields and nesting of TensorBoard's projector tutorial (protobuf text format).
  EXPECT_EQ(text,
            "embeddings {\n"
            "  tensor_name: \"embedding\"\n"
            "  metadata_path: \"metadata.tsv\"\n"
            "  tensor_shape: 3\n"
            "  tensor_shape: 2\n"
            "  sprite {\n"
            "    image_path: \"sprite.png\"\n"
            "    single_image_dim: 28\n"
            "    single_image_dim: 28\n"
            "  }\n"
            "  tensor_path: \"embedding.tsv\"\n"
            "}\n");
  EXPECT_EQ(parse_projector_config(text, "x"), c);
  // What people write by hand parses too: one line, the short list syntax.
  const ProjectorConfig hand = parse_projector_config(
      "embeddings { tensor_name: 'w' tensor_path: 'w.tsv' tensor_shape: [4, 5] }", "hand");
  ASSERT_EQ(hand.embeddings.size(), 1u);
  EXPECT_EQ(hand.embeddings[0].tensor_path, "w.tsv");
  EXPECT_EQ(hand.embeddings[0].tensor_shape, (std::vector<std::uint32_t>{4, 5}));
}

TEST(Projector, ConfigErrorsNameFileLineAndColumn) {
  testing::expect_error([] { parse_projector_config("embeddings {\n  tensor_nam: \"x\"\n}\n", "c.pbtxt"); },
                        ErrorKind::kInvalidArgument, {"c.pbtxt:2:", "tensor_nam"});
  testing::expect_error(
      [] { parse_projector_config("embeddings { sprite { image_path: 's.png' single_image_dim: 28 } }", "c"); },
      ErrorKind::kInvalidArgument, {"single_image_dim has 1 entries", "[width, height]"});
}

TEST(Projector, TensorTsvRoundTripsFloat32) {
  testing::TempDir dir;
  const std::vector<float> v = {0.1f, -2.5e-8f, 3.4028235e38f, 1.0f / 3.0f, -0.0f, 7.0f};
  write_tensor_tsv(dir / "t.tsv", v.data(), 3, 2);
  // The shortest text that round-trips, as numpy prints float32: str(np.float32(-2.5e-8)) is
  // "-2.5e-08", str(np.float32(3.4028235e38)) "3.4028235e+38", str(np.float32(1 / 3)) "0.33333334".
  EXPECT_EQ(slurp(dir / "t.tsv").substr(0, 38), "0.1\t-2.5e-08\n3.4028235e+38\t0.33333334\n");
  const ProjectorTensor t = read_tensor_tsv(dir / "t.tsv");
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.cols, 2);
  EXPECT_EQ(t.values, v);
  const float nan[] = {1.0f, std::nanf("")};
  testing::expect_error([&] { write_tensor_tsv(dir / "n.tsv", nan, 1, 2); }, ErrorKind::kInvalidArgument,
                        {"row 0, column 1", "NaN"});
}

TEST(Projector, TensorTsvReadsAsPythonsFloat) {
  testing::TempDir dir;
  write(dir / "t.tsv", " 1.5 \t-2\n\n3e2\tnan\n");  // spaces, a blank line, nan: float() takes them
  const ProjectorTensor t = read_tensor_tsv(dir / "t.tsv");
  ASSERT_EQ(t.rows, 2);
  EXPECT_EQ(t.values[0], 1.5f);
  EXPECT_EQ(t.values[2], 300.0f);
  EXPECT_TRUE(std::isnan(t.values[3]));
  write(dir / "bad.tsv", "1\t2\n3\tabc\n");
  testing::expect_error([&] { read_tensor_tsv(dir / "bad.tsv"); }, ErrorKind::kInvalidArgument,
                        {"bad.tsv:2:", "value 2 \"abc\" is not a number"});
  write(dir / "hex.tsv", "0x10\n");
  testing::expect_error([&] { read_tensor_tsv(dir / "hex.tsv"); }, ErrorKind::kInvalidArgument, {"hex.tsv:1:"});
  write(dir / "ragged.tsv", "1\t2\n\n3\t4\t5\n");
  testing::expect_error([&] { read_tensor_tsv(dir / "ragged.tsv"); }, ErrorKind::kInvalidArgument,
                        {"ragged.tsv:3: 3 values, but line 1 has 2"});
  write(dir / "empty.tsv", "\n\n");
  testing::expect_error([&] { read_tensor_tsv(dir / "empty.tsv"); }, ErrorKind::kInvalidArgument, {"no rows"});
  testing::expect_error([&] { read_tensor_tsv(dir / "missing.tsv"); }, ErrorKind::kUnavailable, {"missing.tsv"});
}

TEST(Projector, MetadataHeaderRule) {
  testing::TempDir dir;
  write_metadata_tsv(dir / "one.tsv", {.rows = {{"king"}, {"queen"}}});
  EXPECT_EQ(slurp(dir / "one.tsv"), "king\nqueen\n");  // one column: no header
  write_metadata_tsv(dir / "two.tsv", {.columns = {"word", "count"}, .rows = {{"king", "3"}, {"queen", ""}}});
  EXPECT_EQ(slurp(dir / "two.tsv"), "word\tcount\nking\t3\nqueen\t\n");
  const ProjectorMetadata two = read_metadata_tsv(dir / "two.tsv");
  EXPECT_EQ(two.columns, (std::vector<std::string>{"word", "count"}));
  EXPECT_EQ(two.rows, (std::vector<std::vector<std::string>>{{"king", "3"}, {"queen", ""}}));
  const ProjectorMetadata one = read_metadata_tsv(dir / "one.tsv");
  EXPECT_EQ(one.columns, (std::vector<std::string>{"label"}));
  EXPECT_EQ(one.rows.size(), 2u);
  testing::expect_error([&] { write_metadata_tsv(dir / "x.tsv", {.rows = {{"a"}, {" "}}}); },
                        ErrorKind::kInvalidArgument, {"row 1", "empty label"});
  testing::expect_error([&] { write_metadata_tsv(dir / "x.tsv", {.rows = {{"a\tb"}}}); },
                        ErrorKind::kInvalidArgument, {"row 0 column 0", "tab"});
  write(dir / "wide.tsv", "a\tb\n1\t2\t3\n");
  testing::expect_error([&] { read_metadata_tsv(dir / "wide.tsv"); }, ErrorKind::kInvalidArgument,
                        {"wide.tsv:2: 3 cells", "2 columns"});
}

// Decodes an 8-bit PNG with zlib and PNG's five filters (PNG spec, section 9), printing
// "width height channels" and the pixels as hex: independent of libpng.
constexpr const char* kPythonPngDecoder = R"PY(
import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i, idat = 8, b''
while i < len(d):
    n, kind = struct.unpack('>I4s', d[i:i + 8]); body = d[i + 8:i + 8 + n]; i += 12 + n
    if kind == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
    if kind == b'IDAT': idat += body
assert depth == 8
ch = {0: 1, 4: 2, 2: 3, 6: 4}[ctype]
raw, out, prev, stride = zlib.decompress(idat), bytearray(), bytearray(w * ch), w * ch
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - ch] if x >= ch else 0; b = prev[x]; c = prev[x - ch] if x >= ch else 0
        p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else (b if pb <= pc else c)][f]
        line[x] = (line[x] + pred) & 255
    out += line; prev = line
print(w, h, ch, out.hex())
)PY";

TEST(Projector, SpriteIsAGridTheProjectorReads) {
  testing::TempDir dir;
  // Five 2 x 3 (h x w) gray images, image i filled with 10 * (i + 1): a 3-per-row grid, 2 rows.
  std::vector<std::uint8_t> images;
  for (int i = 0; i < 5; ++i) images.insert(images.end(), 6, static_cast<std::uint8_t>(10 * (i + 1)));
  const ProjectorImage sprite = make_sprite(images.data(), 5, 2, 3, 1);
  EXPECT_EQ(sprite.width, 9);
  EXPECT_EQ(sprite.height, 4);
  write_png(dir / "sprite.png", sprite);
  write(dir / "decode.py", kPythonPngDecoder);
  const std::string decoded =
      testing::run_command("/usr/bin/python3 " + (dir / "decode.py").string() + " " + (dir / "sprite.png").string());
  // Row y of the sprite: images (y / 2) * 3 .. + 2, each 3 px wide; the sixth cell is black.
  std::string expected = "9 4 1 ";
  const char* rows[] = {"0a0a0a1414141e1e1e", "0a0a0a1414141e1e1e", "282828323232000000", "282828323232000000"};
  for (const char* r : rows) expected += r;
  EXPECT_EQ(decoded, expected + "\n");
  const ProjectorImage back = read_png(dir / "sprite.png");
  EXPECT_EQ(back.pixels, sprite.pixels);
  EXPECT_EQ(back.channels, 1);
  testing::expect_error([&] { make_sprite(images.data(), 5000, 200, 200, 1); }, ErrorKind::kInvalidArgument,
                        {"8192"});
  write(dir / "not.png", "GIF89a");
  testing::expect_error([&] { read_png(dir / "not.png"); }, ErrorKind::kInvalidArgument, {"not.png", "not a PNG"});
  // 8193 px wide: refused on its header (a header may claim 65536 x 65536 px, 16 GiB of RGBA).
  write_png(dir / "wide.png", {.width = 8193, .height = 1, .channels = 1, .pixels = std::vector<std::uint8_t>(8193)});
  testing::expect_error([&] { read_png(dir / "wide.png"); }, ErrorKind::kInvalidArgument, {"wide.png", "8193 x 1", "8192"});
}

// A complete projector directory: 3 points of 2 values, one-column metadata, a sprite.
ProjectorConfig write_good_projector(const fs::path& dir) {
  const float w[] = {1, 2, 3, 4, 5, 6};
  write_tensor_tsv(dir / "w.tsv", w, 3, 2);
  write_metadata_tsv(dir / "meta.tsv", {.rows = {{"a"}, {"b"}, {"c"}}});
  std::vector<std::uint8_t> images(3 * 4, 255);
  write_png(dir / "sprite.png", make_sprite(images.data(), 3, 2, 2, 1));
  ProjectorEmbedding e{.tensor_name = "w", .tensor_path = "w.tsv", .metadata_path = "meta.tsv"};
  e.tensor_shape = {3, 2};
  e.sprite = ProjectorSprite{.image_path = "sprite.png", .single_image_width = 2, .single_image_height = 2};
  ProjectorConfig c;
  c.embeddings.push_back(e);
  write_projector_config(dir, c);
  return c;
}

TEST(Projector, ReadProjectorLoadsEverything) {
  testing::TempDir dir;
  const ProjectorConfig c = write_good_projector(dir.path());
  const auto loaded = read_projector(dir / kProjectorConfigFile);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].info, c.embeddings[0]);
  EXPECT_EQ(loaded[0].tensor.values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(loaded[0].metadata);
  EXPECT_EQ(loaded[0].metadata->rows[2], std::vector<std::string>{"c"});
  ASSERT_TRUE(loaded[0].sprite);
  EXPECT_EQ(loaded[0].sprite->width, 4);  // ceil(sqrt(3)) = 2 per row
}

TEST(Projector, ReadProjectorRefusesWhatTensorBoardCannotShow) {
  testing::TempDir dir;
  ProjectorConfig c = write_good_projector(dir.path());
  const fs::path config = dir / kProjectorConfigFile;
  auto with = [&](auto change) {
    ProjectorConfig copy = c;
    change(copy.embeddings[0]);
    write_projector_config(dir.path(), copy);
  };
  with([](ProjectorEmbedding& e) { e.tensor_path = "../w.tsv"; });
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"tensor_path \"../w.tsv\" resolves outside the config's directory"});
  with([](ProjectorEmbedding& e) { e.metadata_path = "/etc/passwd"; });
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"metadata_path \"/etc/passwd\" resolves outside"});
  fs::create_symlink("/etc", dir / "etc");  // a link inside that leads outside
  with([](ProjectorEmbedding& e) { e.metadata_path = "etc/passwd"; });
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument, {"resolves outside"});
  write_projector_config(dir.path(), c);
  // Metadata rows disagreeing with the tensor's: one label too many, then a header taken.
  write(dir / "meta.tsv", "a\nb\nc\nd\n");
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"meta.tsv: 4 metadata rows, but the tensor has 3 rows", "no header line"});
  write(dir / "meta.tsv", "a\tx\nb\tx\nc\tx\n");
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"2 metadata rows, but the tensor has 3 rows", "taken as a header"});
  write(dir / "meta.tsv", "a\nb\nc\n");
  write(dir / "w.tsv", "1\t2\n3\tx\n5\t6\n");
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"w.tsv:2: value 2 \"x\" is not a number"});
  write(dir / "w.tsv", "1\t2\n3\t4\n5\t6\t7\n");
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument, {"w.tsv:3: 3 values"});
  write(dir / "w.tsv", "1\t2\n3\t4\n5\t6\n7\t8\n9\t10\n");  // 5 rows: shape says 3, sprite holds 4
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"tensor_shape does not match w.tsv, which holds 5 x 2"});
  with([](ProjectorEmbedding& e) { e.tensor_shape.clear(); e.metadata_path.clear(); });
  testing::expect_error([&] { read_projector(config); }, ErrorKind::kInvalidArgument,
                        {"sprite.png", "holds 4 images of 2 x 2 px, but the tensor has 5 rows"});
}

}  // namespace
}  // namespace tensorhub
