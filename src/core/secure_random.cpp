#include "tensorhub/core/secure_random.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <vector>

#include "tensorhub/core/error.h"

namespace tensorhub {

std::string secure_random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (bytes > 0 && RAND_bytes(raw.data(), static_cast<int>(bytes)) != 1)
    throw Internal("OpenSSL's RAND_bytes failed: no secure random bytes for a token");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (const unsigned char b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tensorhub
