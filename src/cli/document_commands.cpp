// tensorhub dataset|model|log list|show|delete
#include <algorithm>
#include <iostream>
#include <memory>

#include "commands.h"
#include "dataset_tfrecord.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/lineage.h"

namespace tensorhub {
namespace {

// Runs the filter once: an operator the store does not know (InvalidArgument) is a wrong
// command line, said before any work is done.
void check_document_filter(Hub& hub, Collection c, const Json& filter) {
  try {
    hub.find_documents(c, filter, {}, 1);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw UsageError("--filter: " + e.message());
  }
}

struct DocumentArgs {
  HubFlags hub;
  std::string filter;
  std::string sort;
  std::int64_t limit = 0;
  bool json = false;
  bool all = false;
  bool force = false;
  bool lineage = false;
  std::int64_t id = 0;
  std::string kind = "training";
};

Collection log_collection(const std::string& kind) {
  if (kind == "training") return Collection::kTrainingLogs;
  if (kind == "validation") return Collection::kValidationLogs;
  if (kind == "testing") return Collection::kTestingLogs;
  throw UsageError("--kind \"" + kind + "\" is not a log kind; allowed: training, validation, testing");
}

// Table view of a document: id, time, its name, then its tags; blobs are left to `show`.
nlohmann::json row_of(const Document& d) {
  nlohmann::json row = d.to_json();
  row.erase("parts");
  row.erase("project_name");
  return row;
}

void print_documents(const std::vector<Document>& docs, bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : docs) out.push_back(d.to_json());
    std::cout << out.dump(2) << std::endl;
    return;
  }
  std::vector<nlohmann::json> rows;
  std::vector<std::string> columns = {"id", "time"};
  for (const auto& d : docs) {
    rows.push_back(row_of(d));
    for (auto it = d.tags.begin(); it != d.tags.end(); ++it) {
      if (std::find(columns.begin(), columns.end(), it.key()) != columns.end()) continue;
      if (it.key() == "lineage") continue;  // `model show ID --lineage` shows it; --json has it
      // The document's name comes right after its time, as in TensorHub's listings.
      const bool is_name = it.key() == "dataset_name" || it.key() == "model_name";
      columns.insert(is_name ? columns.begin() + 2 : columns.end(), it.key());
    }
  }
  print_table(rows, columns);
}

// Space a delete may give back: the hub's size and blob count before it.
struct SpaceBefore {
  std::int64_t bytes = 0;
  std::int64_t blobs = 0;
};

// Says what a delete gave back: the file's shrinking on SQLite, what happens on PostgreSQL.
void report_space(Hub& hub, const SpaceBefore& before) {
  const std::int64_t blobs_freed = before.blobs - hub.count_blobs();
  if (blobs_freed <= 0) return;  // no blob went: nothing to give back
  const std::int64_t after = hub.storage_bytes();
  if (!hub.uri().starts_with("sqlite://")) {
    std::cout << "freed " << blobs_freed << " blob(s); PostgreSQL's autovacuum makes their space reusable by the "
              << "database (the hub takes " << format_bytes(after)
              << "); `tensorhub hub compact` returns it to the operating system" << std::endl;
  } else if (after < before.bytes) {
    std::cout << "freed " << blobs_freed << " blob(s); the hub file shrank from " << format_bytes(before.bytes)
              << " to " << format_bytes(after) << std::endl;
  } else {
    std::cout << "freed " << blobs_freed << " blob(s); their space stays in the hub file (" << format_bytes(after)
              << ", a hub made before tensorhub gave space back): `tensorhub hub compact` returns it" << std::endl;
  }
}

// `model show ID --lineage`: the chain from the model back to its task and datasets, in words.
void print_lineage(const Json& chain) {
  const Json& m = chain["model"];
  std::cout << "model " << m["id"].get<std::int64_t>() << " \"" << m["model_name"].get<std::string>() << "\"";
  if (!chain["recorded"].get<bool>()) {
    std::cout << ": no lineage recorded (saved before tensorhub recorded it, or with its own \"lineage\" tag)"
              << std::endl;
    return;
  }
  std::cout << ", saved by tensorhub " << chain.value("tensorhub_version", "?") << " (" << chain.value("git_commit", "?")
            << ") on " << chain.value("host", "?") << "\n";
  if (chain.contains("task_id"))
    std::cout << "  <- task " << chain["task_id"].dump() << " (attempt " << chain.value("attempt", Json(0)).dump() << ") \""
              << chain.value("task_name", "") << "\", hyperparameters " << chain.value("hyper_parameters", Json::object()).dump()
              << "\n";
  else
    std::cout << "  <- no task (saved outside a runner)\n";
  if (chain.contains("command")) std::cout << "     command: " << chain["command"].get<std::string>() << "\n";
  if (chain.contains("spec_sha256")) std::cout << "     spec sha256 " << chain["spec_sha256"].get<std::string>() << "\n";
  if (chain.contains("script_sha256"))
    std::cout << "     script " << chain.value("script_name", "") << " sha256 " << chain["script_sha256"].get<std::string>()
              << "\n";
  if (chain["datasets"].empty()) std::cout << "  <- no dataset read from the hub\n";
  for (const Json& d : chain["datasets"])
    std::cout << "  <- dataset " << d["id"].dump() << " \"" << d.value("dataset_name", "") << "\" sha256 "
              << d.value("sha256", "") << " ("
              << (!d["in_hub"].get<bool>() ? "deleted" : d["unchanged"].get<bool>() ? "in the hub, unchanged" : "in the hub, changed")
              << ")\n";
  std::cout << std::flush;
}

void add_collection(CLI::App& app, const std::string& noun, const std::string& plural, bool is_log) {
  auto* cmd = app.add_subcommand(noun, "list, show or delete " + plural);
  cmd->require_subcommand(1);
  auto args = std::make_shared<DocumentArgs>();
  auto collection = [args, is_log, noun]() {
    if (is_log) return log_collection(args->kind);
    return noun == "dataset" ? Collection::kDatasets : Collection::kModels;
  };

  auto* list = cmd->add_subcommand("list", "list " + plural + " as a table (--json for JSON)");
  add_hub_options(*list, args->hub);
  list->add_option("--filter", args->filter, R"(JSON filter, e.g. '{"test_accuracy": {"$gte": 0.8}}')");
  list->add_option("--sort", args->sort, "sort keys, e.g. test_accuracy:-1,time:-1 (default newest first)");
  list->add_option("--limit", args->limit, "at most this many (0: all)");
  list->add_flag("--json", args->json, "print JSON instead of a table");
  if (is_log) list->add_option("--kind", args->kind, "training, validation or testing")->capture_default_str();
  list->callback([args, collection, plural]() {
    const Json filter = parse_filter(args->filter);
    const SortSpec sort = args->sort.empty() ? SortSpec{{"time", -1}, {"id", -1}} : parse_sort_flag(args->sort);
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    check_document_filter(hub, collection(), filter);
    const auto docs = hub.find_documents(collection(), filter, sort, args->limit);
    print_documents(docs, args->json);
    const auto has_key = [&](const std::string& key) {
      return !hub.find_documents(collection(), {{key, {{"$exists", true}}}}, {}, 1).empty();
    };
    warn_unknown_sort_keys(sort, has_key, plural.substr(0, plural.size() - 1));
    warn_unknown_filter_keys(filter, has_key, plural.substr(0, plural.size() - 1));
    if (docs.empty()) warn_if_project_empty(hub);
  });

  auto* show = cmd->add_subcommand("show", "show one " + noun + " as JSON, with its blobs");
  add_hub_options(*show, args->hub);
  show->add_option("id", args->id, noun + " id")->required();
  if (is_log) show->add_option("--kind", args->kind, "training, validation or testing")->capture_default_str();
  if (noun == "model") {
    show->add_flag("--lineage", args->lineage,
                   "show where the model came from: its task, attempt, hyperparameters, what ran, the datasets it "
                   "read (and whether they are still in the hub unchanged), the tensorhub and host that saved it");
    show->add_flag("--json", args->json, "with --lineage: the chain as JSON");
  }
  show->callback([args, collection, noun]() {
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    auto docs = hub.find_documents(collection(), {{"id", args->id}}, {}, 1);
    if (docs.empty())
      throw NotFound(noun + " " + std::to_string(args->id) + " is not in project \"" + args->hub.project +
                     "\"; see `tensorhub " + noun + " list`");
    if (args->lineage) {
      const Json chain = lineage_chain(hub, docs[0]);
      if (args->json)
        std::cout << encode_non_finite(chain).dump(2) << std::endl;
      else
        print_lineage(chain);
      return;
    }
    std::cout << docs[0].to_json().dump(2) << std::endl;
  });

  auto* del = cmd->add_subcommand(
      "delete", "delete " + plural + " matching --filter (or --all)" +
                    (is_log ? std::string()
                            : "; their blobs go too. On SQLite the file shrinks at once; on PostgreSQL, "
                              "autovacuum makes the space reusable by the database and `tensorhub hub compact` "
                              "returns it to the operating system"));
  add_hub_options(*del, args->hub);
  del->add_option("--filter", args->filter, "JSON filter of the " + plural + " to delete");
  del->add_flag("--all", args->all, "delete every " + noun + " of the project");
  if (is_log) del->add_option("--kind", args->kind, "training, validation or testing")->capture_default_str();
  if (noun == "model")
    del->add_flag("--force", args->force,
                  "also delete models an alias names, with their aliases (recorded in the aliases' history)");
  del->callback([args, collection, noun, plural]() {
    const Json filter = parse_filter(args->filter);
    if (!args->all && filter.empty())
      throw UsageError(args->filter.empty()
                           ? "give --filter to choose the " + plural + " to delete, or --all for every one"
                           : "--filter " + args->filter + " is empty and would delete every " + noun +
                                 " of the project; give a filter that chooses " + plural + ", or --all to delete " +
                                 "every one");
    Hub hub = open_hub(args->hub, OpenMode::kExisting);
    check_document_filter(hub, collection(), filter);
    const SpaceBefore before{hub.storage_bytes(), hub.count_blobs()};
    const auto n = collection() == Collection::kModels ? hub.delete_models(filter, args->force)
                                                       : hub.delete_documents(collection(), filter);
    std::cout << "deleted " << n << " " << (n == 1 ? noun : plural) << std::endl;
    report_space(hub, before);
  });
}

}  // namespace

void add_document_commands(CLI::App& app) {
  add_collection(app, "dataset", "datasets", false);
  add_dataset_import_command(*app.get_subcommand("dataset"));  // dataset_import_command.cpp
  add_dataset_tfrecord_commands(*app.get_subcommand("dataset"));  // dataset_tfrecord_commands.cpp
  app.get_subcommand("dataset")->description("list, show, delete, save, fetch, import, export or head datasets");
  add_collection(app, "model", "models", false);
  add_model_alias_commands(*app.get_subcommand("model"));
  app.get_subcommand("model")->description("list, show, delete, save or fetch models; name versions (alias)");
  add_save_fetch_commands(app);  // dataset save|fetch, model save|fetch (save_fetch_commands.cpp)
  add_collection(app, "log", "logs", true);
}

}  // namespace tensorhub
