// A search's runner for the tuner tests that run trials for real: one in-process Runner (its
// trials are shell commands as child processes) on the parameter's backend (SQLite file or
// PostgreSQL server), in project "tune", claiming task name "trial"; stopped in TearDown.
#pragma once

#include <memory>
#include <thread>

#include "backend_factory.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/tune/tuner.h"
#include "test_util.h"

namespace tensorhub::testing {

class TunerRunnerTest : public BackendTest {
 protected:
  /// Starts the runner with `slots` trials at once. `lease_s` sets how often it renews its
  /// lease and so checks for cancellation (every lease_s / 3): short, to see pruned and
  /// stopped trials killed quickly.
  void start_runner(int slots = 1, double lease_s = 10) {
    RunnerOptions r;
    r.hub_uri = db_->uri();
    r.project_name = "tune";
    r.task_name = "trial";
    r.slots = slots;
    r.poll_s = 0.02;
    r.lease_s = lease_s;
    r.work_dir = dir_.path() / "work";
    r.log = [](const std::string&) {};
    runner_ = std::make_unique<Runner>(r);
    thread_ = std::thread([this] { runner_->run(); });
  }

  /// A search `name` of `oracle` over `space` on the fixture's hub and project, trials as
  /// `command`, the queue read every 0.05 s, its log quiet.
  TunerOptions search_options(const std::string& name, const std::string& oracle, SearchSpace space,
                              const std::string& command) const {
    TunerOptions o;
    o.hub_uri = db_->uri();
    o.project_name = "tune";
    o.search_name = name;
    o.oracle = oracle;
    o.space = std::move(space);
    o.command = command;
    o.poll_s = 0.05;
    o.log = [](const std::string&) {};
    return o;
  }

  void TearDown() override {
    if (runner_) runner_->request_stop();
    if (thread_.joinable()) thread_.join();
  }

  TempDir dir_;
  std::unique_ptr<Runner> runner_;
  std::thread thread_;
};

}  // namespace tensorhub::testing
