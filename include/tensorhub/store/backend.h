// Backend: the storage interface under Hub and the task queue. One implementation per
// database (SQLite embedded, PostgreSQL shared); the hub test suite runs against each.
//
// Thread safety: a Backend object is one database connection; use it from one thread at a
// time. Any number of processes may open backends on the same database.
// Errors: Unavailable when the database cannot be reached, DataLoss when stored bytes fail
// verification, InvalidArgument for a malformed filter or sort, Internal for anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"
#include "tensorhub/store/task.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {

/// Collections of documents, as in TensorHub, plus the tuner's `trials` (searches, their
/// state and the per-epoch values trials report).
enum class Collection { kDatasets, kModels, kTrainingLogs, kValidationLogs, kTestingLogs, kTrials };
std::string to_string(Collection c);

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

/// Named parts given as sources (not owned: they must outlive the call).
using PartSources = std::map<std::string, const BlobSource*>;

/// A named lease as it stands: who holds it and for how much longer.
struct Lease {
  std::string owner;              ///< the holder; "" when nobody holds it
  std::int64_t remaining_us = 0;  ///< until it expires, on the database's clock; <= 0 once expired
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// The URI this backend was opened from (with its password: runners pass it to tasks).
  virtual std::string uri() const = 0;
  /// uri() with any password replaced by "***" (mask_passwords), for logs and messages.
  std::string display_uri() const { return mask_passwords(uri()); }

  // ---- notifications ---------------------------------------------------------------------

  /// A file descriptor that becomes readable when a process changes the task queue (a task
  /// created, finished, failed, released or cancelled), or -1 when the backend has no
  /// notifications (SQLite: callers poll). The first call starts listening (PostgreSQL
  /// LISTEN); the descriptor may change after a reconnect, so ask again before each wait.
  virtual int notification_fd() { return -1; }
  /// Reads and discards pending notifications; true if any had arrived.
  virtual bool consume_notifications() { return false; }

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

  /// Deletes matching documents, then every blob no document references any more.
  /// Returns the number of documents deleted. SQLite also gives the freed pages back to the
  /// file system (incremental vacuum, for hubs created with it; see compact());
  /// PostgreSQL leaves the space to autovacuum, which makes it reusable by the database.
  virtual std::int64_t delete_documents(Collection c, const std::string& project,
                                        const Json& filter) = 0;

  // ---- blobs -----------------------------------------------------------------------------

  /// Reads a blob and verifies its size and SHA-256. Throws NotFound for an unknown id and
  /// DataLoss (naming the blob) when the stored bytes do not hash to it.
  virtual std::vector<std::byte> read_blob(const std::string& sha256) = 0;

  /// Number of blobs stored, for tests and `tensorhub status`.
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

  // ---- named leases (one tuner per search) -----------------------------------------------

  /// Takes lease `name` of `project` for `owner` until now + lease_us, atomically across
  /// processes and machines, when nobody holds it, its holder let it expire, or `owner`
  /// holds it already (then it is extended). Returns the lease as it stands after the call:
  /// `owner` holds it, or the other holder still does (untouched). Owners must be unique
  /// per holder (e.g. host, pid and a random part): a lease belongs to its owner string.
  virtual Lease acquire_lease(const std::string& project, const std::string& name, const std::string& owner,
                              std::int64_t lease_us) = 0;
  /// Extends `owner`'s lease to now + lease_us. False when `owner` no longer holds it (another
  /// owner took it after it expired, or it was released): the holder must stop. A lease that
  /// expired but that nobody took is still `owner`'s and is renewed.
  virtual bool renew_lease(const std::string& project, const std::string& name, const std::string& owner,
                           std::int64_t lease_us) = 0;
  /// Gives the lease up if `owner` holds it; a lease held by another owner is untouched.
  virtual void release_lease(const std::string& project, const std::string& name, const std::string& owner) = 0;

  // ---- tasks -----------------------------------------------------------------------------

  /// Stores a new pending task; returns its id.
  virtual std::int64_t insert_task(const std::string& project, const TaskSpec& spec) = 0;

  /// Atomically claims one claimable task named `task_name` (any name when empty): pending,
  /// or running with an expired lease (which counts as a failed attempt). Sets it running
  /// with lease (owner, now + lease_us) and attempt + 1. Tasks whose expired lease used up
  /// their attempts are failed instead. Returns nothing when no task is claimable.
  virtual std::optional<Task> claim_task(const std::string& project, const std::string& task_name,
                                         const std::string& owner, std::int64_t lease_us,
                                         ClaimOrder order) = 0;

  /// Extends the lease of (id, attempt) to now + lease_us. False when the attempt no longer
  /// holds the task (lease lost, cancelled, finished): the runner must stop the task.
  virtual bool heartbeat_task(std::int64_t id, int attempt, std::int64_t lease_us) = 0;

  /// Marks (id, attempt) finished with `result` and the tail of its output. False (and nothing written) when the
  /// attempt no longer holds the task.
  virtual bool finish_task(std::int64_t id, int attempt, const Json& result, const std::string& log_tail) = 0;

  /// Records a failed attempt: back to pending, or failed once max_attempts failures are
  /// reached. False when the attempt no longer holds the task.
  virtual bool fail_task(std::int64_t id, int attempt, const std::string& error,
                         const std::string& log_tail) = 0;

  /// Gives (id, attempt) back to the queue without counting a failure (runner shutdown).
  virtual bool release_task(std::int64_t id, int attempt) = 0;

  /// Cancels matching pending or running tasks; runners see it at their next heartbeat.
  virtual std::int64_t cancel_tasks(const std::string& project, const Json& filter) = 0;

  /// Requeues or fails running tasks whose lease expired before now. Returns how many.
  virtual std::int64_t reap_expired_tasks(const std::string& project) = 0;

  virtual std::vector<Task> find_tasks(const std::string& project, const Json& filter,
                                       const SortSpec& sort, std::int64_t limit) = 0;
  virtual std::int64_t delete_tasks(const std::string& project, const Json& filter) = 0;

  /// Number of matching tasks per status, e.g. {"pending": 2, "running": 1}.
  virtual std::map<std::string, std::int64_t> count_tasks(const std::string& project,
                                                          const Json& filter) = 0;
};

/// What opening a hub does where there is none yet.
enum class OpenMode {
  /// Creates the hub when missing: the SQLite file, or tensorhub's tables in the PostgreSQL
  /// database (which must exist). For programs that save something: task create, dataset
  /// import, runners, tuners, trainers.
  kCreate,
  /// Opens only a hub that exists: a SQLite file that holds tensorhub's schema, or a
  /// PostgreSQL database with tensorhub's tables. Nothing is created, so a mistyped URI is
  /// reported (NotFound, "no hub at ...") instead of showing an empty hub. For programs that
  /// only read (listings, waiting, serving models from a hub).
  kExisting,
};

/// Opens a backend from a URI (see uri.h): "sqlite:///abs/path/hub.db" or
/// "postgresql://user:pass@host:port/db". Migrates an older schema; with OpenMode::kCreate
/// also creates a missing one. Throws InvalidArgument for an unknown scheme or a malformed
/// URI, NotFound (kExisting) when there is no hub at the URI, Unavailable if the database
/// cannot be opened or reached, FailedPrecondition if it was written by a newer tensorhub.
/// Messages never show the URI's password.
std::unique_ptr<Backend> open_backend(const std::string& uri, OpenMode mode = OpenMode::kCreate);

/// "sqlite:///<cwd>/tensorhub.db", the embedded default.
std::string default_hub_uri();

}  // namespace tensorhub
