// Tests of the IDX reader against Fashion-MNIST facts checked independently with Python's
// gzip module, and against small hand-written files, plain and gzip-compressed.
#include "tensorhub/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using Bytes = std::vector<std::uint8_t>;

// An IDX file: magic (big-endian), one big-endian size per dimension, then `data`.
Bytes idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes b;
  auto be32 = [&b](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
  };
  be32(magic);
  for (auto d : dims) be32(d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_plain(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << p;
}

void write_gz(const std::filesystem::path& p, const Bytes& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr) << p;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes iota_bytes(std::size_t n) {
  Bytes b(n);
  std::iota(b.begin(), b.end(), std::uint8_t{0});
  return b;
}

using testing::expect_error;  // tests/test_util.h

std::vector<std::int64_t> u8_values(const Tensor& t, std::size_t n) {
  std::vector<std::int64_t> v;
  const auto* p = reinterpret_cast<const std::uint8_t*>(t.data.data());
  for (std::size_t i = 0; i < n; ++i) v.push_back(p[i]);
  return v;
}

const std::filesystem::path kFashion = "/usr/share/datasets/fashion-mnist";

// --- Fashion-MNIST (values computed with Python's gzip module) ---

TEST(IdxFashionMnist, TrainLabelsHeaderAndFirstTen) {
  ASSERT_TRUE(std::filesystem::exists(kFashion)) << "install dataset-fashion-mnist (scripts/setup)";
  const Tensor t = read_idx(kFashion / "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(t.dtype, DType::kU8);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{60000}));
  ASSERT_EQ(t.data.size(), 60000u);
  EXPECT_EQ(u8_values(t, 10), (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
}

TEST(IdxFashionMnist, TestLabelsHeaderAndFirstTen) {
  const Tensor t = read_idx(kFashion / "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{10000}));
  EXPECT_EQ(u8_values(t, 10), (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
}

TEST(IdxFashionMnist, TrainImagesHeaderAndFirstImageSum) {
  const Tensor t = read_idx(kFashion / "train-images-idx3-ubyte.gz");
  EXPECT_EQ(t.dtype, DType::kU8);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{60000, 28, 28}));
  ASSERT_EQ(t.data.size(), 60000u * 784u);
  const auto first = u8_values(t, 784);
  EXPECT_EQ(std::accumulate(first.begin(), first.end(), std::int64_t{0}), 76247);
}

TEST(IdxFashionMnist, LoadMnistDatasetSplitsAndScales) {
  const MnistSplits s = load_mnist_dataset(default_mnist_dir());
  EXPECT_EQ(default_mnist_dir(), kFashion);
  EXPECT_EQ(s.X_train.dtype, DType::kF32);
  EXPECT_EQ(s.X_train.shape, (std::vector<std::int64_t>{50000, 784}));
  EXPECT_EQ(s.X_val.shape, (std::vector<std::int64_t>{10000, 784}));
  EXPECT_EQ(s.X_test.shape, (std::vector<std::int64_t>{10000, 784}));
  EXPECT_EQ(s.y_train.dtype, DType::kI64);
  EXPECT_EQ(s.y_train.shape, (std::vector<std::int64_t>{50000}));
  EXPECT_EQ(s.y_val.shape, (std::vector<std::int64_t>{10000}));
  EXPECT_EQ(s.y_test.shape, (std::vector<std::int64_t>{10000}));
  ASSERT_EQ(s.X_train.data.size(), 50000u * 784u * 4u);
  ASSERT_EQ(s.y_train.data.size(), 50000u * 8u);

  const std::int64_t* y = s.y_train.as<std::int64_t>();
  EXPECT_EQ(std::vector<std::int64_t>(y, y + 10),
            (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  const std::int64_t* yt = s.y_test.as<std::int64_t>();
  EXPECT_EQ(std::vector<std::int64_t>(yt, yt + 10),
            (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));

  // First image: byte sum 76247, so the scaled row sums to 76247 / 255; all values in [0, 1].
  const float* x = s.X_train.as<float>();
  double sum = 0;
  float lo = 1, hi = 0;
  for (int i = 0; i < 784; ++i) {
    sum += x[i];
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  EXPECT_NEAR(sum, 76247.0 / 255.0, 1e-3);
  EXPECT_GE(lo, 0.0f);
  EXPECT_LE(hi, 1.0f);

  // Validation is the last 10,000 training examples: its first label is train label 50,000.
  const Tensor labels = read_idx(kFashion / "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(s.y_val.as<std::int64_t>()[0],
            static_cast<std::int64_t>(reinterpret_cast<const std::uint8_t*>(labels.data.data())[50000]));
}

// --- Hand-written files ---

TEST(IdxRead, PlainAndGzipGiveTheSameTensor) {
  testing::TempDir dir;
  const Bytes file = idx_bytes(0x00000803, {2, 2, 3}, iota_bytes(12));
  write_plain(dir / "a-idx3-ubyte", file);
  write_gz(dir / "a-idx3-ubyte.gz", file);
  for (const char* name : {"a-idx3-ubyte", "a-idx3-ubyte.gz"}) {
    const Tensor t = read_idx(dir / name);
    EXPECT_EQ(t.dtype, DType::kU8) << name;
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 2, 3})) << name;
    EXPECT_EQ(u8_values(t, 12), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
        << name;
  }
}

TEST(IdxRead, MissingFileIsUnavailableNamingTheFile) {
  testing::TempDir dir;
  const auto p = dir / "nope-idx1-ubyte.gz";
  expect_error([&] { read_idx(p); }, ErrorKind::kUnavailable,
               {p.string(), "No such file or directory"});
}

TEST(IdxRead, WrongMagicIsDataLoss) {
  testing::TempDir dir;
  const Bytes file = idx_bytes(0x01020803, {1}, {7});
  write_plain(dir / "bad", file);
  write_gz(dir / "bad.gz", file);
  for (const char* name : {"bad", "bad.gz"})
    expect_error([&] { read_idx(dir / name); }, ErrorKind::kDataLoss,
                 {(dir / name).string(), "wrong magic number 0x01020803"});
}

TEST(IdxRead, UnsupportedTypeCodeIsDataLoss) {
  testing::TempDir dir;
  // 0x0D is float in the IDX format: valid there, but not a type MNIST uses.
  write_plain(dir / "floats", idx_bytes(0x00000D01, {1}, {0, 0, 0, 0}));
  expect_error([&] { read_idx(dir / "floats"); }, ErrorKind::kDataLoss,
               {(dir / "floats").string(), "unsupported type code 0x0d (float)"});
}

TEST(IdxRead, TruncatedDataIsDataLoss) {
  testing::TempDir dir;
  const Bytes file = idx_bytes(0x00000801, {10}, iota_bytes(5));
  write_plain(dir / "short", file);
  write_gz(dir / "short.gz", file);
  expect_error([&] { read_idx(dir / "short"); }, ErrorKind::kDataLoss,
               {(dir / "short").string(), "truncated", "declares [10] = 10 data bytes",
                "holds 5"});
  expect_error([&] { read_idx(dir / "short.gz"); }, ErrorKind::kDataLoss,
               {(dir / "short.gz").string(), "truncated", "holds only 5"});
}

TEST(IdxRead, TruncatedHeaderIsDataLoss) {
  testing::TempDir dir;
  write_plain(dir / "two", {0, 0});
  expect_error([&] { read_idx(dir / "two"); }, ErrorKind::kDataLoss,
               {(dir / "two").string(), "magic number"});
  Bytes header_cut = idx_bytes(0x00000803, {60000, 28, 28}, {});
  header_cut.resize(9);  // ends inside the second dimension
  write_gz(dir / "cut.gz", header_cut);
  expect_error([&] { read_idx(dir / "cut.gz"); }, ErrorKind::kDataLoss,
               {(dir / "cut.gz").string(), "dimension sizes"});
}

TEST(IdxRead, CutGzipStreamIsDataLoss) {
  testing::TempDir dir;
  // Incompressible-ish payload so that the compressed stream is long enough to cut.
  Bytes data(4000);
  std::uint32_t s = 12345;
  for (auto& b : data) b = static_cast<std::uint8_t>((s = s * 1103515245u + 12345u) >> 24);
  write_gz(dir / "full.gz", idx_bytes(0x00000801, {4000}, data));
  std::ifstream in(dir / "full.gz", std::ios::binary);
  Bytes gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 2000u);
  gz.resize(gz.size() / 2);
  write_plain(dir / "half.gz", gz);
  expect_error([&] { read_idx(dir / "half.gz"); }, ErrorKind::kDataLoss,
               {(dir / "half.gz").string(), "truncated"});
}

TEST(IdxRead, HugeDeclaredSizeFailsWithoutAllocating) {
  testing::TempDir dir;
  // 4G x 4G x 4G bytes overflows 64 bits; 4G x 16 (64 GiB) does not but is far beyond the
  // file, and must be refused before any allocation.
  const Bytes overflow = idx_bytes(0x00000803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {1, 2, 3});
  const Bytes huge = idx_bytes(0x00000802, {0xffffffffu, 16}, {1, 2, 3});
  write_plain(dir / "overflow", overflow);
  write_plain(dir / "huge", huge);
  write_gz(dir / "huge.gz", huge);
  expect_error([&] { read_idx(dir / "overflow"); }, ErrorKind::kDataLoss,
               {(dir / "overflow").string(), "overflows"});
  expect_error([&] { read_idx(dir / "huge"); }, ErrorKind::kDataLoss,
               {(dir / "huge").string(), "truncated", "holds 3"});
  expect_error([&] { read_idx(dir / "huge.gz"); }, ErrorKind::kDataLoss,
               {(dir / "huge.gz").string(), "truncated", "holds only 3"});
}

TEST(IdxRead, TrailingBytesAreDataLoss) {
  testing::TempDir dir;
  const Bytes file = idx_bytes(0x00000801, {3}, iota_bytes(5));
  write_plain(dir / "long", file);
  write_gz(dir / "long.gz", file);
  expect_error([&] { read_idx(dir / "long"); }, ErrorKind::kDataLoss,
               {(dir / "long").string(), "2 bytes after the 3 data bytes"});
  expect_error([&] { read_idx(dir / "long.gz"); }, ErrorKind::kDataLoss,
               {(dir / "long.gz").string(), "bytes after the 3 data bytes"});
}

TEST(IdxRead, DirectoryIsUnavailable) {
  testing::TempDir dir;
  expect_error([&] { read_idx(dir.path()); }, ErrorKind::kUnavailable,
               {dir.path().string(), "not a regular file"});
}

// --- load_mnist_dataset on a tiny directory ---

TEST(LoadMnistDataset, TinyDirectorySplitsAndScales) {
  testing::TempDir dir;
  Bytes pixels;
  for (int i = 0; i < 12; ++i) pixels.push_back(static_cast<std::uint8_t>(51 * (i % 6)));
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x00000803, {3, 2, 2}, pixels));
  write_plain(dir / "train-labels-idx1-ubyte", idx_bytes(0x00000801, {3}, {2, 0, 1}));
  write_plain(dir / "t10k-images-idx3-ubyte", idx_bytes(0x00000803, {1, 2, 2}, {255, 0, 0, 255}));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes(0x00000801, {1}, {9}));

  const MnistSplits s = load_mnist_dataset(dir.path(), 2);
  EXPECT_EQ(s.X_train.shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(s.X_val.shape, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(s.X_test.shape, (std::vector<std::int64_t>{1, 4}));
  const float* x = s.X_train.as<float>();
  const std::vector<float> want = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f, 0.0f, 0.2f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(x[i], want[i]) << i;
  EXPECT_FLOAT_EQ(s.X_val.as<float>()[0], 0.4f);
  EXPECT_EQ(s.y_train.as<std::int64_t>()[0], 2);
  EXPECT_EQ(s.y_train.as<std::int64_t>()[1], 0);
  EXPECT_EQ(s.y_val.as<std::int64_t>()[0], 1);
  EXPECT_EQ(s.y_test.as<std::int64_t>()[0], 9);
  EXPECT_FLOAT_EQ(s.X_test.as<float>()[3], 1.0f);

  expect_error([&] { load_mnist_dataset(dir.path(), 4); }, ErrorKind::kInvalidArgument,
               {"n_train 4", "[0, 3]"});

  // Label count differing from image count.
  write_plain(dir / "train-labels-idx1-ubyte", idx_bytes(0x00000801, {2}, {2, 0}));
  expect_error([&] { load_mnist_dataset(dir.path(), 2); }, ErrorKind::kInvalidArgument,
               {"holds 3 images", "holds 2 labels"});

  // A missing file names what was looked for.
  std::filesystem::remove(dir / "t10k-labels-idx1-ubyte.gz");
  expect_error([&] { load_mnist_dataset(dir.path(), 2); }, ErrorKind::kUnavailable,
               {(dir / "t10k-labels-idx1-ubyte").string()});
}

}  // namespace
}  // namespace tensorhub
