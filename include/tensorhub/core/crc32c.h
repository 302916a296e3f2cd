// CRC-32C (Castagnoli), the checksum of TFRecord files and TensorBoard event files.
//
// Algorithm: the cyclic redundancy check with the Castagnoli polynomial 0x1EDC6F41
// (reflected 0x82F63B78), initial value 0xFFFFFFFF and final XOR 0xFFFFFFFF, as in RFC 3720
// (iSCSI) appendix B.4 and Intel's SSE4.2 `crc32` instruction. Known value (RFC 3720's check
// value convention): crc32c("123456789") = 0xE3069283. Computed with the SSE4.2 `crc32`
// instruction when the CPU has it, else with a slicing-by-8 table; both give the same value.
//
// Debian has no C or C++ CRC32C library new enough (Abseil's is newer than Debian's), hence
// this one. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tensorhub {

/// CRC-32C of `bytes` (the finalised value, as TensorFlow's crc32c::Value and LevelDB's
/// crc32c::Value return it). crc32c of no bytes is 0.
std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept;
std::uint32_t crc32c(std::string_view bytes) noexcept;

/// The CRC-32C of A followed by `bytes`, given `crc` = crc32c(A): crc32c_extend(crc32c(a), b)
/// == crc32c(a + b) (LevelDB's crc32c::Extend). crc32c_extend(0, b) == crc32c(b).
std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> bytes) noexcept;
std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view bytes) noexcept;

/// The masked form TFRecord stores (tensorflow/core/lib/hash/crc32c.h, Mask):
/// ((crc >> 15) | (crc << 17)) + 0xa282ead8, all modulo 2^32. Masking makes the CRC of data
/// that itself contains CRCs well-behaved.
constexpr std::uint32_t mask_crc32c(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/// Inverse of mask_crc32c: unmask_crc32c(mask_crc32c(c)) == c.
constexpr std::uint32_t unmask_crc32c(std::uint32_t masked) noexcept {
  const std::uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

/// mask_crc32c(crc32c(bytes)): the value TFRecord writes after the length and after the data.
std::uint32_t masked_crc32c(std::span<const std::byte> bytes) noexcept;
std::uint32_t masked_crc32c(std::string_view bytes) noexcept;

namespace crc32c_detail {
/// The two implementations behind crc32c_extend, exposed so tests can check both on any CPU.
/// Same contract as crc32c_extend.
std::uint32_t extend_table(std::uint32_t crc, const std::byte* data, std::size_t n) noexcept;
/// REQUIRES: hardware_available(); otherwise the CPU raises SIGILL.
std::uint32_t extend_hardware(std::uint32_t crc, const std::byte* data, std::size_t n) noexcept;
/// True when the CPU has SSE4.2 (x86 only; false elsewhere), i.e. crc32c uses the instruction.
bool hardware_available() noexcept;
}  // namespace crc32c_detail

}  // namespace tensorhub
