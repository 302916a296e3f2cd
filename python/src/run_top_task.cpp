// _core.run_top_task: TensorHub's run_top_task through the C++ Runner (queue/runner.h), so a
// task claimed from Python gets what `tensorhub runner` gives every task: a lease with
// heartbeats, its own process (group and cgroup), timeouts, retries and clean-up.
#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <future>

#include "py_hub.h"
#include "tensorhub/queue/runner.h"

namespace tensorhub::python {
namespace {

// Claims at most one task of `task_name` (any when empty) in `project`, runs it to its end and
// returns whether there was one. The Runner runs on a thread of its own while this one, every
// 0.1 s, lets Python handle its signals: Ctrl-C stops the runner (its task goes back to the
// queue, as SIGTERM does to `tensorhub runner`) and raises KeyboardInterrupt.
bool run_top_task(const std::string& uri, const std::string& project, const std::string& task_name,
                  bool oldest_first, const std::string& python_path) {
  RunnerOptions o;
  o.hub_uri = uri;
  o.project_name = project;
  o.task_name = task_name;
  o.max_claims = 1;
  o.exit_when_idle_s = 0;
  o.order = oldest_first ? ClaimOrder::kOldestFirst : ClaimOrder::kNewestFirst;
  if (!python_path.empty()) o.python = python_path;
  o.trainer_hint = "spec tasks need tensorhub's trainer: run them with `tensorhub runner`";
  std::unique_ptr<Runner> runner;
  std::future<RunnerStats> done;
  {
    py::gil_scoped_release release;
    runner = std::make_unique<Runner>(o);
    done = std::async(std::launch::async, [&runner] { return runner->run(); });
  }
  while (true) {
    {
      py::gil_scoped_release release;
      if (done.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) break;
    }
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set interrupt;  // taken (with the GIL) before the wait below
      runner->request_stop();
      {
        py::gil_scoped_release release;
        done.wait();  // the runner gives its task back before the interrupt propagates
      }
      throw interrupt;
    }
  }
  py::gil_scoped_release release;
  // Claimed, not started: a task that failed before it could start (a spec task, which needs
  // tensorhub-torch) was still taken from the queue and its attempt used.
  return done.get().claimed > 0;
}

}  // namespace

void bind_run_top_task(py::module_& m) {
  m.def("run_top_task", &run_top_task, py::arg("uri"), py::arg("project_name"), py::arg("task_name"),
        py::arg("oldest_first"), py::arg("python"),
        "Claims one task and runs it as `tensorhub runner` would; True if there was one.");
}

}  // namespace tensorhub::python
