// tensorhub hub init|compact: make an empty hub; give deleted data's space back.
#include <iostream>
#include <memory>

#include "commands.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

void add_hub_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("hub", "create a hub, or give the space of deleted data back (compact)");
  cmd->require_subcommand(1);
  auto opt = std::make_shared<HubFlags>();

  auto* init = cmd->add_subcommand(
      "init", "create an empty hub at --hub (a SQLite file, or tensorhub's tables in an existing PostgreSQL "
              "database); an existing hub keeps its data and is brought up to date if an older tensorhub wrote it "
              "(readers that may not write it need that)");
  add_hub_options(*init, *opt);
  init->callback([opt] {
    Hub hub = open_hub(*opt, OpenMode::kCreate);  // brings a hub of an older tensorhub forward
    TaskQueue(hub).list_projects();               // and the queue's tables, which a reader cannot
    std::cout << "hub ready at " << hub.display_uri() << std::endl;
  });

  auto* compact = cmd->add_subcommand(
      "compact",
      "give the space of deleted datasets, models and logs back to the operating system. SQLite: VACUUM "
      "(needs free disk space for a copy of the file; hubs made by this tensorhub already shrink on delete). "
      "PostgreSQL: autovacuum already makes deleted rows' space reusable by the database; this runs VACUUM FULL, "
      "which locks each table while it is rewritten");
  add_hub_options(*compact, *opt);
  compact->callback([opt] {
    Hub hub = open_hub(*opt, OpenMode::kExisting);
    const std::int64_t before = hub.storage_bytes();
    hub.compact();
    const std::int64_t after = hub.storage_bytes();
    std::cout << "compacted " << hub.display_uri() << ": " << format_bytes(before) << " -> "
              << format_bytes(after) << std::endl;
  });
}

}  // namespace tensorhub
