// The model as Python sees it: opening a .evb, what it is (family, context, weight types),
// tokens, images (files, encoded bytes, RGB arrays) and their features.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>

#include "bindings.h"
#include "core/error.h"

namespace edgevl::python {
namespace {

// The storage of the projections, as the preset that writes it would be named: the weight type
// (Model::weight's type_name) that holds most matrix elements outside the vision tower and the
// embedding table (which presets keep wider), mapped to "w8a8", "w4a8", "w4a16", "f16", ...
std::string weight_quant(const Model& m) {
  std::map<std::string, int64_t> by_type;
  for (const TensorEntry& t : m.file().tensors()) {
    if (t.shape.size() != 2 || t.source != TensorSource::File) continue;
    const std::string& n = t.name;
    if (n.find("embed") != std::string::npos || n.rfind("vision", 0) == 0 ||
        n.rfind("mlp1", 0) == 0 || n.find("visual") != std::string::npos)
      continue;
    by_type[t.type_name()] += t.numel();
  }
  if (by_type.empty()) return "";
  const std::string top =
      std::max_element(by_type.begin(), by_type.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  const bool a8 = top.size() > 2 && top.ends_with("a8");
  if (top.starts_with("q8")) return a8 ? "w8a8" : "w8a16";
  if (top.starts_with("q4")) return a8 ? "w4a8" : "w4a16";
  return top;
}

std::shared_ptr<PyModel> open_model(const std::string& path, int threads, int max_tiles,
                                    int64_t max_pixels, int image_cache_mb,
                                    const std::string& backend) {
  check(threads >= 0, "threads must be >= 0 (got {})", threads);
  check(max_tiles >= 0 && max_pixels > 0 && image_cache_mb >= 0,
        "max_tiles, max_pixels and image_cache_mb must not be negative");
  auto m = std::make_shared<PyModel>();
  m->path = path;
  AssistantOptions o;
  o.threads = threads;
  o.backend = backend;
  o.images.max_tiles = max_tiles;
  o.images.max_pixels = max_pixels;
  o.images.cache_bytes = size_t(image_cache_mb) << 20;
  py::gil_scoped_release nogil;
  m->assistant = std::make_unique<Assistant>(path, o);
  return m;
}

PyImage prepared(ImageRef r) {
  return PyImage{std::move(r)};
}

// The projector's features of `img` ([tiles][tokens per tile][hidden] when every tile has the
// same count, else [tokens][hidden]) as a read-only array over the runtime's own buffer: the
// array keeps the buffer alive, nothing is copied.
py::array embed_image(PyModel& m, PyImage& img) {
  std::shared_ptr<const std::vector<float>> f;
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(m.mu);
    VisionEncoder* v = m.assistant->vision();
    check(v != nullptr, "{} is a text-only model: it has no image features", m.path);
    f = v->features(*img.ref);
  }
  const PreparedImage& p = *img.ref;
  check(p.tokens > 0 && f && f->size() % size_t(p.tokens) == 0,
        "the image's features do not match its {} tokens", p.tokens);
  const py::ssize_t hidden = py::ssize_t(f->size() / size_t(p.tokens));
  std::vector<py::ssize_t> shape;
  if (p.tiles > 1 && p.tokens % p.tiles == 0 && !p.is_video())
    shape = {p.tiles, p.tokens / p.tiles, hidden};
  else
    shape = {p.tokens, hidden};
  auto* keep = new std::shared_ptr<const std::vector<float>>(f);
  py::capsule base(
      keep, [](void* q) { delete static_cast<std::shared_ptr<const std::vector<float>>*>(q); });
  py::array a(py::dtype::of<float>(), shape, f->data(), base);
  a.attr("flags").attr("writeable") = false;  // shared with the feature cache
  return a;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<PyImage>(m, "Image", "An image (or video) decoded and preprocessed for a model.")
      .def_property_readonly(
          "tiles", [](const PyImage& i) { return i.ref->tiles; },
          "InternVL: tiles (thumbnail included); Qwen-VL: 1.")
      .def_property_readonly(
          "tokens", [](const PyImage& i) { return i.ref->tokens; }, "Image tokens in a prompt.")
      .def_property_readonly(
          "preprocess_ms", [](const PyImage& i) { return i.ref->preprocess_ms; },
          "Decoding and preprocessing time.")
      .def_property_readonly(
          "is_video", [](const PyImage& i) { return i.ref->is_video(); }, "A video's frames.")
      .def("__repr__", [](const PyImage& i) {
        return fmt::format("<edgevl Image: {} tile(s), {} tokens>", i.ref->tiles, i.ref->tokens);
      });

  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model", "A .evb model opened to answer.")
      .def(py::init(&open_model), py::arg("path"), py::arg("threads") = 0, py::arg("max_tiles") = 0,
           py::arg("max_pixels") = 50'000'000, py::arg("image_cache_mb") = 64,
           py::arg("backend") = "cpu")
      .def_property_readonly("path", [](const PyModel& p) { return p.path; })
      .def_property_readonly("family",
                             [](const PyModel& p) { return p.assistant->model().config().family; })
      .def_property_readonly("has_vision",
                             [](const PyModel& p) { return p.assistant->has_vision(); })
      .def_property_readonly(
          "context", [](const PyModel& p) { return p.assistant->model().runtime_config().context; })
      .def_property_readonly("quant",
                             [](const PyModel& p) { return weight_quant(p.assistant->model()); })
      .def_property_readonly("threads", [](PyModel& p) { return p.assistant->engine().threads(); })
      .def_property_readonly(
          "vocab_size",
          [](const PyModel& p) { return p.assistant->model().tokenizer().vocab_size(); })
      .def_property_readonly("hidden",
                             [](const PyModel& p) { return p.assistant->model().config().hidden; })
      .def_property_readonly(
          "layers", [](const PyModel& p) { return p.assistant->model().config().n_layers; })
      .def_property_readonly("load_ms",
                             [](const PyModel& p) { return p.assistant->model().load_ms(); })
      .def_property_readonly("stop_ids",
                             [](const PyModel& p) { return p.assistant->model().stop_ids(); })
      .def_property_readonly(
          "bos_id", [](const PyModel& p) { return p.assistant->model().tokenizer().bos_id(); })
      .def_property_readonly(
          "eos_id", [](const PyModel& p) { return p.assistant->model().tokenizer().eos_id(); })
      .def_property_readonly("generating", [](const PyModel& p) { return p.generating.load() > 0; })
      .def(
          "tokenize",
          [](const PyModel& p, const std::string& text, bool add_bos, bool special) {
            const text::Tokenizer& t = p.assistant->model().tokenizer();
            std::vector<int32_t> ids;
            if (add_bos && t.add_bos() && t.bos_id() >= 0) ids.push_back(t.bos_id());
            for (int32_t id : t.encode(text, special)) ids.push_back(id);
            return ids;
          },
          py::arg("text"), py::arg("add_bos") = true, py::arg("special") = true)
      .def(
          "detokenize",
          [](const PyModel& p, const std::vector<int32_t>& ids, bool skip_special) {
            const text::Tokenizer& t = p.assistant->model().tokenizer();
            for (int32_t id : ids)
              check(id >= 0 && id < t.vocab_size(), "token id {} is outside the vocabulary (0..{})",
                    id, t.vocab_size() - 1);
            return to_str(text::decode(t, ids, skip_special));
          },
          py::arg("ids"), py::arg("skip_special") = true)
      .def(
          "piece",
          [](const PyModel& p, int32_t id) {
            const text::Tokenizer& t = p.assistant->model().tokenizer();
            check(id >= 0 && id < t.vocab_size(), "token id {} is outside the vocabulary", id);
            return to_str(t.piece(id));
          },
          py::arg("id"))
      .def(
          "image_file",
          [](PyModel& p, const std::string& path) {
            py::gil_scoped_release nogil;
            return prepared(p.assistant->image_file(path));
          },
          py::arg("path"))
      .def(
          "image_bytes",
          [](PyModel& p, const py::buffer& b, const std::string& name) {
            const py::buffer_info info = b.request();
            const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(info.ptr),
                                                 size_t(info.size * info.itemsize));
            py::gil_scoped_release nogil;
            return prepared(p.assistant->image_bytes(bytes, name));
          },
          py::arg("data"), py::arg("name") = "image bytes")
      .def(
          "image_rgb",
          [](PyModel& p, const py::array_t<uint8_t, py::array::c_style>& a) {
            check(a.ndim() == 3 && a.shape(2) == 3,
                  "an RGB image is a height x width x 3 array of uint8");
            const int h = int(a.shape(0)), w = int(a.shape(1));
            const std::span<const uint8_t> rgb(a.data(), size_t(a.size()));
            py::gil_scoped_release nogil;
            return prepared(p.assistant->image_rgb(w, h, rgb));
          },
          py::arg("rgb"))
      .def(
          "video_file",
          [](PyModel& p, const std::string& path) {
            py::gil_scoped_release nogil;
            return prepared(p.assistant->video_file(path));
          },
          py::arg("path"))
      .def("embed_image", &embed_image, py::arg("image"))
      .def(
          "new_chat",
          [](const std::shared_ptr<PyModel>& p, int32_t context) {
            check(context >= 0, "context must be >= 0 (got {})", context);
            auto c = std::make_shared<PyChat>();
            c->model = p;
            py::gil_scoped_release nogil;
            std::lock_guard lock(p->mu);  // a session's caches are the engine's to allocate
            c->chat = std::make_unique<Chat>(*p->assistant, context);
            return c;
          },
          py::arg("context") = 0);
}

}  // namespace edgevl::python
