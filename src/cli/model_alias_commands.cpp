// tensorhub model alias set|delete|list|history: a team's names for model versions
// (store/model_aliases.h), MLflow's aliases with a history of every move.
#include <iostream>
#include <memory>

#include "commands.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

struct AliasArgs {
  HubFlags hub;
  std::string model_name;
  std::string alias;
  std::int64_t id = 0;
  std::string reason;
  bool json = false;
};

void print_rows(const std::vector<nlohmann::json>& rows, bool json, const std::vector<std::string>& columns) {
  if (json) {
    std::cout << nlohmann::json(rows).dump(2) << std::endl;
    return;
  }
  std::vector<nlohmann::json> cells;
  for (nlohmann::json row : rows) {
    for (const char* key : {"from_id", "to_id"})
      if (row.contains(key) && row[key].is_null()) row[key] = "-";
    cells.push_back(std::move(row));
  }
  print_table(cells, columns, 60);
}

// Checked before the hub is opened, so that a typo exits 2 and touches nothing.
void check_alias_flag(const std::string& alias) {
  try {
    check_alias_name(alias);
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
}

void add_set(CLI::App& alias_cmd, const std::shared_ptr<AliasArgs>& args) {
  auto* set = alias_cmd.add_subcommand(
      "set", "point ALIAS of model NAME at the model with --id (creating or moving it), recorded in its history");
  add_hub_options(*set, args->hub);
  set->add_option("name", args->model_name, "the model's name (its model_name tag), e.g. mlp")->required();
  set->add_option("alias", args->alias, "the alias, e.g. champion (letters, digits, _ . -)")->required();
  set->add_option("--id", args->id, "the model document's id (`tensorhub model list --filter ...`)")->required();
  set->add_option("--reason", args->reason, "why, kept in the alias's history");
  set->callback([args]() {
    check_alias_flag(args->alias);
    Hub hub = open_hub(args->hub, OpenMode::kExisting);
    const auto before = hub.set_model_alias(args->model_name, args->alias, args->id, {.reason = args->reason, .user = ""});
    const std::string name = args->model_name + "@" + args->alias;
    if (before == args->id)
      std::cout << name << " already points at model " << args->id << "; nothing changed" << std::endl;
    else if (before)
      std::cout << name << ": model " << *before << " -> " << args->id << std::endl;
    else
      std::cout << name << " -> model " << args->id << " (new alias)" << std::endl;
  });
}

void add_delete(CLI::App& alias_cmd, const std::shared_ptr<AliasArgs>& args) {
  auto* del = alias_cmd.add_subcommand("delete", "delete ALIAS of model NAME (the models stay), recorded in its history");
  add_hub_options(*del, args->hub);
  del->add_option("name", args->model_name, "the model's name")->required();
  del->add_option("alias", args->alias, "the alias")->required();
  del->add_option("--reason", args->reason, "why, kept in the alias's history");
  del->callback([args]() {
    Hub hub = open_hub(args->hub, OpenMode::kExisting);
    const auto before = hub.delete_model_alias(args->model_name, args->alias, {.reason = args->reason, .user = ""});
    if (!before)
      throw NotFound("model \"" + args->model_name + "\" has no alias \"" + args->alias + "\" in project \"" +
                     hub.project_name() + "\"; `tensorhub model alias list " + args->model_name + "` lists its aliases");
    std::cout << "deleted " << args->model_name << "@" << args->alias << " (was model " << *before << ")" << std::endl;
  });
}

void add_list(CLI::App& alias_cmd, const std::shared_ptr<AliasArgs>& args) {
  auto* list = alias_cmd.add_subcommand("list", "list the aliases of model NAME (of every model without NAME)");
  add_hub_options(*list, args->hub);
  list->add_option("name", args->model_name, "the model's name (none: every model)");
  list->add_flag("--json", args->json, "print JSON instead of a table");
  list->callback([args]() {
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    std::vector<nlohmann::json> rows;
    for (const ModelAlias& a : hub.find_model_aliases(args->model_name)) rows.push_back(to_json(a));
    print_rows(rows, args->json, {"model_name", "alias", "model_id", "time", "user"});
    if (rows.empty() && !args->json)
      std::cerr << "no aliases" << (args->model_name.empty() ? "" : " of model \"" + args->model_name + "\"")
                << " in project \"" << hub.project_name() << "\"" << std::endl;
  });
}

void add_history(CLI::App& alias_cmd, const std::shared_ptr<AliasArgs>& args) {
  auto* history = alias_cmd.add_subcommand(
      "history", "every move of model NAME's aliases (only ALIAS's if given), oldest first: who, when, from, to, why");
  add_hub_options(*history, args->hub);
  history->add_option("name", args->model_name, "the model's name")->required();
  history->add_option("alias", args->alias, "only this alias");
  history->add_flag("--json", args->json, "print JSON instead of a table");
  history->callback([args]() {
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    std::vector<nlohmann::json> rows;
    for (const ModelAliasChange& c : hub.model_alias_history(args->model_name, args->alias))
      rows.push_back(to_json(c));
    print_rows(rows, args->json, {"time", "alias", "from_id", "to_id", "user", "reason"});
  });
}

}  // namespace

void add_model_alias_commands(CLI::App& model) {
  auto* alias_cmd = model.add_subcommand(
      "alias", "name model versions for the team (champion, challenger): set, delete, list, history");
  alias_cmd->require_subcommand(1);
  // One set of arguments per subcommand: CLI11 parses only the one given.
  add_set(*alias_cmd, std::make_shared<AliasArgs>());
  add_delete(*alias_cmd, std::make_shared<AliasArgs>());
  add_list(*alias_cmd, std::make_shared<AliasArgs>());
  add_history(*alias_cmd, std::make_shared<AliasArgs>());
}

}  // namespace tensorhub
