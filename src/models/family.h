#pragma once
// A model family is one file under src/models: everything that makes Llama, Qwen2, Qwen3 or
// InternLM2 differ — which config.json names it answers to, the defaults and flags of its
// config, the table of its checkpoint tensors (names, shapes, what each becomes), the tensors
// it may leave unused, its decoder graph (composed of the shared blocks, blocks.h), and its chat
// template, and the published shapes `synth` writes. The compiler driver, the importer and `synth`
// read only this interface, so adding a family is its file plus one line in registry.cpp.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "format/json_fields.h"
#include "format/model_config.h"
#include "graph/graph.h"
#include "graph/graph_builder.h"
#include "models/synth_arch.h"
#include "models/tensor_slots.h"
#include "text/chat_template.h"

namespace edgevl::models {

// How a tensor is stored and treated by quantization.
enum class WeightRole {
  Embedding,  // token embeddings (also the lm_head when tied)
  LmHead,
  Norm,      // RMSNorm / LayerNorm weights: kept in float
  Bias,      // kept in float
  Linear,    // projection matrices [out, in]
  Constant,  // precomputed tables (RoPE)
};

// One checkpoint tensor as a family's table lists it.
struct TensorDef {
  std::string name;            // as in the family's own hub repo ("model.layers.0.mlp...")
  std::vector<int64_t> shape;  // as stored; linear weights are [out, in]
  WeightRole role = WeightRole::Linear;
  Slot slot = Slot::Fused;
  int32_t layer = -1;  // decoder layer, -1 for the others
  // Added to every element at import (not Fused tensors): Qwen3.5's zero-centred RMSNorm
  // weights are stored as w and used as 1 + w.
  float add = 0.f;
};

// A graph tensor cut from a Fused checkpoint tensor: rows of the [rows, cols] source, taken as
// `count` runs of `run` rows, the i-th starting at `first + i * stride`.
struct SplitPart {
  Slot slot;
  std::string name;  // tensor-table name of the part
  int64_t rows = 0, cols = 0;
  int64_t first = 0, run = 0, stride = 0, count = 1;
};

// Defaults that differ by family, for keys config.json may omit.
struct FamilyDefaults {
  int32_t max_position = 2048;
  int32_t bos_id = -1;  // -1: none
  int32_t eos_id = -1;
  bool explicit_head_dim = true;  // honour a `head_dim` key (InternLM2 always derives it)
  int32_t head_dim = 0;           // when the key is absent; 0: hidden_size / heads
};

// A flag of a family's config, declared by the family (LlmFamily::flags): the config.json key it
// is read from (absent: `dflt`), kept under that name in LlmConfig::flags and so in the binary,
// read where the family builds its tensors or graph.
struct BoolFlag {
  const char* name;
  bool dflt = false;
  bool operator()(const LlmConfig& c) const { return c.flags.get_int(name, dflt) != 0; }
  void set(LlmConfig& c, bool v) const { c.flags.set(name, int32_t(v)); }
};

class LlmFamily {
 public:
  virtual ~LlmFamily() = default;
  virtual const char* name() const = 0;  // "qwen3": stored in the .evb, shown by inspect
  virtual std::vector<std::string> model_types() const = 0;    // config.json model_type
  virtual std::vector<std::string> architectures() const = 0;  // architectures[0] classes
  virtual FamilyDefaults defaults() const = 0;
  // The flags it declares; parse_llm_config reads each from config.json into LlmConfig::flags.
  virtual std::vector<BoolFlag> flags() const { return {}; }
  // What else the family reads or refuses in config.json (settings it does not implement),
  // after the common keys and the flags.
  virtual void read_config(const JsonFields&, LlmConfig&) const {}
  // For a VLM whose config.json holds the LLM in text_config (Qwen3-VL), what the family reads
  // from the top level (e.g. how many vision layers feed the LLM), after read_config.
  virtual void read_outer_config(const JsonFields&, LlmConfig&) const {}
  // Every tensor a checkpoint of this config holds, in model order, in the family's naming.
  // The importer requires exactly these (plus unused_ok), synth writes exactly these.
  virtual std::vector<TensorDef> tensors(const LlmConfig& c) const = 0;
  // The parts a Fused tensor of tensors() splits into.
  virtual std::vector<SplitPart> split(const TensorDef& t, const LlmConfig& c) const;
  // Name suffixes of checkpoint tensors that may be present and are not needed (e.g. rotary
  // caches some exporters save); one ending in '*' is a name prefix ("mtp.*").
  virtual std::vector<std::string> unused_ok() const { return {}; }
  // The dims of each head RoPE rotates (the RoPE tables are half that wide): head_dim unless
  // the family rotates only part of each head.
  virtual int32_t rotary_dim(const LlmConfig& c) const { return c.head_dim; }
  // The published shapes `edgevl synth` can write for this family (none: synth has no arch of it).
  virtual std::vector<SynthArch> synth_archs() const { return {}; }
  // `hf_template` is tokenizer_config.json's chat_template ("" when absent), a hint for
  // families whose checkpoints ship more than one.
  virtual text::ChatTemplate chat_template(const std::string& hf_template) const = 0;

  // The graphs (`width` rows per run: `prefill`, `decode`, `decode_batch`), from the embedding
  // rows to the final norm. Default: the input, decoder_layer() per layer, the final RMSNorm.
  virtual Graph decoder_graph(const std::string& name, int32_t width, const LlmConfig& c,
                              const DecoderTensors& t, const TensorIndex& index) const;
  // One layer, from its input row(s) `x` to its output. Default: the Llama pre-norm layer
  // (blocks.h llama_decoder_layer), whose attention and MLP add the biases and per-head q/k
  // norms the table filled.
  virtual int32_t decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t,
                                const LlmConfig& c, RopeTables rope, int32_t layer) const;
  // Final-norm rows -> logits (`head`, `head_batch`). Default: the LM head matmul.
  virtual Graph head_graph(const std::string& name, int32_t width, const LlmConfig& c,
                           const DecoderTensors& t, const TensorIndex& index) const;
};

}  // namespace edgevl::models
