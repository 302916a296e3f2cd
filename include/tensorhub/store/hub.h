// Hub: datasets, models and training logs of one project in one database, with
// TensorLayer TensorHub's method names (save_dataset, find_top_model, ...).
//
//   tensorhub::Hub hub("sqlite:///tmp/hub.db", "mnist");
//   hub.save_dataset(tensors, "mnist", {{"description", "..."}});
//   auto best = hub.find_top_model("mlp", {}, {{"test_accuracy", -1}});
//   tensorhub::Hub reader("sqlite:///tmp/hub.db", "mnist", tensorhub::OpenMode::kReadOnly);
//
// Filters and sorts are MongoDB's and mean the same on SQLite and PostgreSQL: a filter
// selects the documents MongoDB would select (operators, type bracketing, null and missing
// fields, array elements, and what is left out: tensorhub/store/query.h), and sorts follow
// MongoDB's order across types (SortSpec, document.h). NaN and +/-Infinity in tags and logs
// are kept and sort and filter as numbers (encode_non_finite, document.h).
//
// A Hub is one database connection: use it from one thread at a time; open one per thread
// or process. Datasets and weights are named tensors stored as safetensors blobs; nothing is
// pickled and every blob is verified (SHA-256) on read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/backend.h"
#include "tensorhub/store/document.h"
#include "tensorhub/store/model_aliases.h"

namespace tensorhub {

class BlobCache;  // tensorhub/store/blob_cache.h

/// A dataset as loaded from the hub: its document and its tensors.
struct DatasetRecord {
  Document document;
  NamedTensors tensors;
};

/// A model as loaded from the hub: its document (tags such as test_accuracy, name), its
/// architecture (model.json) and its weights (weights.safetensors). Model::from_parts
/// rebuilds the network from the last two.
struct ModelRecord {
  Document document;
  Json architecture;
  NamedTensors weights;
};

/// How to open a hub, as LevelDB's Options: plain fields with their defaults.
struct HubOptions {
  /// "sqlite:///abs/path/hub.db" or "postgresql://user:password@host:port/db" (uri.h).
  std::string uri = default_hub_uri();
  /// The project whose documents and tasks this Hub reads and writes (non-empty).
  std::string project_name = "default";
  /// kCreate makes the hub where there is none; kExisting throws NotFound instead; kReadOnly
  /// also never writes it (OpenMode).
  OpenMode mode = OpenMode::kCreate;
  /// Dataset and model blobs are read through this per-machine cache (blob_cache.h) when set,
  /// so that a blob crosses the network once per machine; nullptr reads from the database.
  std::shared_ptr<BlobCache> blob_cache;
};

class Hub {
 public:
  /// Opens the hub `options` describe. Throws what open_backend throws (InvalidArgument for a
  /// malformed URI, NotFound with kExisting where there is no hub, Unavailable when the
  /// database cannot be reached, FailedPrecondition for a newer schema) and InvalidArgument
  /// for an empty project name.
  explicit Hub(const HubOptions& options);

  /// Opens the hub at `uri` (see open_backend and uri.h) for project `project_name`.
  ///
  /// `mode` says what happens where no hub exists yet:
  ///  - OpenMode::kCreate (the default) creates it: a new SQLite file, or tensorhub's tables
  ///    in an existing PostgreSQL database. Use it where something is saved.
  ///  - OpenMode::kExisting creates nothing and throws NotFound ("no hub at <uri> ...") when
  ///    the SQLite file does not exist or holds no tensorhub schema, or the PostgreSQL
  ///    database has no tensorhub tables. Use it where the hub is only read (listings,
  ///    serving a hub's model): a mistyped URI is then an error, not an empty hub.
  ///  - OpenMode::kReadOnly opens only a hub that exists, as kExisting, and never writes it:
  ///    it works where the user may only read the hub (file modes, a read-only mount, a
  ///    PostgreSQL role with SELECT only), and every write throws FailedPrecondition "the hub
  ///    ... is read-only (...)" at once (backend.h says how SQLite reads then). Use it where
  ///    the hub is only read: listings, fetch, serving, the dashboard.
  /// kCreate and kExisting migrate a hub written by an older tensorhub, and throw the same
  /// FailedPrecondition at once where this user may not write the hub; kReadOnly throws
  /// FailedPrecondition for an older hub, saying how to bring it forward. The URI's "%XX" escapes are
  /// decoded (a SQLite path with "%20"; libpq decodes a PostgreSQL password's), and no
  /// message shows its password. Throws what open_backend throws. The same as
  /// Hub(HubOptions{uri, project_name, mode}).
  explicit Hub(const std::string& uri = default_hub_uri(), std::string project_name = "default",
               OpenMode mode = OpenMode::kCreate);
  /// Wraps an open backend (tests).
  Hub(std::unique_ptr<Backend> backend, std::string project_name);
  ~Hub();
  Hub(Hub&&) noexcept;
  Hub& operator=(Hub&&) noexcept;

  const std::string& project_name() const { return project_name_; }
  /// A Hub of project `project_name` over this hub's connection (not a new one): e.g. the
  /// dashboard's counts of every project. The two share one connection, so use them from
  /// one thread; the connection lives as long as either. Throws InvalidArgument for "".
  Hub with_project(std::string project_name) const;
  /// The database connection as SQL (sql.h), for modules that keep tables of their own in
  /// the hub's database (queue/'s tasks, tune/'s leases) and for change notifications.
  /// Programs use the Hub and TaskQueue APIs.
  sql::Connection& sql() { return backend_->sql(); }

  // ---- the hub as a whole ------------------------------------------------------------------

  /// The URI the hub was opened from (with its password: runners hand it to their tasks).
  std::string uri() const { return backend_->uri(); }
  /// uri() with any password replaced by "***", for messages and logs.
  std::string display_uri() const { return backend_->display_uri(); }
  /// Bytes the hub takes on disk: SQLite, the database file and its WAL; PostgreSQL,
  /// tensorhub's tables with their indexes and TOAST data. Throws Unavailable.
  std::int64_t storage_bytes() { return backend_->storage_bytes(); }
  /// Number of blobs stored (parts shared by documents of every project).
  std::int64_t count_blobs() { return backend_->count_blobs(); }
  /// Gives the space of deleted documents and blobs back to the operating system (SQLite:
  /// VACUUM; PostgreSQL: VACUUM FULL, locking each table while it is rewritten); see
  /// Backend::compact. Throws Unavailable when the database stays busy.
  void compact() { backend_->compact(); }
  /// True when this project holds no document of any collection (dataset, model, log, or a
  /// module's own, as the tuner's trials), e.g. a mistyped project name. Tasks are the
  /// queue's: TaskQueue::count_tasks tells of those.
  bool project_empty();
  /// Every project of the hub that holds a document, sorted by name (this one only if it
  /// holds something). Projects that hold only tasks: TaskQueue::list_projects. Throws
  /// Unavailable.
  std::vector<std::string> list_projects() { return backend_->list_projects(); }

  // ---- any collection, chosen at run time (e.g. by a command-line flag) -------------------

  /// Documents of collection `c` matching `filter` (a JSON object), ordered by `sort` then by
  /// id, at most `limit` (0 = all). Throws InvalidArgument for a non-object filter or an
  /// operator the store does not know.
  std::vector<Document> find_documents(Collection c, const Json& filter, const SortSpec& sort = {},
                                       std::int64_t limit = 0);
  /// Number of documents of `c` matching `filter`, counted by the database. Throws
  /// InvalidArgument as find_documents.
  std::int64_t count_documents(Collection c, const Json& filter = Json::object());
  /// Deletes matching documents of `c` and their now unreferenced blobs; returns how many.
  std::int64_t delete_documents(Collection c, const Json& filter);
  /// Stores a document of `tags` (a JSON object) in `c` with `parts` read from their
  /// sources (one 1 MiB chunk in memory at a time, see Backend::insert_document), in one
  /// transaction; returns its id. Throws InvalidArgument for non-object tags, DataLoss if a
  /// source's bytes change while they are stored.
  std::int64_t save_document(Collection c, const Json& tags, const PartSources& parts);
  /// The same for parts held in memory (none by default).
  std::int64_t save_document(Collection c, const Json& tags, const Parts& parts = {});

  // ---- datasets --------------------------------------------------------------------------

  /// Saves `tensors` as dataset `dataset_name` with extra `tags` (a JSON object, e.g.
  /// {"description": "..."}). Returns the document id. Throws InvalidArgument for non-object tags.
  std::int64_t save_dataset(const NamedTensors& tensors, const std::string& dataset_name,
                            const Json& tags = Json::object());
  /// save_dataset for tensors whose bytes another owner holds (numpy arrays), stored straight
  /// from them. The bytes must not change until it returns; if they do, it throws DataLoss
  /// and stores nothing (the store hashes a blob, then hashes it again as it writes it).
  std::int64_t save_dataset_views(const NamedTensorViews& tensors, const std::string& dataset_name,
                                  const Json& tags = Json::object());
  /// The first dataset named `dataset_name` matching `filter` in `sort` order, with ties (and
  /// datasets that lack the sort keys) newest first, with its tensors; nothing if none matches. Throws
  /// FailedPrecondition for a sharded dataset (TFRecord shards: read it shard by shard, see
  /// dataset_shards.h), DataLoss when its blob fails verification.
  std::optional<DatasetRecord> find_top_dataset(const std::string& dataset_name,
                                                const Json& filter = Json::object(),
                                                const SortSpec& sort = {});
  /// The bytes of blob `sha256` (a part of a document found here), verified: through the
  /// blob cache when one is set (set_blob_cache), else straight from the database. Throws
  /// NotFound for an unknown blob, DataLoss naming it when it fails verification.
  std::vector<std::byte> read_blob(const std::string& sha256);
  /// The tensors of the safetensors blob `sha256` (a dataset's or a model's weights),
  /// verified as read_blob verifies them. Without a blob cache, each chunk is copied straight
  /// into the tensor it belongs to as it arrives (SafetensorsDecoder), so that the blob is
  /// never in memory twice. Throws NotFound for an unknown blob, DataLoss naming it when it
  /// fails verification or is not valid safetensors.
  NamedTensors read_tensors(const std::string& sha256);
  /// Streams blob `sha256` from the database to `sink`, one chunk (at most 1 MiB) per call,
  /// never through the blob cache; see Backend::read_blob_chunks for when the bytes are
  /// verified and what it throws. Returns the size in bytes.
  std::uint64_t read_blob_chunks(const std::string& sha256, const Backend::BlobChunkSink& sink) {
    return backend_->read_blob_chunks(sha256, sink);
  }
  /// Reads dataset and model blobs through `cache` from now on (nullptr: straight from the
  /// database, the default), so that a blob crosses the network once per machine; runners'
  /// trials do (train-spec). The cache may be shared by several hubs and threads.
  void set_blob_cache(std::shared_ptr<BlobCache> cache) { blob_cache_ = std::move(cache); }
  /// The cache set with set_blob_cache, or nullptr.
  BlobCache* blob_cache() const noexcept { return blob_cache_.get(); }
  /// Matching dataset documents (without tensors) in `sort` order, ties newest first.
  std::vector<Document> find_datasets(const Json& filter = Json::object(), const SortSpec& sort = {},
                                      std::int64_t limit = 0);
  /// Deletes matching datasets and their now unreferenced blobs; returns how many.
  std::int64_t delete_datasets(const Json& filter = Json::object());

  // ---- models ----------------------------------------------------------------------------

  /// Saves a model: `architecture` (model.json) and `weights`, named `model_name`, with
  /// `tags` such as {"test_accuracy": 0.87, "name": "800-800"}. Returns the document id.
  /// `extra_parts` are further files of the saved-model directory stored as they are, e.g.
  /// "optimizer.safetensors" and "state.json" (Model::save) so that training can resume
  /// exactly; read them back with load_model_part. Throws InvalidArgument for non-object
  /// tags or an extra part named "model.json" or "weights.safetensors".
  std::int64_t save_model(const Json& architecture, const NamedTensors& weights,
                          const std::string& model_name, const Json& tags = Json::object(),
                          const Parts& extra_parts = {});
  /// The bytes of part `part` (e.g. "optimizer.safetensors") of a model document, verified
  /// like every blob; nothing if the model was saved without it. Throws DataLoss if the
  /// blob fails verification.
  std::optional<std::vector<std::byte>> load_model_part(const Document& document, const std::string& part);
  /// The first model named `model_name` matching `filter` in `sort` order, with ties (and
  /// models that lack the sort keys) newest first, with architecture and weights; nothing if
  /// none matches. Throws DataLoss if its blobs fail verification.
  std::optional<ModelRecord> find_top_model(const std::string& model_name,
                                            const Json& filter = Json::object(),
                                            const SortSpec& sort = {});
  /// Matching model documents (without weights) in `sort` order, ties newest first.
  std::vector<Document> find_models(const Json& filter = Json::object(), const SortSpec& sort = {},
                                    std::int64_t limit = 0);
  /// Loads architecture and weights of a model document found with find_models.
  ModelRecord load_model(const Document& document);
  /// Deletes matching models and their now unreferenced blobs; returns how many. A model an
  /// alias names is not deleted unless `force`: throws FailedPrecondition naming the model,
  /// its aliases and how to move them (`tensorhub model alias set|delete`), deleting nothing.
  /// With `force` the aliases of the models are deleted first, each recorded in its history
  /// with the reason "model N deleted", then the models. The database's foreign key keeps an
  /// alias from naming a deleted model whatever runs meanwhile: an alias pointed at one of
  /// them between the two steps makes the delete throw FailedPrecondition, deleting nothing.
  std::int64_t delete_models(const Json& filter = Json::object(), bool force = false);

  // ---- model aliases (model_aliases.h: MLflow's aliases, with history) -------------------

  /// Points alias `alias` of model `model_name` at model document `model_id` (creating the
  /// alias or moving it) and appends the move to its history, in one write transaction.
  /// Returns the id it pointed at before (nothing if it is new). Setting it to where it
  /// already points changes nothing and records nothing. Throws InvalidArgument for a bad
  /// alias name (check_alias_name), NotFound when `model_id` is not a model named
  /// `model_name` in this project, FailedPrecondition on a read-only hub, Unavailable.
  std::optional<std::int64_t> set_model_alias(const std::string& model_name, const std::string& alias,
                                              std::int64_t model_id, const AliasChangeOptions& how = {});
  /// Deletes alias `alias` of `model_name`, recording it in the history; returns the id it
  /// pointed at, or nothing (and records nothing) when there was no such alias.
  std::optional<std::int64_t> delete_model_alias(const std::string& model_name, const std::string& alias,
                                                 const AliasChangeOptions& how = {});
  /// Where alias `alias` of `model_name` points, or nothing.
  std::optional<ModelAlias> find_model_alias(const std::string& model_name, const std::string& alias);
  /// Every alias of `model_name` ("" = of every model of the project), by model name then
  /// alias.
  std::vector<ModelAlias> find_model_aliases(const std::string& model_name = "");
  /// The moves of `model_name`'s aliases (only alias `alias`'s unless ""), oldest first.
  std::vector<ModelAliasChange> model_alias_history(const std::string& model_name, const std::string& alias = "");
  /// The model alias `alias` of `model_name` names, with architecture and weights; nothing
  /// when there is no such alias. Throws DataLoss as load_model.
  std::optional<ModelRecord> find_model_by_alias(const std::string& model_name, const std::string& alias);

  // ---- logs (TensorHub's save_training_log(**kwargs) etc.) --------------------------------

  std::int64_t save_training_log(const Json& fields);
  std::int64_t save_validation_log(const Json& fields);
  std::int64_t save_testing_log(const Json& fields);
  std::vector<Document> find_training_logs(const Json& filter = Json::object(), const SortSpec& sort = {});
  std::vector<Document> find_validation_logs(const Json& filter = Json::object(), const SortSpec& sort = {});
  std::vector<Document> find_testing_logs(const Json& filter = Json::object(), const SortSpec& sort = {});
  std::int64_t delete_training_logs(const Json& filter = Json::object());
  std::int64_t delete_validation_logs(const Json& filter = Json::object());
  std::int64_t delete_testing_logs(const Json& filter = Json::object());

 private:
  Hub(std::shared_ptr<Backend> backend, std::string project_name);

  std::shared_ptr<Backend> backend_;
  std::string project_name_;
  std::shared_ptr<BlobCache> blob_cache_;
};

/// Adds {name_key: name} to `filter` (which must be an object). Used by find_top_* helpers.
Json with_name(const Json& filter, const std::string& name_key, const std::string& name);

}  // namespace tensorhub
