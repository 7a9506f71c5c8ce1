// The offline tools: compile() (a hub checkpoint to a .evb, as `edgevl compile`) and synth()
// (a random-weight checkpoint of a real architecture's shape, as `edgevl synth`), with their
// progress lines handed to a Python callable.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "compiler/compile.h"
#include "core/error.h"
#include "synth/synth.h"

namespace edgevl::python {
namespace {

// Runs `work` without the GIL; each progress line takes the GIL back for `progress` (None: no
// lines). A callable that raises is not called again, and its exception is raised once the
// work ends (the tools have no point to stop at); an error of the work itself wins.
template <class F>
void with_progress(const py::object& progress, std::function<void(const std::string&)>* log,
                   F&& work) {
  bool failed = false;
  if (!progress.is_none()) {
    *log = [&](const std::string& line) {
      py::gil_scoped_acquire gil;
      if (failed) return;
      try {
        progress(line);
      } catch (py::error_already_set& e) {
        failed = true;
        e.restore();
      }
    };
  }
  try {
    py::gil_scoped_release nogil;
    work();
  } catch (...) {
    if (failed) PyErr_Clear();
    throw;
  }
  if (failed) throw py::error_already_set();
}

void synth(const std::string& arch, const std::string& out, int layers, int vision_layers,
           uint64_t seed, const std::string& dtype, bool hf_names, const py::object& progress) {
  synth::SynthOptions o;
  o.arch = arch;
  o.out = out;
  o.layers = layers;
  o.vision_layers = vision_layers;
  o.seed = seed;
  o.dtype = dtype;
  o.hf_names = hf_names;
  std::function<void(const std::string&)> log;
  with_progress(progress, &log, [&] { synth::synth_checkpoint(o, log); });
}

py::dict compile(const std::string& checkpoint, const std::string& out, const std::string& quant,
                 const std::string& overrides, const std::string& calib, int32_t context,
                 const std::string& kv, const std::string& vision_quant, int group, int threads,
                 const py::object& progress) {
  compiler::CompileOptions o;
  o.input = checkpoint;
  o.output = out;
  o.quant = quant;
  o.overrides = overrides;
  o.calib = calib;
  o.context = context;
  o.kv = kv;
  o.vision_quant = vision_quant;
  o.group = group;
  o.threads = threads;
  compiler::CompileSummary s;
  with_progress(progress, &o.log, [&] { s = compiler::compile_model(o); });
  py::dict d;
  d["path"] = out;
  d["file_bytes"] = s.file_bytes;
  d["weight_bytes"] = s.weight_bytes;
  d["tensors"] = s.tensors;
  d["seconds"] = s.seconds;
  d["calibrated"] = s.calibrated;
  d["calibration_applied"] = s.calibrated && s.transforms != nullptr;
  return d;
}

}  // namespace

void bind_tools(py::module_& m) {
  m.def("synth_archs", &synth::synth_arch_names, "The architectures synth() writes.");
  m.def("synth", &synth, py::arg("arch"), py::arg("out"), py::arg("layers") = -1,
        py::arg("vision_layers") = -1, py::arg("seed") = 1, py::arg("dtype") = "bf16",
        py::arg("hf_names") = false, py::arg("progress") = py::none(),
        "Writes a random-weight checkpoint of a real architecture's shape (`edgevl synth`).");
  m.def("compile", &compile, py::arg("checkpoint_dir"), py::arg("out"), py::arg("quant") = "w8a8",
        py::arg("overrides") = "", py::arg("calib") = "", py::arg("context") = 0,
        py::arg("kv") = "auto", py::arg("vision_quant") = "", py::arg("group") = 32,
        py::arg("threads") = 0, py::arg("progress") = py::none(),
        "Compiles a hub checkpoint directory into a .evb (the compiler of `edgevl compile`).");
}

}  // namespace edgevl::python
