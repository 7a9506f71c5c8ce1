#include <cstdio>
#include <map>

#include "app/commands.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "runtime/execution/htp_delegate.h"
#include "runtime/execution/model.h"
#include "runtime/execution/model_cost.h"

namespace edgevl::app {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void print_graph(const Model& m, const Graph& g, bool ops) {
  std::printf("graph %-12s width %-5d %4zu ops  arena %s\n", g.name.c_str(), g.width, g.ops.size(),
              human_bytes(uint64_t(g.arena_bytes)).c_str());
  if (!ops) return;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const Value& out = g.values[op.output];
    std::string ins;
    for (int32_t id : op.inputs) {
      const Value& v = g.values[id];
      if (v.kind == ValueKind::Weight) {
        const TensorEntry& e = m.weight(v.weight);
        ins += fmt::format("{}{}:{}{}", ins.empty() ? "" : ", ", v.name, e.type_name(),
                           shape_str(e.shape));
      } else {
        ins += (ins.empty() ? "" : ", ") + v.name;
      }
    }
    // A fused matmul shows its epilogue and names its product; values that may be handed over
    // as bf16 blocks are marked [b].
    std::string name = op_name(op.type);
    if (op.type == OpType::MatMul && op.matmul().epilogue != Epilogue::kNone) {
      name += std::string("+") + epilogue_name(op.matmul().epilogue);
      ins += " (product " + g.values[size_t(op.matmul().pre)].name + ")";
    }
    std::printf("  %4zu %-14s %-22s %-14s <- %s\n", i, name.c_str(),
                (out.name + (out.bf16_blocks ? " [b]" : "")).c_str(), shape_str(out.shape).c_str(),
                ins.c_str());
  }
}

}  // namespace

void add_inspect(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("inspect", "Describe a .evb context binary");
  struct Opts {
    std::string path;
    bool no_ops = false, no_tensors = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("model", o->path, "Model binary (.evb)")->required();
  cmd->add_flag("--no-ops", o->no_ops, "Do not list each graph's ops");
  cmd->add_flag("--no-tensors", o->no_tensors, "Do not list the tensors");
  cmd->callback([=] {
    *run = [=] {
      Model m(o->path);
      const EvbFile& f = m.file();
      const LlmConfig& c = m.config();
      const RuntimeConfig& rt = m.runtime_config();
      std::printf("file        %s (%s)\n", f.path().c_str(), human_bytes(f.file_size()).c_str());
      std::printf("format      v%u, target %s, required features 0x%llx, producer %s\n",
                  f.format_version(), target_isa_name(f.target().isa),
                  (unsigned long long)f.target().required_features, f.producer().c_str());
      std::printf("sections   ");
      for (const auto& s : f.sections())
        std::printf(" %s@%llu(%s)", section_name(s.id), (unsigned long long)s.offset,
                    human_bytes(s.size).c_str());
      std::printf("\n");
      std::string flags;  // the family's own (src/models/<family>.cpp)
      for (const FamilyFlags::Flag& fl : c.flags.items())
        flags +=
            fmt::format(" {}={}", fl.name, std::visit([](auto v) { return double(v); }, fl.value));
      std::printf(
          "model       %s: hidden %d, layers %d, heads %d (kv %d, head dim %d), ffn %d, vocab %d\n"
          "            norm eps %g, rope theta %g, max positions %d, tied embeddings %s, flags%s\n",
          c.family.c_str(), c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn,
          c.vocab_size, double(c.norm_eps), double(c.rope_theta), c.max_position,
          c.tie_embeddings ? "yes" : "no", flags.empty() ? " none" : flags.c_str());
      const KvLayout kv{rt.kv_type, c.n_kv_heads, c.head_dim, rt.context};
      const uint64_t kv_bytes = 2ull * uint64_t(m.kv_layers()) * kv.cache_bytes();
      int64_t arena = 0;
      for (const Graph& g : m.graphs()) arena = std::max(arena, g.arena_bytes);
      // q8: say what it saves against the f16 default at the same context.
      std::string kv_note;
      if (rt.kv_type == DType::Q8)
        kv_note = fmt::format(
            "; int8, f32 scale per token and head; f16 would take {}",
            human_bytes(2ull * uint64_t(m.kv_layers()) *
                        KvLayout{DType::F16, c.n_kv_heads, c.head_dim, rt.context}.cache_bytes()));
      std::printf("runtime     context %d tokens, prefill chunk %d, KV cache %s (%s%s), arena %s\n",
                  rt.context, rt.prefill_chunk, dtype_name(rt.kv_type).data(),
                  human_bytes(kv_bytes).c_str(), kv_note.c_str(),
                  human_bytes(uint64_t(arena)).c_str());
      const text::Tokenizer& t = m.tokenizer();
      std::printf(
          "tokenizer   %s, %d tokens, bos %d, eos %d, add_bos %s\n",
          t.kind() == text::TokenizerKind::ByteLevelBpe ? "byte-level BPE" : "sentencepiece BPE",
          t.vocab_size(), t.bos_id(), t.eos_id(), t.add_bos() ? "yes" : "no");
      std::string stops;
      for (int32_t id : m.stop_ids()) stops += fmt::format(" {}({})", id, t.piece(id));
      std::printf("template    %s; stop tokens:%s\n", m.chat_template().name.c_str(),
                  stops.c_str());
      if (const VisionConfig* v = m.vision())
        std::printf(
            "vision      InternViT hidden %d, layers %d, heads %d, ffn %d; image %d, patch %d, "
            "pixel shuffle 1/%d -> %d tokens per tile; tiles %d..%d%s; <img> %d </img> %d "
            "<IMG_CONTEXT> %d\n",
            v->hidden, v->n_layers, v->n_heads, v->ffn, v->image_size, v->patch_size, v->shuffle,
            v->tokens_per_tile(), v->min_tiles, v->max_tiles,
            v->use_thumbnail ? " + thumbnail" : "", v->img_start_id, v->img_end_id,
            v->img_context_id);
      // What a token and a tile cost, the figures bench and phone projections divide by.
      const ModelCost cost(m);
      const std::string vision_cost =
          m.vision() ? fmt::format(", vision {:.1f} GFLOP per tile", cost.vision_flops() / 1e9)
                     : "";
      std::printf(
          "cost        prefill %.3f GFLOP per token (128 tokens), decode reads %.1f MB per token "
          "+ %.1f KB per cached token%s\n",
          cost.prefill_flops(128, 0) / 128 / 1e9, cost.decode_weight_bytes() / 1e6,
          cost.kv_token_bytes() / 1e3, vision_cost.c_str());
      if (const std::string htp = describe_htp_section(m); !htp.empty())
        std::printf("%s", htp.c_str());
      for (const Graph& g : m.graphs()) print_graph(m, g, !o->no_ops);
      std::map<std::string, uint64_t> by_type;
      uint64_t total = 0;
      for (const TensorEntry& e : f.tensors()) {
        by_type[e.type_name()] += e.bytes;
        total += e.bytes;
      }
      std::printf("tensors     %zu, %s:", f.tensors().size(), human_bytes(total).c_str());
      for (const auto& [type, bytes] : by_type)
        std::printf(" %s %s", type.c_str(), human_bytes(bytes).c_str());
      std::printf("\n");
      if (!o->no_tensors)
        for (const TensorEntry& e : f.tensors())
          std::printf(
              "  %-52s %-8s %-16s %s\n", e.name.c_str(), e.type_name().c_str(),
              shape_str(e.shape).c_str(),
              e.source == TensorSource::File ? human_bytes(e.bytes).c_str() : "computed at load");
      return 0;
    };
  });
}

}  // namespace edgevl::app
