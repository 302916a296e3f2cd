// The floor of bench_queue_cycles' "api" row: the queue's three statements (insert a task,
// claim the newest pending one with RETURNING, complete it fenced by its attempt) run straight
// on the database, each its own transaction as ours are (SQLite: BEGIN IMMEDIATE ... COMMIT
// with statements prepared once; PostgreSQL: autocommit statements through libpq), by W
// forked workers. No tensorhub code runs in it: ours / raw is what the queue's layers cost.
#pragma once

#include <functional>
#include <string>

namespace tensorhub::bench {

/// Cycles per second of `workers` processes doing `per` raw cycles each on `uri`, a hub that
/// exists already (its tasks table is used). Throws std::runtime_error when a statement or a
/// worker fails.
double raw_cycles_per_s(const std::string& uri, int workers, int per);

/// Runs work(w) in `workers` forked processes (w = 0 .. workers - 1) and waits for all; a
/// worker that throws prints the error and exits 1. Throws std::runtime_error naming `what`
/// when any worker did not exit 0. Returns the seconds from the first fork to the last exit.
double run_in_workers(int workers, const std::function<void(int)>& work, const std::string& what);

}  // namespace tensorhub::bench
