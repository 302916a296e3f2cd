// CRC-32C: SSE4.2 `crc32` instruction with a slicing-by-8 table fallback.
//
// The table method is the classic "slicing-by-8" of Kounavis and Berry (Intel, 2005), as in
// LevelDB's util/crc32c.cc; the tables are built at compile time from the reflected
// polynomial 0x82F63B78.
#include "tensorhub/core/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define TENSORHUB_CRC32C_X86 1
#endif

namespace tensorhub {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolynomial : (c >> 1);
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0xF26B8303u, "CRC-32C table (RFC 3720 B.4) is wrong");

inline std::uint32_t load_le32(const std::byte* p) {
  return std::to_integer<std::uint32_t>(p[0]) | (std::to_integer<std::uint32_t>(p[1]) << 8) |
         (std::to_integer<std::uint32_t>(p[2]) << 16) | (std::to_integer<std::uint32_t>(p[3]) << 24);
}

#ifdef TENSORHUB_CRC32C_X86
__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc,
                                                             const std::byte* p,
                                                             std::size_t n) {
  std::uint32_t l = crc ^ 0xffffffffu;
  // Single bytes up to an 8-byte boundary, then 8 bytes per instruction, then the tail.
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
    l = _mm_crc32_u8(l, std::to_integer<std::uint8_t>(*p++));
    --n;
  }
#if defined(__x86_64__)
  std::uint64_t l64 = l;
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    l64 = _mm_crc32_u64(l64, word);
    p += 8;
    n -= 8;
  }
  l = static_cast<std::uint32_t>(l64);
#endif
  while (n >= 4) {
    std::uint32_t word;
    std::memcpy(&word, p, 4);
    l = _mm_crc32_u32(l, word);
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    l = _mm_crc32_u8(l, std::to_integer<std::uint8_t>(*p++));
    --n;
  }
  return l ^ 0xffffffffu;
}

bool cpu_has_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

const bool kHardware =
#ifdef TENSORHUB_CRC32C_X86
    cpu_has_sse42();
#else
    false;
#endif

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

namespace crc32c_detail {

std::uint32_t extend_table(std::uint32_t crc, const std::byte* p, std::size_t n) noexcept {
  std::uint32_t l = crc ^ 0xffffffffu;
  while (n >= 8) {
    const std::uint32_t lo = load_le32(p) ^ l;
    const std::uint32_t hi = load_le32(p + 4);
    l = kTables[7][lo & 0xffu] ^ kTables[6][(lo >> 8) & 0xffu] ^ kTables[5][(lo >> 16) & 0xffu] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xffu] ^ kTables[2][(hi >> 8) & 0xffu] ^
        kTables[1][(hi >> 16) & 0xffu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    l = kTables[0][(l ^ std::to_integer<std::uint32_t>(*p++)) & 0xffu] ^ (l >> 8);
    --n;
  }
  return l ^ 0xffffffffu;
}

std::uint32_t extend_hardware(std::uint32_t crc, const std::byte* p, std::size_t n) noexcept {
#ifdef TENSORHUB_CRC32C_X86
  return extend_sse42(crc, p, n);
#else
  return extend_table(crc, p, n);
#endif
}

bool hardware_available() noexcept { return kHardware; }

}  // namespace crc32c_detail

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  return kHardware ? crc32c_detail::extend_hardware(crc, bytes.data(), bytes.size())
                   : crc32c_detail::extend_table(crc, bytes.data(), bytes.size());
}

std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view bytes) noexcept {
  return crc32c_extend(crc, as_bytes(bytes));
}

std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept { return crc32c_extend(0, bytes); }
std::uint32_t crc32c(std::string_view bytes) noexcept { return crc32c_extend(0, as_bytes(bytes)); }

std::uint32_t masked_crc32c(std::span<const std::byte> bytes) noexcept {
  return mask_crc32c(crc32c(bytes));
}
std::uint32_t masked_crc32c(std::string_view bytes) noexcept {
  return mask_crc32c(crc32c(as_bytes(bytes)));
}

}  // namespace tensorhub
