#include "compiler/llm_weights.h"

#include <vector>

#include "core/error.h"
#include "format/safetensors.h"

namespace edgevl::compiler {

using models::Slot;

namespace {

std::string fmt_shape(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The first dozen names, then how many more: enough to see the problem, short enough to read.
std::string name_list(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 12; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 12) list += fmt::format(", ... ({} more)", names.size() - 12);
  return list;
}

// The name a slot fills.
std::string& slot_ref(models::DecoderTensors& t, Slot slot, int32_t layer) {
  switch (slot) {
    case Slot::Embedding: return t.embedding;
    case Slot::FinalNorm: return t.final_norm;
    case Slot::LmHead: return t.lm_head;
    case Slot::Fused: fail("internal: a fused tensor fills no slot");
    default: break;
  }
  check(layer >= 0 && layer < int32_t(t.layers.size()), "internal: layer {} out of range", layer);
  return t.layers[size_t(layer)][slot];
}

// A fused tensor's part: `count` runs of `run` rows, run i starting at row first + i * stride.
std::function<void(float*)> split_producer(const TensorView* t, const models::SplitPart& p) {
  return [t, p](float* dst) {
    std::vector<float> all(size_t(t->numel()));
    tensor_to_f32(*t, all.data());
    for (int64_t i = 0; i < p.count; ++i) {
      const float* src = all.data() + (p.first + i * p.stride) * p.cols;
      std::copy(src, src + p.run * p.cols, dst);
      dst += p.run * p.cols;
    }
  };
}

}  // namespace

LlmWeights plan_llm_weights(const Checkpoint& ckpt, const LlmConfig& c,
                            const models::LlmFamily& family, const models::LlmNaming& naming,
                            int64_t rope_positions) {
  LlmWeights w;
  w.tensors.layers.resize(size_t(c.n_layers));
  std::vector<std::string> missing;
  for (const models::TensorDef& def : family.tensors(c)) {
    const std::string name = naming.rename(def.name);
    const TensorView* t = ckpt.find(name);
    if (!t) {
      missing.push_back(name);
      continue;
    }
    check(t->shape == def.shape, "{}: tensor '{}' has shape {} but the config implies {}",
          ckpt.dir().string(), name, fmt_shape(t->shape), fmt_shape(def.shape));
    w.consumed.insert(name);
    if (def.slot != Slot::Fused) {
      const float add = def.add;  // e.g. Qwen3.5's zero-centred norms, used as 1 + w
      const int64_t n = t->numel();
      w.specs.push_back({name, def.shape, def.role, [t, add, n](float* dst) {
                           tensor_to_f32(*t, dst);
                           if (add != 0.f)
                             for (int64_t i = 0; i < n; ++i) dst[i] += add;
                         }});
      slot_ref(w.tensors, def.slot, def.layer) = name;
      continue;
    }
    for (const models::SplitPart& p : family.split(def, c)) {
      check(p.first + (p.count - 1) * p.stride + p.run <= def.shape[0] && p.run * p.count == p.rows,
            "internal: split of '{}' into '{}' is out of range", name, p.name);
      const std::string part = naming.rename(p.name);
      const std::vector<int64_t> shape = def.shape.size() == 1
                                             ? std::vector<int64_t>{p.rows}
                                             : std::vector<int64_t>{p.rows, p.cols};
      w.specs.push_back({part, shape, def.role, split_producer(t, p)});
      slot_ref(w.tensors, p.slot, def.layer) = part;
    }
  }
  if (c.tie_embeddings) w.tensors.lm_head = w.tensors.embedding;
  if (!missing.empty())
    fail("{}: {} tensor(s) the {} architecture needs are missing: {}", ckpt.dir().string(),
         missing.size(), c.family, name_list(missing));

  // The RoPE tables take no bytes in the file: the loader computes them (core/rope_tables.h).
  w.tensors.rope_cos = "rope.cos";
  w.tensors.rope_sin = "rope.sin";
  const int64_t half = family.rotary_dim(c) / 2;  // the rotated dims of each head
  w.specs.push_back({w.tensors.rope_cos,
                     {rope_positions, half},
                     WeightRole::Constant,
                     nullptr,
                     TensorSource::RopeCos});
  w.specs.push_back({w.tensors.rope_sin,
                     {rope_positions, half},
                     WeightRole::Constant,
                     nullptr,
                     TensorSource::RopeSin});
  return w;
}

void check_all_consumed(const Checkpoint& ckpt, const std::set<std::string>& consumed,
                        const std::vector<std::string>& allowed) {
  auto allowed_name = [&](const std::string& n) {
    for (const std::string& a : allowed) {
      if (!a.empty() && a.back() == '*') {  // a prefix: "model.visual.*"
        if (n.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0) return true;
        continue;
      }
      if (n.size() >= a.size() && n.compare(n.size() - a.size(), a.size(), a) == 0) return true;
    }
    return false;
  };
  std::vector<std::string> unused;
  for (const std::string& n : ckpt.names())
    if (!consumed.count(n) && !allowed_name(n)) unused.push_back(n);
  if (unused.empty()) return;
  const std::string list = name_list(unused);
  fail(
      "{}: {} checkpoint tensor(s) would be ignored, so the compiled model would not be the "
      "checkpoint's: {} (the config may not describe this checkpoint, or it is a variant "
      "edgevl does not implement)",
      ckpt.dir().string(), unused.size(), list);
}

}  // namespace edgevl::compiler
