// TFRecord writer and reader (format: tensorflow/core/lib/io/record_writer.cc; see the header).
#include "tensorhub/data/tfrecord.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "tensorhub/core/crc32c.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

constexpr std::size_t kBufferSize = 256 * 1024;  // TensorFlow's zlib buffer sizes
constexpr std::size_t kHeaderSize = 12;          // uint64 length + uint32 masked CRC
constexpr std::size_t kFooterSize = 4;           // uint32 masked CRC
constexpr int kWindowBits = MAX_WBITS;           // 15
constexpr int kMemLevel = 9;                     // TensorFlow's ZlibCompressionOptions

void put_le32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_le64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint32_t get_le32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

int window_bits(TFRecordCompression c) {
  return c == TFRecordCompression::kGzip ? kWindowBits + 16 : kWindowBits;
}

std::string errno_text(int err) { return std::strerror(err); }

std::string hex32(std::uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s.push_back(digits[(v >> shift) & 0xfu]);
  return s;
}

}  // namespace

TFRecordCompression parse_tfrecord_compression(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper.empty() || upper == "NONE") return TFRecordCompression::kNone;
  if (upper == "GZIP") return TFRecordCompression::kGzip;
  if (upper == "ZLIB") return TFRecordCompression::kZlib;
  throw InvalidArgument("unknown TFRecord compression type '" + std::string(name) +
                        "'; use NONE (or \"\"), GZIP or ZLIB");
}

std::string_view to_string(TFRecordCompression compression) noexcept {
  switch (compression) {
    case TFRecordCompression::kNone: return "NONE";
    case TFRecordCompression::kGzip: return "GZIP";
    case TFRecordCompression::kZlib: return "ZLIB";
  }
  return "NONE";
}

// ---------------------------------------------------------------------------------------------
// Writer

struct TFRecordWriter::Impl {
  std::filesystem::path path;
  TFRecordWriterOptions options;
  int fd = -1;
  bool compressed = false;
  z_stream zs{};
  bool zs_live = false;
  std::string out;  // bytes waiting for the file (the framing, or compressed bytes)
  std::uint64_t records = 0;

  [[noreturn]] void fail_io(const std::string& what, int err) const {
    throw Unavailable(what + " TFRecord file " + path.string() + ": " + errno_text(err));
  }

  void write_fd(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail_io("cannot write", errno);
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  void drain() {
    write_fd(out.data(), out.size());
    out.clear();
  }

  // Feeds `n` bytes through deflate (or straight into `out`) with `flush`.
  void put(const void* data, std::size_t n, int flush = Z_NO_FLUSH) {
    if (!compressed) {
      if (out.size() + n > kBufferSize && !out.empty()) drain();
      if (n >= kBufferSize) {
        write_fd(static_cast<const char*>(data), n);
      } else {
        out.append(static_cast<const char*>(data), n);
      }
      return;
    }
    zs.next_in = const_cast<Bytef*>(static_cast<const Bytef*>(data));
    // n may exceed uInt; feed it in pieces.
    std::size_t left = n;
    do {
      const uInt piece = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
      zs.avail_in = piece;
      left -= piece;
      const int f = left == 0 ? flush : Z_NO_FLUSH;
      for (;;) {
        const std::size_t before = out.size();
        out.resize(before + kBufferSize);
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
        zs.avail_out = static_cast<uInt>(kBufferSize);
        const int rc = deflate(&zs, f);
        out.resize(before + kBufferSize - zs.avail_out);
        if (rc == Z_STREAM_ERROR) throw Internal("zlib deflate failed for " + path.string());
        if (out.size() >= kBufferSize) drain();
        if (f == Z_FINISH) {
          if (rc == Z_STREAM_END) break;
          continue;
        }
        if (zs.avail_in == 0 && zs.avail_out != 0) break;
      }
    } while (left > 0);
  }

  void close_fd() {
    if (fd >= 0) {
      const int rc = ::close(fd);
      fd = -1;
      if (rc != 0 && errno != EINTR) fail_io("cannot close", errno);
    }
  }

  void end_zlib() {
    if (zs_live) {
      deflateEnd(&zs);
      zs_live = false;
    }
  }

  ~Impl() {
    end_zlib();
    if (fd >= 0) ::close(fd);
  }
};

TFRecordWriter::TFRecordWriter(const std::filesystem::path& path, TFRecordWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->options = options;
  impl_->compressed = options.compression != TFRecordCompression::kNone;
  if (impl_->compressed) {
    if (options.compression_level < -1 || options.compression_level > 9) {
      throw InvalidArgument("TFRecord compression_level must be -1 (default) or 0..9, got " +
                            std::to_string(options.compression_level) + " for " + path.string());
    }
    if (deflateInit2(&impl_->zs, options.compression_level, Z_DEFLATED,
                     window_bits(options.compression), kMemLevel, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw Internal("zlib deflateInit2 failed for " + path.string());
    }
    impl_->zs_live = true;
  }
  impl_->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (impl_->fd < 0) impl_->fail_io("cannot create", errno);
  impl_->out.reserve(kBufferSize);
}

TFRecordWriter::~TFRecordWriter() {
  if (!impl_) return;
  try {
    close();
  } catch (...) {
    // Swallowed by contract; close() reports errors.
  }
}

TFRecordWriter::TFRecordWriter(TFRecordWriter&&) noexcept = default;
TFRecordWriter& TFRecordWriter::operator=(TFRecordWriter&& other) noexcept {
  if (this != &other) {
    if (impl_) {
      try {
        close();
      } catch (...) {
      }
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}

void TFRecordWriter::write(std::span<const std::byte> record) {
  Impl& w = *impl_;
  if (w.fd < 0) throw FailedPrecondition("TFRecord file " + w.path.string() + " is closed");
  std::byte header[kHeaderSize];
  put_le64(header, record.size());
  put_le32(header + 8, masked_crc32c(std::span<const std::byte>(header, 8)));
  std::byte footer[kFooterSize];
  put_le32(footer, masked_crc32c(record));
  w.put(header, kHeaderSize);
  w.put(record.data(), record.size());
  w.put(footer, kFooterSize);
  ++w.records;
}

void TFRecordWriter::write(std::string_view record) {
  write(std::span<const std::byte>(reinterpret_cast<const std::byte*>(record.data()), record.size()));
}

void TFRecordWriter::flush() {
  Impl& w = *impl_;
  if (w.fd < 0) throw FailedPrecondition("TFRecord file " + w.path.string() + " is closed");
  if (w.compressed) w.put(nullptr, 0, Z_SYNC_FLUSH);
  w.drain();
}

void TFRecordWriter::close() {
  Impl& w = *impl_;
  if (w.fd < 0) return;
  try {
    if (w.compressed) w.put(nullptr, 0, Z_FINISH);
    w.drain();
  } catch (...) {
    w.end_zlib();
    ::close(w.fd);
    w.fd = -1;
    throw;
  }
  w.end_zlib();
  w.close_fd();
}

const std::filesystem::path& TFRecordWriter::path() const noexcept { return impl_->path; }
std::uint64_t TFRecordWriter::records_written() const noexcept { return impl_->records; }

// ---------------------------------------------------------------------------------------------
// Reader

struct TFRecordReader::Impl {
  std::filesystem::path path;
  TFRecordCompression compression = TFRecordCompression::kNone;
  int fd = -1;
  std::uint64_t offset = 0;  // uncompressed offset of the next record

  // Raw file bytes.
  std::string in;
  std::size_t in_pos = 0;
  bool file_eof = false;

  // Decompression state.
  z_stream zs{};
  bool zs_live = false;
  bool stream_started = false;  // inflate has consumed at least one byte of the current stream
  bool stream_ended = false;    // the current stream reached Z_STREAM_END

  [[noreturn]] void fail_io(const std::string& what, int err) const {
    throw Unavailable(what + " TFRecord file " + path.string() + ": " + errno_text(err));
  }

  // Refills `in` from the file; returns false at end of file.
  bool fill() {
    if (file_eof) return false;
    in.resize(kBufferSize);
    for (;;) {
      const ssize_t r = ::read(fd, in.data(), kBufferSize);
      if (r < 0) {
        if (errno == EINTR) continue;
        fail_io("cannot read", errno);
      }
      in.resize(static_cast<std::size_t>(r));
      in_pos = 0;
      if (r == 0) file_eof = true;
      return r > 0;
    }
  }

  std::size_t read_raw(char* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (in_pos == in.size() && !fill()) break;
      const std::size_t k = std::min(n - got, in.size() - in_pos);
      std::memcpy(dst + got, in.data() + in_pos, k);
      in_pos += k;
      got += k;
    }
    return got;
  }

  std::string where(std::uint64_t at) const {
    return "TFRecord file " + path.string() + " (" + std::string(to_string(compression)) +
           "), record at offset " + std::to_string(at) +
           (compression == TFRecordCompression::kNone ? "" : " of the uncompressed stream");
  }

  std::size_t read_inflated(char* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (in_pos == in.size() && !fill()) {
        if (stream_started && !stream_ended) {
          throw DataLoss(where(offset) + ": the " + std::string(to_string(compression)) +
                         " stream ends before its trailer (file truncated?)");
        }
        break;
      }
      if (stream_ended) {
        // More bytes after a finished stream: another concatenated stream (gzip members).
        if (inflateReset(&zs) != Z_OK) throw Internal("zlib inflateReset failed");
        stream_ended = false;
        stream_started = false;
      }
      zs.next_in = reinterpret_cast<Bytef*>(in.data() + in_pos);
      zs.avail_in = static_cast<uInt>(in.size() - in_pos);
      zs.next_out = reinterpret_cast<Bytef*>(dst + got);
      const std::size_t want = std::min<std::size_t>(n - got, 1u << 30);
      zs.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&zs, Z_NO_FLUSH);
      const std::size_t consumed = (in.size() - in_pos) - zs.avail_in;
      if (consumed > 0) stream_started = true;
      in_pos += consumed;
      got += want - zs.avail_out;
      if (rc == Z_STREAM_END) {
        stream_ended = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        throw DataLoss(where(offset) + ": corrupt " + std::string(to_string(compression)) +
                       " stream (" + (zs.msg ? zs.msg : "zlib data error") + ")");
      } else if (rc == Z_MEM_ERROR) {
        throw Internal("zlib out of memory reading " + path.string());
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Internal("zlib inflate failed (" + std::to_string(rc) + ") reading " + path.string());
      }
    }
    return got;
  }

  // Reads up to n bytes of the (uncompressed) record stream; fewer only at its end.
  std::size_t read_stream(char* dst, std::size_t n) {
    return compression == TFRecordCompression::kNone ? read_raw(dst, n) : read_inflated(dst, n);
  }

  ~Impl() {
    if (zs_live) inflateEnd(&zs);
    if (fd >= 0) ::close(fd);
  }
};

TFRecordReader::TFRecordReader(const std::filesystem::path& path, TFRecordCompression compression)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->compression = compression;
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw NotFound("TFRecord file " + path.string() + " does not exist");
    impl_->fail_io("cannot open", err);
  }
  if (compression != TFRecordCompression::kNone) {
    if (inflateInit2(&impl_->zs, window_bits(compression)) != Z_OK) {
      throw Internal("zlib inflateInit2 failed for " + path.string());
    }
    impl_->zs_live = true;
  }
}

TFRecordReader::~TFRecordReader() = default;
TFRecordReader::TFRecordReader(TFRecordReader&&) noexcept = default;
TFRecordReader& TFRecordReader::operator=(TFRecordReader&&) noexcept = default;

bool TFRecordReader::read(std::string& record) {
  Impl& r = *impl_;
  unsigned char header[kHeaderSize];
  const std::size_t h = r.read_stream(reinterpret_cast<char*>(header), kHeaderSize);
  if (h == 0) return false;
  if (h < kHeaderSize) {
    throw DataLoss(r.where(r.offset) + ": truncated header (" + std::to_string(h) + " of " +
                   std::to_string(kHeaderSize) + " bytes before end of file)");
  }
  const std::uint64_t length = get_le64(header);
  const std::uint32_t length_crc = get_le32(header + 8);
  const std::uint32_t want_length_crc =
      masked_crc32c(std::span<const std::byte>(reinterpret_cast<const std::byte*>(header), 8));
  if (length_crc != want_length_crc) {
    throw DataLoss(r.where(r.offset) + ": corrupt length (the file's masked CRC32C of the length is " +
                   hex32(length_crc) + ", computed " + hex32(want_length_crc) + ")" +
                   (r.offset == 0 && r.compression == TFRecordCompression::kNone
                        ? "; if the file is compressed, read it with GZIP or ZLIB compression"
                        : ""));
  }
  // Grow the buffer as bytes arrive: a corrupt (but CRC-valid) length cannot force a huge
  // allocation.
  record.clear();
  std::uint64_t got = 0;
  while (got < length) {
    const std::uint64_t step = std::min<std::uint64_t>(length - got, std::max<std::uint64_t>(got, 1u << 20));
    record.resize(static_cast<std::size_t>(got + step));
    const std::size_t k = r.read_stream(record.data() + got, static_cast<std::size_t>(step));
    got += k;
    if (k < step) {
      record.resize(static_cast<std::size_t>(got));
      throw DataLoss(r.where(r.offset) + ": truncated data (" + std::to_string(got) + " of " +
                     std::to_string(length) + " bytes before end of file)");
    }
  }
  unsigned char footer[kFooterSize];
  const std::size_t f = r.read_stream(reinterpret_cast<char*>(footer), kFooterSize);
  if (f < kFooterSize) {
    throw DataLoss(r.where(r.offset) + ": truncated data CRC (" + std::to_string(f) + " of " +
                   std::to_string(kFooterSize) + " bytes before end of file)");
  }
  const std::uint32_t data_crc = get_le32(footer);
  const std::uint32_t want_data_crc = masked_crc32c(std::string_view(record));
  if (data_crc != want_data_crc) {
    throw DataLoss(r.where(r.offset) + ": corrupt data of " + std::to_string(length) +
                   " bytes (the file's masked CRC32C is " + hex32(data_crc) + ", computed " +
                   hex32(want_data_crc) + ")");
  }
  r.offset += kHeaderSize + length + kFooterSize;
  return true;
}

std::optional<std::string> TFRecordReader::next() {
  std::string record;
  if (!read(record)) return std::nullopt;
  return record;
}

std::uint64_t TFRecordReader::offset() const noexcept { return impl_->offset; }
const std::filesystem::path& TFRecordReader::path() const noexcept { return impl_->path; }

std::vector<std::string> read_tfrecord_file(const std::filesystem::path& path,
                                            TFRecordCompression compression) {
  TFRecordReader reader(path, compression);
  std::vector<std::string> records;
  std::string record;
  while (reader.read(record)) records.push_back(std::move(record));
  return records;
}

void write_tfrecord_file(const std::filesystem::path& path, const std::vector<std::string>& records,
                         TFRecordWriterOptions options) {
  TFRecordWriter writer(path, options);
  for (const auto& r : records) writer.write(r);
  writer.close();
}

}  // namespace tensorhub
