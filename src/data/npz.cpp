// .npz archives: the read-only subset of ZIP (PKWARE's APPNOTE.TXT 6.3) that numpy.savez and
// numpy.savez_compressed write: stored or deflated entries, ZIP64 extensions, no encryption.
// Written over zlib (already a dependency of data/) rather than libzip or minizip, which the
// build does not depend on, for these ~150 lines.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensorhub/core/error.h"
#include "tensorhub/data/npy.h"

namespace tensorhub {
namespace {

constexpr std::uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEnd = 0x06054b50,
                        kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr std::uint32_t kMax32 = 0xFFFFFFFF;
// DEFLATE cannot compress better than about 1032:1, so a larger claimed size is a lie
// (a "zip bomb" header) that must not make us allocate it.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

// Bounds-checked little-endian reads over the archive; every failure is DataLoss naming it.
class Bytes {
 public:
  Bytes(std::span<const std::byte> b, const std::string& source) : b_(b), source_(source) {}
  std::uint64_t size() const { return b_.size(); }
  std::uint64_t get(std::uint64_t at, int width) const {
    need(at, static_cast<std::uint64_t>(width), "a header field");
    std::uint64_t v = 0;
    for (int k = width; k-- > 0;) v = v << 8 | static_cast<std::uint8_t>(b_[at + static_cast<std::uint64_t>(k)]);
    return v;
  }
  void need(std::uint64_t at, std::uint64_t n, const std::string& what) const {
    if (at > b_.size() || n > b_.size() - at)
      throw DataLoss(source_ + ": the .npz archive is truncated or corrupt (" + what + " at byte " +
                     std::to_string(at) + " runs past its end, " + std::to_string(b_.size()) + " bytes)");
  }
  std::span<const std::byte> span(std::uint64_t at, std::uint64_t n, const std::string& what) const {
    need(at, n, what);
    return b_.subspan(at, n);
  }
  [[noreturn]] void fail(const std::string& what) const { throw DataLoss(source_ + ": " + what); }

 private:
  std::span<const std::byte> b_;
  const std::string& source_;
};

// One central directory entry.
struct Entry {
  std::string name;
  std::uint16_t flags = 0, method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, size = 0, offset = 0;
};

// Where the central directory is and how many entries it has: the end of central directory
// record (searched from the end, past a comment of up to 64 KiB), or its ZIP64 form.
struct Directory {
  std::uint64_t count = 0, offset = 0;
};

Directory find_directory(const Bytes& z) {
  if (z.size() < 22) z.fail("the .npz archive is truncated (shorter than a ZIP end record)");
  std::uint64_t at = z.size() - 22;
  const std::uint64_t lowest = at > 65535 ? at - 65535 : 0;
  while (z.get(at, 4) != kEnd) {
    if (at == lowest) z.fail("not a ZIP archive, or truncated (no end of central directory record)");
    --at;
  }
  Directory d{z.get(at + 10, 2), z.get(at + 16, 4)};
  if (d.count != 0xFFFF && d.offset != kMax32) return d;
  if (at < 20 || z.get(at - 20, 4) != kZip64Locator) z.fail("a ZIP64 archive without its ZIP64 end locator");
  const std::uint64_t end64 = z.get(at - 20 + 8, 8);
  if (z.get(end64, 4) != kZip64End) z.fail("no ZIP64 end of central directory record where its locator points");
  return {z.get(end64 + 32, 8), z.get(end64 + 48, 8)};
}

// Reads the ZIP64 extra field (id 1) of a central entry: the 64-bit values of the fields
// whose 32-bit value is 0xFFFFFFFF, in the order size, compressed size, offset.
void read_zip64_extra(const Bytes& z, std::uint64_t at, std::uint64_t len, Entry& e) {
  for (std::uint64_t end = at + len; at + 4 <= end;) {
    const std::uint64_t id = z.get(at, 2), n = z.get(at + 2, 2);
    std::uint64_t p = at + 4;
    if (id == 1) {
      for (std::uint64_t* field : {&e.size, &e.compressed, &e.offset})
        if (*field == kMax32) {
          if (p + 8 > at + 4 + n) z.fail("entry " + e.name + " has a short ZIP64 extra field");
          *field = z.get(p, 8);
          p += 8;
        }
      return;
    }
    at += 4 + n;
  }
}

std::vector<Entry> read_directory(const Bytes& z) {
  const Directory d = find_directory(z);
  std::vector<Entry> out;
  std::uint64_t at = d.offset;
  for (std::uint64_t i = 0; i < d.count; ++i) {
    if (z.get(at, 4) != kCentralHeader) z.fail("a corrupt ZIP central directory (entry " + std::to_string(i) + ")");
    Entry e;
    e.flags = static_cast<std::uint16_t>(z.get(at + 8, 2));
    e.method = static_cast<std::uint16_t>(z.get(at + 10, 2));
    e.crc = static_cast<std::uint32_t>(z.get(at + 16, 4));
    e.compressed = z.get(at + 20, 4);
    e.size = z.get(at + 24, 4);
    e.offset = z.get(at + 42, 4);
    const std::uint64_t name_len = z.get(at + 28, 2), extra_len = z.get(at + 30, 2), comment_len = z.get(at + 32, 2);
    const auto name = z.span(at + 46, name_len, "an entry name");
    e.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    read_zip64_extra(z, at + 46 + name_len, extra_len, e);
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// Inflates raw DEFLATE data (RFC 1951) of exactly `size` bytes.
std::vector<std::byte> inflate_raw(std::span<const std::byte> in, std::uint64_t size, const Bytes& z,
                                   const std::string& name) {
  if (size > in.size() * kMaxDeflateRatio + 1024)
    z.fail("entry " + name + " claims " + std::to_string(size) + " bytes from " + std::to_string(in.size()) +
           " deflated ones, more than DEFLATE can give");
  std::vector<std::byte> out(size);
  z_stream s{};
  if (inflateInit2(&s, -MAX_WBITS) != Z_OK) throw Internal("zlib's inflateInit2 failed");
  constexpr std::uint64_t kStep = 1u << 30;  // zlib counts in 32-bit unsigned ints
  std::uint64_t fed = 0;
  int rc = Z_OK;
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  while (rc == Z_OK) {
    if (s.avail_in == 0 && fed < in.size()) {
      s.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + fed));
      s.avail_in = static_cast<uInt>(std::min(kStep, in.size() - fed));
      fed += s.avail_in;
    }
    const std::uint64_t written = reinterpret_cast<std::byte*>(s.next_out) - out.data();
    s.avail_out = static_cast<uInt>(std::min(kStep, size - written));
    rc = inflate(&s, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && s.avail_in == 0 && fed == in.size()) break;  // input ended early
  }
  const std::uint64_t written = reinterpret_cast<std::byte*>(s.next_out) - out.data();
  inflateEnd(&s);
  if (rc != Z_STREAM_END || written != size)
    z.fail("entry " + name + " does not inflate to its " + std::to_string(size) + " bytes (corrupt or truncated)");
  return out;
}

// The bytes of entry `e`, checked against its CRC-32.
std::vector<std::byte> entry_bytes(const Bytes& z, const Entry& e) {
  if (e.flags & 1) z.fail("entry " + e.name + " is encrypted");
  if (z.get(e.offset, 4) != kLocalHeader) z.fail("entry " + e.name + " has no local header where the directory says");
  const std::uint64_t start = e.offset + 30 + z.get(e.offset + 26, 2) + z.get(e.offset + 28, 2);
  const auto data = z.span(start, e.compressed, "entry " + e.name + "'s data");
  std::vector<std::byte> out;
  if (e.method == 0) {
    if (e.compressed != e.size) z.fail("stored entry " + e.name + " has two sizes");
    out.assign(data.begin(), data.end());
  } else if (e.method == 8) {
    out = inflate_raw(data, e.size, z, e.name);
  } else {
    z.fail("entry " + e.name + " uses ZIP compression method " + std::to_string(e.method) +
           "; numpy writes stored (0) or deflated (8) entries, which are read");
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t i = 0; i < out.size(); i += 1u << 30)
    crc = crc32(crc, reinterpret_cast<const Bytef*>(out.data() + i),
                static_cast<uInt>(std::min<std::uint64_t>(1u << 30, out.size() - i)));
  if (crc != e.crc) z.fail("entry " + e.name + " fails its CRC-32 check (corrupt)");
  return out;
}

}  // namespace

NamedTensors parse_npz(std::span<const std::byte> bytes, const std::string& source) {
  const Bytes z(bytes, source);
  NamedTensors out;
  for (const Entry& e : read_directory(z)) {
    if (e.name.size() <= 4 || !e.name.ends_with(".npy"))
      throw InvalidArgument(source + ": entry \"" + e.name + "\" is not an array NAME.npy, as numpy.savez writes");
    const std::string name = e.name.substr(0, e.name.size() - 4);
    if (out.contains(name)) throw InvalidArgument(source + ": the array " + name + " is in the archive twice");
    out[name] = parse_npy(entry_bytes(z, e), source + ": " + e.name);
  }
  if (out.empty()) throw InvalidArgument(source + " holds no array");
  return out;
}

NamedTensors read_numpy_file(const std::filesystem::path& path) {
  const std::vector<std::byte> bytes = read_file_bytes(path);
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) return parse_npz(bytes, path.string());
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x05\x06", 4) == 0)
    throw InvalidArgument(path.string() + " is an empty .npz archive (no array)");
  NamedTensors out;
  out[path.stem().string()] = parse_npy(bytes, path.string());
  return out;
}

}  // namespace tensorhub
