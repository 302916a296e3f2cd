// CRC-32C tests: RFC 3720 B.4 vectors, the masked CRC of a real TensorFlow-written TFRecord
// header, extend/mask algebra, and both implementations (SSE4.2 and table) against Debian's
// python3-crc32c (an independent implementation) on random buffers of many lengths and
// alignments.
#include "tensorhub/core/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tensorhub {
namespace {

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c_detail::extend_table(0, reinterpret_cast<const std::byte*>("123456789"), 9),
            0xE3069283u);
  if (crc32c_detail::hardware_available()) {
    EXPECT_EQ(
        crc32c_detail::extend_hardware(0, reinterpret_cast<const std::byte*>("123456789"), 9),
        0xE3069283u);
  }
}

// RFC 3720 (iSCSI) appendix B.4, the vectors LevelDB's crc32c_test also uses.
TEST(Crc32c, Rfc3720Vectors) {
  std::vector<std::uint8_t> buf(32, 0);
  EXPECT_EQ(crc32c(bytes_of(buf)), 0x8A9136AAu);
  buf.assign(32, 0xff);
  EXPECT_EQ(crc32c(bytes_of(buf)), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(crc32c(bytes_of(buf)), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<std::uint8_t>(31 - i);
  EXPECT_EQ(crc32c(bytes_of(buf)), 0x113FDB5Cu);
  const std::vector<std::uint8_t> iscsi = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc32c(bytes_of(iscsi)), 0xD9963A56u);
}

// The first 12 bytes of the TensorFlow-written fixture toy.nocompress-tfe-tfrecord-00001-of-00002:
// length 0xa8 as uint64 LE, then its masked CRC fc d8 de 2d (LE).
TEST(Crc32c, MaskedMatchesTensorFlowFile) {
  const std::vector<std::uint8_t> length = {0xa8, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(masked_crc32c(bytes_of(length)), 0x2DDED8FCu);
  EXPECT_EQ(unmask_crc32c(0x2DDED8FCu), crc32c(bytes_of(length)));
}

TEST(Crc32c, MaskAlgebra) {
  // tensorflow/core/lib/hash/crc32c_test.cc, Mask.
  const std::uint32_t crc = crc32c("foo");
  EXPECT_NE(crc, mask_crc32c(crc));
  EXPECT_NE(crc, mask_crc32c(mask_crc32c(crc)));
  EXPECT_EQ(crc, unmask_crc32c(mask_crc32c(crc)));
  EXPECT_EQ(crc, unmask_crc32c(unmask_crc32c(mask_crc32c(mask_crc32c(crc)))));
  // The formula itself on one value worked by hand: 0x12345678 rotated right by 15 is
  // 0xACF02468; + 0xa282ead8 = 0x4F730F40 (mod 2^32).
  EXPECT_EQ(mask_crc32c(0x12345678u), 0x4F730F40u);
}

TEST(Crc32c, ExtendEqualsWhole) {
  EXPECT_EQ(crc32c("hello world"), crc32c_extend(crc32c("hello "), "world"));
  EXPECT_EQ(crc32c_extend(0, "abc"), crc32c("abc"));
  std::mt19937 rng(7);
  std::vector<std::uint8_t> buf(4099);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  const auto all = bytes_of(buf);
  for (std::size_t split : {0, 1, 3, 7, 8, 9, 100, 4098, 4099}) {
    EXPECT_EQ(crc32c_extend(crc32c(all.first(split)), all.subspan(split)), crc32c(all)) << split;
  }
}

// Random buffers of every length 0..300 and some long ones, at every offset 0..7 from an
// aligned start (the hardware path handles unaligned heads), compared with python3-crc32c.
TEST(Crc32c, BothPathsMatchPythonCrc32c) {
  testing::TempDir dir;
  std::mt19937_64 rng(20240611);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (std::size_t n : {511, 512, 513, 1000, 4095, 4096, 4097, 65536 + 5, 1 << 20}) lengths.push_back(n);

  std::vector<std::vector<std::uint8_t>> buffers;
  std::ofstream data(dir / "data.bin", std::ios::binary);
  std::ofstream lens(dir / "lengths.txt");
  for (std::size_t n : lengths) {
    std::vector<std::uint8_t> b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    data.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
    lens << n << "\n";
    buffers.push_back(std::move(b));
  }
  data.close();
  lens.close();
  ASSERT_TRUE(data.good() && lens.good());

  const std::string script = dir.path().string() + "/crc.py";
  std::ofstream(script) << "import sys, crc32c\n"
                           "data = open(sys.argv[1], 'rb').read()\n"
                           "off = 0\n"
                           "for line in open(sys.argv[2]):\n"
                           "    n = int(line)\n"
                           "    print(crc32c.crc32c(data[off:off + n]))\n"
                           "    off += n\n";
  std::string out;
  try {
    out = testing::run_command("/usr/bin/python3 " + script + " " + (dir / "data.bin").string() +
                               " " + (dir / "lengths.txt").string() + " 2>&1");
  } catch (const std::exception& e) {
    FAIL() << "python3-crc32c is needed for this test (scripts/setup installs it): " << e.what();
  }
  std::istringstream in(out);
  std::vector<std::uint32_t> expected;
  for (std::uint64_t v; in >> v;) expected.push_back(static_cast<std::uint32_t>(v));
  ASSERT_EQ(expected.size(), lengths.size()) << out;

  const bool hw = crc32c_detail::hardware_available();
  if (!hw) std::cerr << "note: no SSE4.2 on this CPU; only the table path is compared\n";
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = buffers[i];
    for (std::size_t shift = 0; shift < 8; ++shift) {
      // Copy into storage whose start is 8-aligned (std::vector<uint64_t>), at `shift`.
      std::vector<std::uint64_t> storage((b.size() + shift) / 8 + 1);
      auto* p = reinterpret_cast<std::byte*>(storage.data()) + shift;
      if (!b.empty()) std::memcpy(p, b.data(), b.size());
      ASSERT_EQ(crc32c_detail::extend_table(0, p, b.size()), expected[i])
          << "table, length " << b.size() << " shift " << shift;
      if (hw) {
        ASSERT_EQ(crc32c_detail::extend_hardware(0, p, b.size()), expected[i])
            << "sse4.2, length " << b.size() << " shift " << shift;
      }
      ASSERT_EQ(crc32c(std::span<const std::byte>(p, b.size())), expected[i]);
      if (b.size() > 300) break;  // long buffers: one alignment is enough
    }
  }
}

}  // namespace
}  // namespace tensorhub
