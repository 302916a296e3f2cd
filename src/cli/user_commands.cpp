// tensorhub user add|list|delete: who may open a shared `tensorhub ui` (store/users.h).
#include <iostream>
#include <memory>

#include "commands.h"
#include "table.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/users.h"

namespace tensorhub {
namespace {

struct UserArgs {
  HubFlags hub;
  std::string name;
  std::string role = "viewer";
  bool json = false;
};

void add_add(CLI::App& user, const std::shared_ptr<UserArgs>& a) {
  auto* add = user.add_subcommand(
      "add", "add a dashboard user and print its token, once (the hub keeps only the token's SHA-256)");
  add_hub_options(*add, a->hub);
  add->add_option("name", a->name, "the user's name, e.g. alice")->required();
  add->add_option("--role", a->role, "viewer (reads the dashboard) or editor (also cancels tasks, moves aliases)")
      ->capture_default_str();
  add->callback([a]() {
    UserRole role{};
    try {
      check_user_name(a->name);
      role = parse_user_role(a->role);
    } catch (const Error& e) {
      throw UsageError(e.message());  // a typo exits 2 and touches nothing
    }
    Hub hub = open_hub(a->hub, OpenMode::kExisting);
    const AddedUser added = add_user(hub, a->name, role);
    if (a->json) {
      Json out = to_json(added.user);
      out["token"] = added.token;
      std::cout << out.dump(2) << std::endl;
      return;
    }
    std::cout << "added " << to_string(role) << " " << a->name << "; their token (shown only now, give it to them):\n"
              << added.token << "\nThey log in to `tensorhub ui` with it; `tensorhub user delete " << a->name
              << "` revokes it." << std::endl;
  });
  add->add_flag("--json", a->json, "print the user and its token as JSON");
}

void add_list(CLI::App& user, const std::shared_ptr<UserArgs>& a) {
  auto* list = user.add_subcommand("list", "list the dashboard's users (names, roles, who added them; no tokens)");
  add_hub_options(*list, a->hub);
  list->add_flag("--json", a->json, "print JSON instead of a table");
  list->callback([a]() {
    Hub hub = open_hub(a->hub, OpenMode::kReadOnly);
    std::vector<nlohmann::json> rows;
    for (const HubUser& u : list_users(hub)) rows.push_back(to_json(u));
    if (a->json) {
      std::cout << nlohmann::json(rows).dump(2) << std::endl;
      return;
    }
    if (rows.empty()) {
      std::cout << "no users: `tensorhub ui` on loopback needs no login; add one with `tensorhub user add NAME --role "
                   "editor`" << std::endl;
      return;
    }
    print_table(rows, {"name", "role", "created", "created_by"}, 60);
  });
}

void add_delete(CLI::App& user, const std::shared_ptr<UserArgs>& a) {
  auto* del = user.add_subcommand("delete", "delete a user: their token and open sessions are refused from their next request");
  add_hub_options(*del, a->hub);
  del->add_option("name", a->name, "the user's name")->required();
  del->callback([a]() {
    Hub hub = open_hub(a->hub, OpenMode::kExisting);
    if (!delete_user(hub, a->name))
      throw NotFound("no user \"" + a->name + "\" in " + hub.display_uri() + "; `tensorhub user list` lists them");
    std::cout << "deleted user " << a->name << std::endl;
  });
}

}  // namespace

void add_user_commands(CLI::App& app) {
  auto* user = app.add_subcommand("user", "add, list or delete the users who may open a shared dashboard (tensorhub ui)");
  user->require_subcommand(1);
  add_add(*user, std::make_shared<UserArgs>());
  add_list(*user, std::make_shared<UserArgs>());
  add_delete(*user, std::make_shared<UserArgs>());
}

}  // namespace tensorhub
