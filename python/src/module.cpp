// The module `edgevl._edgevl`: its exceptions, version and the CPU / kernel level functions; the
// model, generation and compile bindings register themselves from their files.
#include <pybind11/stl.h>

#include "bindings.h"
#include "core/error.h"
#include "runtime/execution/isa.h"

namespace edgevl::python {
namespace {

void bind_isa(py::module_& m) {
  m.def("isa_levels", &isa_levels, "Every kernel level this build knows, lowest first.");
  m.def(
      "select_isa", [](const std::string& level) { select_isa(level); }, py::arg("level"),
      "Selects the kernel level every model uses ('best': the highest this CPU runs). Raises "
      "edgevl.Error naming the missing CPU features.");
  m.def(
      "active_isa", [] { return std::string(active_isa()); }, "The kernel level in use.");
  m.def(
      "cpu_info",
      [] {
        const IsaReport r = isa_report();
        py::dict d;
        d["cpu_model"] = r.cpu_model;
        d["cpu_features"] = r.cpu_features;
        d["level"] = r.level;
        d["quant_kernels"] = r.quant_kernels;
        py::dict paths;
        for (const auto& [family, level] : r.kernel_paths) paths[py::str(family)] = level;
        d["kernel_paths"] = paths;
        d["default_threads"] = default_thread_count();
        return d;
      },
      "This CPU, its features, the active kernel level and the kernel each op family takes.");
}

}  // namespace
}  // namespace edgevl::python

PYBIND11_MODULE(_edgevl, m) {
  namespace py = pybind11;
  using namespace edgevl::python;
  m.doc() = "edgevl's runtime (C++): the binding under the `edgevl` package.";
  m.attr("__version__") = EDGEVL_VERSION_STRING;
  // The runtime's errors keep its message; a full context is its own kind (a caller may shorten
  // the conversation and retry). Plain exception objects (not py::exception statics) so that
  // the module builds the same against Debian's pybind11 2.10 and pip's newer ones; they live
  // as long as the process (an extension module is never unloaded).
  static PyObject* error =
      PyErr_NewExceptionWithDoc("edgevl.Error", "An error from edgevl's runtime, with its message.",
                                PyExc_RuntimeError, nullptr);
  static PyObject* context_full = PyErr_NewExceptionWithDoc(
      "edgevl.ContextFullError", "The prompt and max_tokens do not fit the model's context.", error,
      nullptr);
  if (!error || !context_full) throw py::error_already_set();
  m.add_object("Error", py::handle(error));
  m.add_object("ContextFullError", py::handle(context_full));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const edgevl::ContextFullError& e) {
      PyErr_SetString(context_full, e.what());
    } catch (const edgevl::Error& e) {
      PyErr_SetString(error, e.what());
    }
  });
  bind_isa(m);
  bind_model(m);
  bind_generation(m);
  bind_tools(m);
}
