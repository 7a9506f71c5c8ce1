#include "runtime/execution/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/kv_layout.h"
#include "core/rope_tables.h"
#include "graph/graph_io.h"
#include "graph/op_table.h"

namespace edgevl {

namespace {

// Checks each op against its op table entry (operand kinds, rows, shapes, attributes) and the
// model's config, so a corrupted or hand-edited binary is refused at load instead of reading out
// of bounds at run time.
void validate_graph(const Graph& g, const EvbFile& f, const LlmConfig& c) {
  const std::string what = f.path() + " graph '" + g.name + "'";
  const auto& tensors = f.tensors();
  const std::vector<ValueInfo> values = value_infos(
      g, [&](int32_t w) { return tensors[size_t(w)].shape; },
      [&](int32_t w) { return tensors[size_t(w)].bytes; });
  for (const Op& op : g.ops) {
    const std::string why = op_problem(g, op, values);
    check(why.empty(), "{}: op {} producing '{}' {}", what, op_name(op.type),
          g.values[op.output].name, why);
    // The KV cache is laid out by the model's config: an Attention op must match it.
    if (op.type == OpType::Attention) {
      const AttentionAttrs a = op.attention();
      check(op.layer < c.n_layers && a.n_heads == c.n_heads && a.n_kv_heads == c.n_kv_heads &&
                a.head_dim == c.head_dim,
            "{}: attention op of layer {} does not match the model config", what, op.layer);
    }
    for (int32_t id : op.inputs)
      if (g.values[id].kind == ValueKind::Weight)
        check(tensors[g.values[id].weight].dtype != DType::I32, "{}: bad weight type", what);
  }
}

}  // namespace

Model::Model(const std::filesystem::path& path) : file_(path) {
  const std::string& p = file_.path();
  auto reader = [&](SectionId id) {
    return ByteReader(file_.section(id), p + " section '" + section_name(id) + "'",
                      file_.section_offset(id));
  };
  {
    ByteReader r = reader(SectionId::LlmConfig);
    config_ = read_llm_config(r);
  }
  {
    ByteReader r = reader(SectionId::RuntimeConfig);
    runtime_ = read_runtime_config(r);
  }
  const LlmConfig& c = config_;
  check(c.hidden > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 &&
            c.n_heads % c.n_kv_heads == 0 && c.head_dim > 0 && c.vocab_size > 0,
        "{}: model config is inconsistent (corrupted file?)", p);
  check(runtime_.context > 0 && runtime_.prefill_chunk > 0,
        "{}: runtime config is inconsistent (corrupted file?)", p);
  check(kv_type_supported(runtime_.kv_type),
        "{}: KV cache type {} is not supported by this edgevl (f32, f16, q8); recompile the model "
        "with --kv f16",
        p, dtype_name(runtime_.kv_type));
  check(runtime_.embedding_tensor >= 0 &&
            size_t(runtime_.embedding_tensor) < file_.tensors().size() &&
            file_.tensors()[runtime_.embedding_tensor].shape ==
                std::vector<int64_t>{c.vocab_size, c.hidden},
        "{}: embedding table missing or misshapen (corrupted file?)", p);
  compute_tensors();
  {
    ByteReader r = reader(SectionId::Graphs);
    const uint32_t n = r.get<uint32_t>();
    check(n <= 16, "{}: {} graphs (corrupted file?)", p, n);
    for (uint32_t i = 0; i < n; ++i) graphs_.push_back(read_graph(r, file_.tensors().size()));
  }
  for (const Graph& g : graphs_) validate_graph(g, file_, c);
  // In place: the tokenizer's tables are probed straight from the mapping, which the Model
  // owns and keeps for as long as the tokenizer lives.
  tokenizer_ = std::make_unique<text::Tokenizer>(text::Tokenizer::from_section(
      file_.section(SectionId::Tokenizer), p + " section 'tokenizer'"));
  {
    ByteReader r = reader(SectionId::ChatTemplate);
    template_ = text::read_chat_template(r);
  }
  if (file_.has_section(SectionId::VisionConfig)) {
    ByteReader r = reader(SectionId::VisionConfig);
    vision_ = read_vision_config(r);
    has_vision_ = true;
    const VisionConfig& v = vision_;
    auto token_ok = [&](int32_t id) { return id >= 0 && id < c.vocab_size; };
    check(v.patch_size > 0 && v.image_size % v.patch_size == 0 && v.shuffle > 0 &&
              v.grid() % v.shuffle == 0 && v.llm_hidden == c.hidden && token_ok(v.img_start_id) &&
              token_ok(v.img_end_id) && token_ok(v.img_context_id) && v.min_tiles >= 1 &&
              v.max_tiles >= v.min_tiles,
          "{}: vision config is inconsistent (corrupted file?)", p);
    const Graph* vg = find_graph("vision");
    // The input is the tile ([3, size^2], PatchIm2col its first op) or, in binaries from
    // before that op, the patch rows ([1 + grid^2, 3 * patch^2]).
    const std::vector<int64_t>& in = vg ? vg->values[vg->input].shape : std::vector<int64_t>{};
    const int64_t size2 = int64_t(v.image_size) * v.image_size;
    check(vg != nullptr && vg->width == 1 + v.grid() * v.grid() &&
              (in == std::vector<int64_t>{3, size2} ||
               in == std::vector<int64_t>{vg->width, 3 * int64_t(v.patch_size) * v.patch_size}) &&
              vg->values[vg->output].shape ==
                  std::vector<int64_t>{v.tokens_per_tile(), int64_t(c.hidden)},
          "{}: vision graph does not match the vision config (corrupted file?)", p);
  }
  // Stop tokens: the tokenizer's EOS, the config's EOS ids, and template stop strings that
  // are single tokens.
  auto add_stop = [&](int32_t id) {
    if (id >= 0 && id < c.vocab_size &&
        std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end())
      stop_ids_.push_back(id);
  };
  add_stop(tokenizer_->eos_id());
  add_stop(c.eos_id);
  for (int32_t id : c.extra_eos_ids) add_stop(id);
  for (const std::string& s : template_.stop_strings)
    if (auto id = tokenizer_->find_token(s)) add_stop(*id);
  load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start_)
          .count();
}

void Model::compute_tensors() {
  const LlmConfig& c = config_;
  const std::vector<TensorEntry>& ts = file_.tensors();
  computed_.assign(ts.size(), {});
  std::vector<float> cos_rows, sin_rows;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorEntry& e = ts[i];
    if (e.source == TensorSource::File) continue;
    // A RoPE table serves positions 0 .. context - 1 (the rope op indexes it by position);
    // at most 256 MB each (a 2M-token context at head_dim 64), whatever a damaged file says.
    // Its width is half the rotated dims: head_dim / 2, or less with a partial rotary (Qwen3.5
    // rotates the first quarter of each head, with inv_freq over those dims).
    const int64_t half = e.shape.size() == 2 ? e.shape[1] : 0;
    check(c.head_dim % 2 == 0 && half >= 1 && half <= c.head_dim / 2 &&
              e.shape == std::vector<int64_t>{runtime_.context, half} &&
              runtime_.context * half <= (int64_t(1) << 26) && std::isfinite(c.rope_theta) &&
              c.rope_theta > 0,
          "{}: computed tensor '{}' [{}] does not fit the model (context {}, head_dim {}, "
          "rope theta {}; corrupted file?)",
          file_.path(), e.name, fmt::join(e.shape, ", "), runtime_.context, c.head_dim,
          c.rope_theta);
    if (cos_rows.empty()) {
      cos_rows.resize(size_t(runtime_.context * half));
      sin_rows.resize(cos_rows.size());
      rope_tables(c.rope_theta, int(2 * half), runtime_.context, cos_rows.data(), sin_rows.data());
    }
    computed_[i] = e.source == TensorSource::RopeCos ? cos_rows : sin_rows;
  }
}

int32_t Model::kv_layers() const {
  std::vector<uint8_t> seen(size_t(std::max(config_.n_layers, 0)), 0);
  for (const Graph& g : graphs_)
    for (const Op& op : g.ops)
      if (op.type == OpType::Attention && op.layer >= 0 && op.layer < config_.n_layers)
        seen[size_t(op.layer)] = 1;
  int32_t n = 0;
  for (uint8_t s : seen) n += s;
  return n;
}

const Graph* Model::find_graph(const std::string& name) const {
  for (const Graph& g : graphs_)
    if (g.name == name) return &g;
  return nullptr;
}

const Graph& Model::graph(const std::string& name) const {
  const Graph* g = find_graph(name);
  check(g != nullptr, "{}: has no '{}' graph", file_.path(), name);
  return *g;
}

const TensorEntry& Model::weight(const std::string& name) const {
  const int32_t i = file_.find_tensor(name);
  check(i >= 0, "{}: tensor '{}' missing", file_.path(), name);
  return weight(i);
}

const void* Model::weight_data(const std::string& name) const {
  const int32_t i = file_.find_tensor(name);
  check(i >= 0, "{}: tensor '{}' missing", file_.path(), name);
  return weight_data(i);
}

}  // namespace edgevl
