// SHA-256 against the FIPS 180-4 / NIST CSRC example vectors, and incremental hashing
// against one-shot hashing.
#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "tensorhub/core/hash.h"

namespace tensorhub {
namespace {

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Vectors from FIPS 180-4 examples (csrc.nist.gov, "SHA256.pdf" and "SHA2_Additional.pdf").
struct Vector {
  std::string message;
  const char* digest;
};

const std::vector<Vector>& fips_vectors() {
  static const std::vector<Vector> v = {
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  return v;
}

TEST(Sha256, FipsVectorsOneShotString) {
  for (const auto& v : fips_vectors()) {
    EXPECT_EQ(sha256_hex(v.message), v.digest) << "message of " << v.message.size() << " bytes";
  }
}

TEST(Sha256, FipsVectorsOneShotBytes) {
  for (const auto& v : fips_vectors()) {
    EXPECT_EQ(sha256_hex(as_bytes(v.message)), v.digest) << "message of " << v.message.size() << " bytes";
  }
}

TEST(Sha256, FipsVectorsIncrementalByteByByte) {
  for (const auto& v : fips_vectors()) {
    if (v.message.size() > 1000) continue;  // the million-'a' vector is covered in chunks below
    Sha256 h;
    for (char c : v.message) h.update(std::string(1, c));
    EXPECT_EQ(h.hex_digest(), v.digest) << v.message;
  }
}

TEST(Sha256, MillionAInUnevenChunks) {
  const std::string million(1000000, 'a');
  Sha256 h;
  std::size_t pos = 0, step = 1;
  while (pos < million.size()) {
    const std::size_t n = std::min(step, million.size() - pos);
    h.update(as_bytes(million).subspan(pos, n));
    pos += n;
    step = step * 3 + 1;  // 1, 4, 13, 40, ... crosses the 64-byte block boundaries unevenly
  }
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string message;
  for (int i = 0; i < 300; ++i) message.push_back(static_cast<char>((i * 37 + 11) & 0xff));
  const std::string expected = sha256_hex(message);
  ASSERT_EQ(expected.size(), 64u);
  for (std::size_t split = 0; split <= message.size(); ++split) {
    Sha256 h;
    h.update(as_bytes(message).first(split));
    h.update(message.substr(split));  // mixes the span and string overloads
    ASSERT_EQ(h.hex_digest(), expected) << "split at " << split;
  }
  // Empty updates change nothing.
  Sha256 h;
  h.update(std::string());
  h.update(as_bytes(message));
  h.update(std::span<const std::byte>());
  EXPECT_EQ(h.hex_digest(), expected);
}

TEST(Sha256, DigestIsLowercaseHexAndDiffersOnOneBit) {
  const std::string a = sha256_hex("tensorhub");
  std::string flipped = "tensorhub";
  flipped[0] ^= 0x01;
  const std::string b = sha256_hex(flipped);
  ASSERT_EQ(a.size(), 64u);
  for (char c : a) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tensorhub
