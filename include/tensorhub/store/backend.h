// Backend: the storage under Hub. One implementation per database (SQLite embedded,
// PostgreSQL shared); the hub test suite runs against each. A backend keeps documents (find,
// save, delete, count, by collection) and blobs (chunked, verified), and gives the modules
// that keep tables of their own (queue/'s tasks, tune/'s leases) its connection as SQL
// (sql.h: statements, transactions, the database clock, change notifications).
//
// Thread safety: a Backend object is one database connection; use it from one thread at a
// time. Any number of processes may open backends on the same database.
// Errors: Unavailable when the database cannot be reached, DataLoss when stored bytes fail
// verification, InvalidArgument for a malformed filter or sort, NotFound for an unknown blob
// or a missing hub (OpenMode::kExisting), FailedPrecondition for a hub of a newer schema or a
// write to a hub that may only be read (OpenMode::kReadOnly, file permissions, a role with
// SELECT only), Internal for anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/store/document.h"
#include "tensorhub/store/sql.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {

/// A named collection of documents. TensorHub's are the constants below; a module above the
/// store keeps its own by name (tune/'s `trials`, queue/'s `epoch_reports`). The name is what
/// each document's row stores: lowercase letters, digits and '_', given as a string literal.
class Collection {
 public:
  constexpr explicit Collection(std::string_view name) : name_(name) {}
  constexpr std::string_view name() const noexcept { return name_; }
  friend constexpr bool operator==(Collection, Collection) = default;

  static const Collection kDatasets, kModels, kTrainingLogs, kValidationLogs, kTestingLogs;

 private:
  std::string_view name_;
};
inline constexpr Collection Collection::kDatasets{"datasets"};
inline constexpr Collection Collection::kModels{"models"};
inline constexpr Collection Collection::kTrainingLogs{"training_logs"};
inline constexpr Collection Collection::kValidationLogs{"validation_logs"};
inline constexpr Collection Collection::kTestingLogs{"testing_logs"};

/// The collection's stored name, e.g. "datasets".
inline std::string to_string(Collection c) { return std::string(c.name()); }

/// Named byte strings stored with a document as content-addressed blobs.
using Parts = std::map<std::string, std::vector<std::byte>>;

/// A blob's bytes produced on demand, in order and in pieces, so that a large blob (a
/// dataset's safetensors) is stored without ever being in memory whole: backends read it
/// twice, once to hash it and once to store its chunks.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  /// Total bytes write() produces.
  virtual std::uint64_t size() const = 0;
  /// Passes the bytes to `sink` in order; every call produces the same size() bytes.
  virtual void write(const std::function<void(std::span<const std::byte>)>& sink) const = 0;
};

/// A BlobSource over bytes already in memory (not copied: they must outlive it).
class BytesBlobSource final : public BlobSource {
 public:
  explicit BytesBlobSource(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void write(const std::function<void(std::span<const std::byte>)>& sink) const override { sink(bytes_); }

 private:
  std::span<const std::byte> bytes_;
};

/// A BlobSource over a file, read in 1 MiB pieces each time (never whole in memory), e.g. a
/// TFRecord shard. The file must not change while it is stored: write() throws DataLoss
/// naming the file if its size differs from the one seen at construction.
class FileBlobSource final : public BlobSource {
 public:
  /// Throws NotFound naming `path` if it is not a regular file, Unavailable if it cannot be read.
  explicit FileBlobSource(std::filesystem::path path);
  std::uint64_t size() const override { return size_; }
  /// Throws Unavailable naming the file if reading fails, DataLoss if its size changed.
  void write(const std::function<void(std::span<const std::byte>)>& sink) const override;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::uint64_t size_;
};

/// Named parts given as sources (not owned: they must outlive the call).
using PartSources = std::map<std::string, const BlobSource*>;

class Backend {
 public:
  virtual ~Backend() = default;

  /// The URI this backend was opened from (with its password: runners pass it to tasks).
  virtual std::string uri() const = 0;
  /// uri() with any password replaced by "***" (mask_passwords), for logs and messages.
  std::string display_uri() const { return mask_passwords(uri()); }

  /// The connection as SQL, for modules that keep tables of their own in the hub's database
  /// (queue/'s tasks, tune/'s leases) and for change notifications. Lives as long as the
  /// backend.
  virtual sql::Connection& sql() = 0;

  // ---- documents -------------------------------------------------------------------------

  /// Stores `parts` as blobs (deduplicated by SHA-256, in 1 MiB chunks written one at a time,
  /// so memory stays at a chunk whatever the blob's size) and a document referencing them, in
  /// one transaction. Returns the new document's id. Throws DataLoss if a source's bytes
  /// change between its two reads.
  virtual std::int64_t insert_document(Collection c, const std::string& project, const Json& tags,
                                       const PartSources& parts) = 0;
  /// The same for parts held in memory.
  std::int64_t insert_document(Collection c, const std::string& project, const Json& tags, const Parts& parts);

  /// Documents of `project` matching `filter` (see query.h for the operators), ordered by
  /// `sort` then by id, at most `limit` (0 = all).
  virtual std::vector<Document> find_documents(Collection c, const std::string& project,
                                               const Json& filter, const SortSpec& sort,
                                               std::int64_t limit) = 0;

  /// Number of documents of `project` matching `filter` (counted by the database, no
  /// document is read). Throws InvalidArgument for a malformed filter, as find_documents.
  virtual std::int64_t count_documents(Collection c, const std::string& project, const Json& filter) = 0;

  /// Every project that holds a document (of any collection), sorted by name (bytewise, the
  /// same on both backends).
  virtual std::vector<std::string> list_projects() = 0;

  /// Deletes matching documents, then every blob no document references any more.
  /// Returns the number of documents deleted. SQLite also gives the freed pages back to the
  /// file system (incremental vacuum, for hubs created with it; see compact());
  /// PostgreSQL leaves the space to autovacuum, which makes it reusable by the database.
  virtual std::int64_t delete_documents(Collection c, const std::string& project,
                                        const Json& filter) = 0;

  // ---- blobs -----------------------------------------------------------------------------

  /// Receives a blob's bytes in order, one stored chunk (at most 1 MiB) per call.
  using BlobChunkSink = std::function<void(std::span<const std::byte> chunk)>;

  /// Streams blob `sha256` to `sink`, one stored chunk (at most 1 MiB) per call, so memory
  /// stays at a chunk whatever the blob's size. The chunk count, the size and the SHA-256 of
  /// the whole blob are verified *before* its last chunk is passed on: a sink never receives
  /// all of a blob that fails verification, and the call returns only for a verified blob.
  /// REQUIRES of the sink: treat the bytes as unverified until the call returns (earlier
  /// chunks of a corrupt blob do reach it); commit any effect of them only then, e.g. write
  /// a temporary file and rename it afterwards (BlobCache does). Holds a read transaction
  /// while the sink runs (other processes may still write). Returns the size in bytes.
  /// Throws NotFound for an unknown id; DataLoss naming the blob when a chunk is missing,
  /// the size differs from its record or the bytes do not hash to `sha256`; whatever `sink`
  /// throws (the read is abandoned).
  virtual std::uint64_t read_blob_chunks(const std::string& sha256, const BlobChunkSink& sink) = 0;

  /// The whole blob in memory (read_blob_chunks into one buffer): for small blobs (model
  /// parts, a dataset's tensors). Throws what read_blob_chunks throws.
  std::vector<std::byte> read_blob(const std::string& sha256);

  /// Size in bytes of blob `sha256` as recorded, or nothing when it is not stored.
  virtual std::optional<std::uint64_t> blob_size(const std::string& sha256) = 0;

  /// Number of blobs stored (tests; the CLI's deletes report the blobs freed).
  virtual std::int64_t count_blobs() = 0;

  // ---- space -----------------------------------------------------------------------------

  /// Bytes the hub takes on disk: SQLite, the database file and its WAL; PostgreSQL,
  /// tensorhub's tables with their indexes and TOAST data.
  virtual std::int64_t storage_bytes() = 0;

  /// Gives the space of deleted documents and blobs back to the operating system.
  /// SQLite: VACUUM, which also turns on incremental vacuum for a hub created before
  /// delete_documents did it, then a WAL checkpoint; it needs free disk space for a copy of
  /// the database and waits for other processes' transactions. PostgreSQL: VACUUM FULL of
  /// tensorhub's tables (each is locked while it is rewritten; without it, autovacuum makes
  /// the space of deleted rows reusable by the database but keeps the files' size).
  /// Throws Unavailable when the database stays busy.
  virtual void compact() = 0;
};

/// What opening a hub does where there is none yet, and whether it is written.
enum class OpenMode {
  /// Creates the hub when missing: the SQLite file, or tensorhub's tables in the PostgreSQL
  /// database (which must exist). For programs that save something: task create, dataset
  /// import, runners, tuners, trainers.
  kCreate,
  /// Opens only a hub that exists: a SQLite file that holds tensorhub's schema, or a
  /// PostgreSQL database with tensorhub's tables. Nothing is created, so a mistyped URI is
  /// reported (NotFound, "no hub at ...") instead of showing an empty hub. For programs that
  /// change what is there (delete, cancel) or must bring an older hub forward.
  kExisting,
  /// Opens only a hub that exists (as kExisting), to read it: nothing is ever written, not
  /// even a schema migration, so it works where the user may only read the hub (a SQLite
  /// file or directory without write permission, a read-only mount, a PostgreSQL role with
  /// SELECT only). Every write throws FailedPrecondition "the hub ... is read-only (...)" at
  /// once. For programs that only read: listings, fetch, serving a hub's model, the dashboard.
  ///
  /// SQLite: a hub the user may write is opened as usual (the WAL is kept tidy); otherwise
  /// read-only (SQLITE_OPEN_READONLY), reading through the -wal and -shm files of a writer
  /// when there are some. Where there are none and none can be made (a read-only directory
  /// or mount), SQLite can read a WAL-mode file only as immutable (its documented way for
  /// read-only media, sqlite.org/wal.html#readonly); then each read checks the file's size,
  /// times and inode and that no -wal file has appeared, reopens the hub when one did
  /// (a writer came), and throws Unavailable ("changed while it was read") when the file
  /// changed during the read itself, so that no torn read is ever returned.
  kReadOnly,
};

/// Opens a backend from a URI (see uri.h): "sqlite:///abs/path/hub.db" or
/// "postgresql://user:pass@host:port/db". Migrates an older schema; with OpenMode::kCreate
/// also creates a missing one; with OpenMode::kReadOnly writes nothing (an older schema
/// throws FailedPrecondition saying how to bring it forward). Throws InvalidArgument for an
/// unknown scheme or a malformed URI, NotFound (kExisting, kReadOnly) when there is no hub at
/// the URI, Unavailable if the database cannot be opened or reached, FailedPrecondition if it
/// was written by a newer tensorhub, or when kCreate or kExisting find a hub this user may
/// not write ("the hub ... is read-only (why): what to do"). Messages never show the URI's
/// password.
std::unique_ptr<Backend> open_backend(const std::string& uri, OpenMode mode = OpenMode::kCreate);

/// True for the error a write to a read-only hub throws (FailedPrecondition "the hub ... is
/// read-only (...)"): from open_backend with kCreate or kExisting on a hub this user may not
/// write, or from a write on a hub opened with kReadOnly. A program that can work either way
/// (read, and tidy up where allowed) opens with kExisting and falls back to kReadOnly on it.
bool is_read_only_error(const Error& e) noexcept;

/// "sqlite:///<cwd>/tensorhub.db", the embedded default.
std::string default_hub_uri();

}  // namespace tensorhub
