// Content hashes (OpenSSL's SHA-256, FIPS 180-4).
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace tensorhub {

/// Incremental SHA-256; feed bytes with update(), then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::span<const std::byte> bytes);
  void update(const std::string& text);
  /// 64 lowercase hex characters. Call once; the object cannot be reused after.
  std::string hex_digest();

 private:
  void* ctx_;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of this header
};

/// SHA-256 of `bytes` as 64 lowercase hex characters.
/// Known value (FIPS 180-4 example): sha256_hex("abc") =
/// "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".
std::string sha256_hex(std::span<const std::byte> bytes);
std::string sha256_hex(const std::string& text);

}  // namespace tensorhub
