// TFRecord files: TensorFlow's record framing, plain or GZIP/ZLIB-compressed.
//
// Format source: tensorflow/core/lib/io/record_writer.cc and record_reader.cc. A file is a
// sequence of records, each
//
//   uint64  length                 little-endian, number of data bytes
//   uint32  masked_crc32c(length)  little-endian, over the 8 length bytes
//   byte    data[length]
//   uint32  masked_crc32c(data)    little-endian
//
// (masked_crc32c in tensorhub/core/crc32c.h). With compression the whole byte stream above is
// compressed as one zlib stream: GZIP = deflate with a gzip wrapper (windowBits 15 + 16), ZLIB =
// deflate with a zlib wrapper (windowBits 15), as TensorFlow's ZlibCompressionOptions do; the
// compression type is not recorded in the file, the reader must be told it (as in TensorFlow).
// A record is usually a serialized tf.train.Example (tensorhub/tf/example.pb.h from
// proto/tensorhub/tf/example.proto) or, in TensorBoard event files, a serialized Event.
//
// Thread safety: a writer or reader object is not thread-safe; use one per thread or lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tensorhub {

/// Compression of a whole TFRecord file (TensorFlow's TFRecordOptions.compression_type).
enum class TFRecordCompression { kNone, kGzip, kZlib };

/// TensorFlow's names: "" or "NONE" -> kNone, "GZIP" -> kGzip, "ZLIB" -> kZlib (upper case, as
/// tf.io.TFRecordOptions writes them; lower case is accepted too).
/// Throws InvalidArgument for any other name, listing the valid ones.
TFRecordCompression parse_tfrecord_compression(std::string_view name);

/// "NONE", "GZIP" or "ZLIB".
std::string_view to_string(TFRecordCompression compression) noexcept;

/// Options for TFRecordWriter; the defaults are TensorFlow's.
struct TFRecordWriterOptions {
  TFRecordCompression compression = TFRecordCompression::kNone;
  /// zlib compression level for GZIP/ZLIB: 0 (store) .. 9 (best), or -1 = Z_DEFAULT_COMPRESSION
  /// (level 6), TensorFlow's default. Ignored without compression.
  int compression_level = -1;
};

/// Writes records to a new TFRecord file.
///
/// Records are buffered in memory (256 KiB) and reach the file on flush(), close(), or when
/// the buffer fills. A compressed file is a complete GZIP/ZLIB stream only after close().
class TFRecordWriter {
 public:
  /// Creates `path` (truncating an existing file) with mode 0644 less the umask.
  /// Throws Unavailable naming the file if it cannot be created (missing directory,
  /// permissions), InvalidArgument for a compression level outside [-1, 9].
  explicit TFRecordWriter(const std::filesystem::path& path, TFRecordWriterOptions options = {});
  /// Closes the file if close() was not called; errors are swallowed here, so call close()
  /// to see them.
  ~TFRecordWriter();
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;
  TFRecordWriter(TFRecordWriter&&) noexcept;
  TFRecordWriter& operator=(TFRecordWriter&&) noexcept;

  /// Appends one record (any bytes, any length, empty allowed).
  /// Throws Unavailable naming the file if writing fails (e.g. disk full),
  /// FailedPrecondition after close().
  void write(std::span<const std::byte> record);
  void write(std::string_view record);

  /// Hands every buffered byte to the operating system (no fsync). With compression, the
  /// stream is sync-flushed (Z_SYNC_FLUSH) so that a reader can decode every record written
  /// so far. Throws as write().
  void flush();

  /// Flushes, finishes the compressed stream, and closes the file. Idempotent.
  /// Throws Unavailable naming the file if a write or the close fails.
  void close();

  const std::filesystem::path& path() const noexcept;
  /// Number of records written so far.
  std::uint64_t records_written() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reads the records of a TFRecord file in order, checking both CRCs of every record.
class TFRecordReader {
 public:
  /// Opens `path`. Throws NotFound naming the file if it does not exist, Unavailable if it
  /// cannot be opened otherwise.
  explicit TFRecordReader(const std::filesystem::path& path,
                          TFRecordCompression compression = TFRecordCompression::kNone);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;
  TFRecordReader(TFRecordReader&&) noexcept;
  TFRecordReader& operator=(TFRecordReader&&) noexcept;

  /// Reads the next record into `record` (replacing its content) and returns true, or returns
  /// false at a clean end of file (the file ends exactly after a record; an empty file has no
  /// records).
  /// Throws DataLoss naming the file and the record's byte offset (in the uncompressed
  /// stream) when the record is truncated (the file ends inside it), the length's CRC or the
  /// data's CRC does not match, or the compressed stream is corrupt or ends before its
  /// trailer. Throws Unavailable if reading the file fails. After an exception the reader
  /// should not be used further.
  /// Memory: a record's buffer grows as its bytes arrive, so a corrupt length cannot make
  /// the reader allocate much more than the file holds.
  bool read(std::string& record);

  /// read() returning the record, or std::nullopt at a clean end of file.
  std::optional<std::string> next();

  /// Byte offset, in the uncompressed stream, of the next record to read (0 at the start;
  /// after a record of n bytes it advances by n + 16).
  std::uint64_t offset() const noexcept;
  const std::filesystem::path& path() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Every record of a file, in order. Throws as TFRecordReader's constructor and read().
std::vector<std::string> read_tfrecord_file(
    const std::filesystem::path& path, TFRecordCompression compression = TFRecordCompression::kNone);

/// Writes `records` to a new file with TFRecordWriter and closes it. Throws as TFRecordWriter.
void write_tfrecord_file(const std::filesystem::path& path, const std::vector<std::string>& records,
                         TFRecordWriterOptions options = {});

}  // namespace tensorhub
