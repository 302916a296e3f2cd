// `tensorhub dataset import` as a process: tiny IDX files written here in the documented format
// (Yann LeCun's MNIST page: magic 0x00000803 for images, 0x00000801 for labels, then one
// big-endian 32-bit size per dimension, then unsigned bytes in C order) are imported by the real
// binary and read back with Hub; errors name what was wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "tensorhub/store/hub.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

// Writes an IDX file of unsigned bytes: magic 0x0000 08 <rank>, big-endian dims, data.
void write_idx(const std::filesystem::path& path, const std::vector<std::uint32_t>& dims,
               const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> bytes = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    bytes.insert(bytes.end(), {static_cast<std::uint8_t>(d >> 24), static_cast<std::uint8_t>(d >> 16),
                               static_cast<std::uint8_t>(d >> 8), static_cast<std::uint8_t>(d)});
  bytes.insert(bytes.end(), data.begin(), data.end());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

class DatasetImportTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::filesystem::path idx = dir / "idx";
  std::string uri = "sqlite://" + (dir / "hub.db").string();
  std::string log = (dir / "import.log").string();

  // 5 training images of 2 x 3 pixels: pixel p of image i is 51 * ((i + p) % 6), so that
  // x / 255 is a value known by hand (0, 0.2, 0.4, 0.6, 0.8, 1). Labels 3, 1, 4, 1, 5.
  // 2 test images (all 255, all 0), labels 9, 2.
  void SetUp() override {
    std::filesystem::create_directories(idx);
    std::vector<std::uint8_t> train;
    for (std::uint8_t i = 0; i < 5; ++i)
      for (std::uint8_t p = 0; p < 6; ++p) train.push_back(static_cast<std::uint8_t>(51 * ((i + p) % 6)));
    write_idx(idx / "train-images-idx3-ubyte", {5, 2, 3}, train);
    write_idx(idx / "train-labels-idx1-ubyte", {5}, {3, 1, 4, 1, 5});
    std::vector<std::uint8_t> test(6, 255);
    test.resize(12, 0);
    write_idx(idx / "t10k-images-idx3-ubyte", {2, 2, 3}, test);
    write_idx(idx / "t10k-labels-idx1-ubyte", {2}, {9, 2});
  }

  // Runs `tensorhub dataset import` with `extra` arguments; returns its exit code.
  int import(std::vector<std::string> extra) {
    std::vector<std::string> args = {kTensorhub, "dataset", "import", "--hub", uri, "--project", "p"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::filesystem::remove(log);
    return wait_exit(spawn(args, log));
  }

  DatasetRecord dataset(const std::string& name) {
    Hub hub(uri, "p");
    auto rec = hub.find_top_dataset(name);
    if (!rec) throw std::runtime_error("dataset " + name + " not saved; log:\n" + read_text(log));
    return *rec;
  }
};

std::vector<float> floats(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }
std::vector<std::int64_t> ints(const Tensor& t) { return {t.as<std::int64_t>(), t.as<std::int64_t>() + t.numel()}; }

TEST_F(DatasetImportTest, SplitsTheLastTrainingImagesIntoValidationAndScales) {
  ASSERT_EQ(import({"--idx", idx.string(), "--name", "tiny", "--validation", "2", "--tags", R"({"version": 2})"}), 0)
      << read_text(log);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("loading 1/4 " + (idx / "train-images-idx3-ubyte").string()), std::string::npos) << out;
  EXPECT_NE(out.find("saved dataset tiny (id 1) in project p"), std::string::npos) << out;
  EXPECT_NE(out.find("X_train F32 [3, 6]"), std::string::npos) << out;
  EXPECT_NE(out.find("y_val I64 [2]"), std::string::npos) << out;

  const auto rec = dataset("tiny");
  EXPECT_EQ(rec.document.tags["version"], 2);
  EXPECT_EQ(rec.document.tags["image_shape"], Json({2, 3})) << "the IDX files' 2 x 3 images, flattened to 6";
  ASSERT_EQ(rec.tensors.size(), 6u);
  const Tensor& x = rec.tensors.at("X_train");
  ASSERT_EQ(x.dtype, DType::kF32);
  ASSERT_EQ(x.shape, (std::vector<std::int64_t>{3, 6}));
  // Image 0 is 51 * (0..5) / 255; image 2 starts at 51 * 2.
  const std::vector<float> want0 = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  const auto xs = floats(x);
  for (int p = 0; p < 6; ++p) EXPECT_FLOAT_EQ(xs[p], want0[p]) << "pixel " << p;
  EXPECT_FLOAT_EQ(xs[12], 0.4f);
  EXPECT_FLOAT_EQ(xs[17], 0.2f);  // (2 + 5) % 6 = 1
  EXPECT_EQ(ints(rec.tensors.at("y_train")), (std::vector<std::int64_t>{3, 1, 4}));

  // Validation: images 3 and 4, the last two, with their labels.
  const Tensor& xv = rec.tensors.at("X_val");
  ASSERT_EQ(xv.shape, (std::vector<std::int64_t>{2, 6}));
  EXPECT_FLOAT_EQ(floats(xv)[0], 0.6f);   // image 3, pixel 0: 51 * 3
  EXPECT_FLOAT_EQ(floats(xv)[6], 0.8f);   // image 4, pixel 0: 51 * 4
  EXPECT_EQ(ints(rec.tensors.at("y_val")), (std::vector<std::int64_t>{1, 5}));

  const Tensor& xt = rec.tensors.at("X_test");
  ASSERT_EQ(xt.shape, (std::vector<std::int64_t>{2, 6}));
  EXPECT_FLOAT_EQ(floats(xt)[5], 1.0f);
  EXPECT_FLOAT_EQ(floats(xt)[6], 0.0f);
  EXPECT_EQ(ints(rec.tensors.at("y_test")), (std::vector<std::int64_t>{9, 2}));
}

TEST_F(DatasetImportTest, NoScaleKeepsBytesAndValidationZeroSavesNoValidationSet) {
  // A gzip-compressed file is found by its .gz name.
  run_command("gzip " + (idx / "t10k-images-idx3-ubyte").string());
  ASSERT_EQ(import({"--idx", idx.string(), "--name", "raw", "--validation", "0", "--no-scale"}), 0) << read_text(log);
  const auto rec = dataset("raw");
  EXPECT_EQ(rec.tensors.count("X_val"), 0u);
  EXPECT_EQ(rec.tensors.count("y_val"), 0u);
  const Tensor& x = rec.tensors.at("X_train");
  ASSERT_EQ(x.dtype, DType::kU8);
  ASSERT_EQ(x.shape, (std::vector<std::int64_t>{5, 6}));
  EXPECT_EQ(x.as<std::uint8_t>()[4 * 6], 204);  // image 4, pixel 0: 51 * 4
  EXPECT_EQ(rec.tensors.at("X_test").as<std::uint8_t>()[0], 255);
  EXPECT_EQ(ints(rec.tensors.at("y_train")), (std::vector<std::int64_t>{3, 1, 4, 1, 5}));
}

TEST_F(DatasetImportTest, MissingDirectoryOrFileIsNamed) {
  const auto nowhere = (dir / "nowhere").string();
  EXPECT_EQ(import({"--idx", nowhere, "--name", "x"}), 1);
  EXPECT_NE(read_text(log).find("--idx: directory '" + nowhere + "' does not exist"), std::string::npos)
      << read_text(log);

  std::filesystem::remove(idx / "t10k-labels-idx1-ubyte");
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x"}), 1);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("cannot find t10k-labels-idx1-ubyte[.gz]"), std::string::npos) << out;
  EXPECT_EQ(out.find("loading"), std::string::npos) << "nothing is read before every file is found: " << out;
  EXPECT_FALSE(Hub(uri, "p").find_top_dataset("x").has_value());
}

TEST_F(DatasetImportTest, TruncatedFileIsDataLossNamingIt) {
  // Cut the last image short: the header declares 5 x 2 x 3 = 30 bytes, 27 remain.
  const auto path = idx / "train-images-idx3-ubyte";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x"}), 1);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("IDX file " + path.string() + " is truncated"), std::string::npos) << out;
  EXPECT_NE(out.find("30 data bytes but the file holds 27"), std::string::npos) << out;
  EXPECT_FALSE(Hub(uri, "p").find_top_dataset("x").has_value());
}

TEST_F(DatasetImportTest, BadArgumentsNameTheFlag) {
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x", "--validation", "6"}), 1);
  EXPECT_NE(read_text(log).find("--validation 6 is more than the 5 training images"), std::string::npos)
      << read_text(log);
  // A flag's malformed value is a usage error (exit 2), with the parser's own message.
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x", "--tags", "[1]"}), 2);
  EXPECT_NE(read_text(log).find("--tags must be a JSON object"), std::string::npos) << read_text(log);
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x", "--tags", "{\"v\": 2,}"}), 2);
  EXPECT_NE(read_text(log).find("--tags is not valid JSON: parse error at line 1, column 9"), std::string::npos)
      << read_text(log);
  // Labels that do not match the images: 4 labels for 5 images.
  write_idx(idx / "train-labels-idx1-ubyte", {4}, {1, 2, 3, 4});
  EXPECT_EQ(import({"--idx", idx.string(), "--name", "x"}), 1);
  EXPECT_NE(read_text(log).find("holds 5 images but labels file"), std::string::npos) << read_text(log);
}

}  // namespace
}  // namespace tensorhub
