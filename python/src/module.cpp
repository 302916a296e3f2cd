// tensorhub._core: the C++ core of the `tensorhub` Python package (python/tensorhub/). The
// Python layer (TensorHub, conversions of structures, docstrings) is python/tensorhub/*.py;
// this module holds the hub, the task queue, the task context, tensorhub.data's pipelines
// (py_dataset.cpp) and the exceptions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>

#include "py_hub.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/backend.h"

namespace tensorhub::python {

void bind_task_context(py::module_& m);  // task_context.cpp
void bind_run_top_task(py::module_& m);  // run_top_task.cpp
void bind_dataset(py::module_& m);       // py_dataset.cpp

namespace {

// The Python exception of each ErrorKind, made once by add_exceptions (never freed).
PyObject* g_errors[8] = {};
PyObject* g_error_base = nullptr;

// A new exception class tensorhub.<name> with `bases` (a tuple) added to `m`.
PyObject* add_exception(py::module_& m, const char* name, const char* doc, py::tuple bases) {
  const std::string qualified = std::string("tensorhub.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

void add_exceptions(py::module_& m) {
  g_error_base = add_exception(m, "Error", "Base of every tensorhub error (C++ tensorhub::Error).",
                               py::make_tuple(py::handle(PyExc_Exception)));
  py::handle base(g_error_base);
  struct KindClass {
    ErrorKind kind;
    const char* name;
    const char* doc;
    PyObject* extra;
  };
  const KindClass kinds[] = {
      {ErrorKind::kInvalidArgument, "InvalidArgument", "The caller passed something malformed.", PyExc_ValueError},
      {ErrorKind::kNotFound, "NotFound", "A named thing (hub, task, blob) does not exist.", PyExc_LookupError},
      {ErrorKind::kAlreadyExists, "AlreadyExists", "A thing to create exists already.", nullptr},
      {ErrorKind::kFailedPrecondition, "FailedPrecondition", "The hub is not in a state to do this.", nullptr},
      {ErrorKind::kUnavailable, "Unavailable", "The database or a file cannot be reached.", nullptr},
      {ErrorKind::kDataLoss, "DataLoss", "Stored bytes are corrupt or truncated.", nullptr},
      {ErrorKind::kInternal, "Internal", "A bug or an unexpected failure of a library.", nullptr},
      {ErrorKind::kDeadlineExceeded, "DeadlineExceeded", "A deadline passed before the answer was ready.", nullptr},
  };
  for (const KindClass& k : kinds) {
    py::tuple bases = k.extra ? py::make_tuple(base, py::handle(k.extra)) : py::make_tuple(base);
    g_errors[static_cast<int>(k.kind)] = add_exception(m, k.name, k.doc, bases);
  }
}

// tensorhub::Error -> its Python class with the message unchanged (without the "<Kind>: "
// prefix: the class names the kind); a JSON library error -> Internal.
void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Error& e) {
    const int i = static_cast<int>(e.kind());
    PyObject* type = i >= 0 && i < 8 && g_errors[i] ? g_errors[i] : g_error_base;
    PyErr_SetString(type, e.message().c_str());
  } catch (const nlohmann::json::exception& e) {
    PyErr_SetString(g_errors[static_cast<int>(ErrorKind::kInternal)], e.what());
  }
}

}  // namespace

void bind_hub(py::module_& m) {
  py::class_<PyHub>(m, "Hub", "One hub connection and its task queue, behind a mutex (see tensorhub.TensorHub).")
      .def(py::init([](const std::string& uri, const std::string& project) {
             py::gil_scoped_release release;
             return std::make_unique<PyHub>(uri, project);
           }),
           py::arg("uri"), py::arg("project_name"), "Opens, creating where missing, the hub at uri.")
      .def_property_readonly("uri", &PyHub::uri, "The URI, with its password.")
      .def_property_readonly("display_uri", &PyHub::display_uri, "The URI with its password masked.")
      .def_property_readonly("project_name", &PyHub::project_name, "The project.")
      .def("save_dataset", &PyHub::save_dataset, "Stores a dict of arrays as a dataset; returns its id.")
      .def("find_top_dataset", &PyHub::find_top_dataset, "(document JSON, arrays) of the first match, or None.")
      .def("find_datasets", &PyHub::find_datasets, "[(document JSON, arrays)] of every match.")
      .def("save_model", &PyHub::save_model, py::arg("architecture"), py::arg("weights"), py::arg("name"),
           py::arg("tags"), py::arg("parts") = std::map<std::string, std::string>{},
           "Stores architecture JSON, weights and further parts (name -> bytes); returns the id.")
      .def("save_model_dir", &PyHub::save_model_dir, "Stores a saved model directory; returns the id.")
      .def("find_top_model", &PyHub::find_top_model, "(document, architecture, weights) or None.")
      .def("load_model", &PyHub::load_model, "(architecture JSON, weights) of a model document.")
      .def("load_model_part", &PyHub::load_model_part, py::arg("document"), py::arg("part"),
           "The bytes of a part of a model document, or None when it has none.")
      .def("find_documents", &PyHub::find_documents, "Documents of a collection as a JSON array.")
      .def("delete_documents", &PyHub::delete_documents, "Deletes matching documents; returns how many.")
      .def("save_document", &PyHub::save_document, "Stores a document without parts; returns its id.")
      .def("create_task", &PyHub::create_task, "Stores a pending task from its JSON spec; returns its id.")
      .def("check_task_resources", &PyHub::check_task_resources,
           "A warning about the spec's resources (no live runner to check them against), or ''; raises "
           "InvalidArgument when every live runner is too small.")
      .def("check_unfinished_task", &PyHub::check_unfinished_task, "True while a match is pending or running.")
      .def("find_tasks", &PyHub::find_tasks, "Matching tasks as a JSON array.")
      .def("find_task_attempts", &PyHub::find_task_attempts, "A task's attempts (what each used) as a JSON array.")
      .def("delete_tasks", &PyHub::delete_tasks, "Deletes matching tasks; returns how many.")
      .def("cancel_tasks", &PyHub::cancel_tasks, "Cancels matching pending or running tasks; returns how many.")
      .def("count_tasks", &PyHub::count_tasks, "Counts of matching tasks by status.")
      .def("search_results", &PyHub::search_results, "A stored search's summary as JSON text.")
      .def("set_model_alias", &PyHub::set_model_alias, py::arg("name"), py::arg("alias"), py::arg("model_id"),
           py::arg("reason"), py::arg("user"), "Points an alias at a model; returns the id it named before, or None.")
      .def("delete_model_alias", &PyHub::delete_model_alias, py::arg("name"), py::arg("alias"), py::arg("reason"),
           py::arg("user"), "Deletes an alias; returns the id it named, or None when there was none.")
      .def("find_model_aliases", &PyHub::find_model_aliases, "A model's aliases (every model's for '') as JSON.")
      .def("model_alias_history", &PyHub::model_alias_history, "The moves of a model's aliases as JSON.")
      .def("delete_models", &PyHub::delete_models, py::arg("filter"), py::arg("force"),
           "Deletes matching models; refuses an aliased one unless force.");
}

/// Fills module `m` (tensorhub._core).
void init_module(py::module_& m) {
  m.doc() = "The C++ core of the tensorhub package: use the tensorhub module, not this one.";
  add_exceptions(m);
  py::register_exception_translator(&translate);
  bind_hub(m);
  bind_task_context(m);
  bind_run_top_task(m);
  bind_dataset(m);
  m.def("default_hub_uri", &default_hub_uri, "sqlite:///<working directory>/tensorhub.db, the CLI's default.");
}

}  // namespace tensorhub::python

PYBIND11_MODULE(_core, m) { tensorhub::python::init_module(m); }
