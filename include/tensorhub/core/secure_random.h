// Secrets: random bytes from OpenSSL's CSPRNG (RAND_bytes, seeded by the operating system), for
// tokens a person or a browser holds (dashboard user tokens, session ids, CSRF tokens).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tensorhub {

/// `bytes` random bytes from RAND_bytes as 2 * bytes lowercase hex characters. Throws Internal
/// when OpenSSL cannot produce them (its entropy source failed), never a weaker value.
std::string secure_random_hex(std::size_t bytes);

/// True when `a` and `b` are equal, in a time that depends on their lengths only (CRYPTO_memcmp),
/// so that comparing a secret does not tell an attacker how many leading bytes were right.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tensorhub
