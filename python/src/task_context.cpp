// _core.TaskContext: the C++ TaskContext (queue/task_context.h) for a task written in Python.
#include <pybind11/pybind11.h>

#include <mutex>

#include "py_hub.h"
#include "tensorhub/queue/task_context.h"

namespace tensorhub::python {
namespace {

// TaskContext with a mutex: report_epoch opens and keeps a hub connection.
class PyTaskContext {
 public:
  PyTaskContext() : context_(TaskContext::from_environment()) {}
  std::int64_t task_id() const { return context_.task_id(); }
  bool under_runner() const { return context_.under_runner(); }
  std::string hub_uri() const { return context_.hub_uri(); }
  std::string project_name() const { return context_.project_name(); }
  std::string hyper_parameters() const { return encode_non_finite(context_.hyper_parameters()).dump(); }
  std::string results() const {
    std::lock_guard lock(mu_);
    return encode_non_finite(context_.results()).dump();
  }
  void set_result(const std::string& key, const std::string& value) {
    const Json v = parse_json(value, "result \"" + key + "\"");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    context_.set_result(key, v);
  }
  void report_epoch(int epoch, const std::string& logs) {
    const Json l = parse_json(logs, "epoch logs");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    context_.report_epoch(epoch, l);
  }

 private:
  mutable std::mutex mu_;
  TaskContext context_;
};

}  // namespace

/// Adds class _core.TaskContext to `m`.
void bind_task_context(py::module_& m) {
  py::class_<PyTaskContext>(m, "TaskContext", "The runner's environment of a task (C++ TaskContext).")
      .def(py::init<>(), "Reads TENSORHUB_* from the environment.")
      .def_property_readonly("task_id", &PyTaskContext::task_id, "The task's id; 0 outside a runner.")
      .def_property_readonly("under_runner", &PyTaskContext::under_runner, "True when started by a runner.")
      .def_property_readonly("hub_uri", &PyTaskContext::hub_uri, "TENSORHUB_URI or the default hub.")
      .def_property_readonly("project_name", &PyTaskContext::project_name, "TENSORHUB_PROJECT or \"default\".")
      .def("hyper_parameters_json", &PyTaskContext::hyper_parameters, "The hyperparameters as JSON text.")
      .def("results_json", &PyTaskContext::results, "The results set so far as JSON text.")
      .def("set_result", &PyTaskContext::set_result, py::arg("key"), py::arg("value_json"),
           "Records one result (JSON text) and rewrites the result file.")
      .def("report_epoch", &PyTaskContext::report_epoch, py::arg("epoch"), py::arg("logs_json"),
           "Stores one epoch's metrics (JSON text) under a runner; does nothing outside one.");
}

}  // namespace tensorhub::python
