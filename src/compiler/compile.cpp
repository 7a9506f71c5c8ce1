#include "compiler/compile.h"

#include <chrono>
#include <map>
#include <set>

#include "backend/cpu/kernels.h"
#include "compiler/graph_passes.h"
#include "compiler/htp_compile.h"
#include "compiler/import.h"
#include "compiler/llm_weights.h"
#include "compiler/quant_overrides.h"
#include "compiler/quant_preset.h"
#include "compiler/quant_report.h"
#include "compiler/vision_weights.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "core/temp_dir.h"
#include "format/evb.h"
#include "graph/graph_io.h"
#include "models/registry.h"
#include "runtime/execution/model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace edgevl::compiler {

namespace {

// The layer-wise search can pick scales that help each layer on its rows yet not the whole
// model (tiny models, few samples): compile both variants and keep the calibrated one only if
// its next-token KL against float over the calibration texts is lower.
std::shared_ptr<const Transforms> end_to_end_check(const CompileOptions& o, const Model& ref,
                                                   const std::vector<CalibSample>& samples,
                                                   std::shared_ptr<const Transforms> t,
                                                   CalibrationSummary* summary) {
  const auto seqs = text_sequences(ref, samples, ref.runtime_config().context);
  if (seqs.empty()) return t;  // image-only samples: nothing to score on
  TempDir tmp;
  auto variant = [&](std::shared_ptr<const Transforms> tv, const char* name) {
    CompileOptions v = o;
    v.output = tmp.path() / name;
    v.calib.clear();
    v.htp_target.clear();  // a CPU-side comparison
    v.calib_reference = nullptr;
    v.calib_activations = nullptr;
    v.transforms = tv;
    v.log = nullptr;
    compile_model(v);
    const Model m(v.output);
    return compare_models(ref, m, seqs, o.threads).mean_kl;
  };
  summary->kl_plain = variant(nullptr, "plain.evb");
  summary->kl_calibrated = variant(t, "calibrated.evb");
  summary->kept = summary->kl_calibrated <= summary->kl_plain;
  if (o.log)
    o.log(fmt::format("calibration: mean KL vs float on the calibration texts {:.6f} -> {:.6f}: {}",
                      summary->kl_plain, summary->kl_calibrated,
                      summary->kept ? "kept" : "dropped (the uncalibrated model is closer)"));
  return summary->kept ? t : nullptr;
}

// Runs the float model over the calibration samples and picks the transforms (calibration.h).
std::shared_ptr<const Transforms> run_calibration(const CompileOptions& o,
                                                  const std::vector<TensorEntry>& entries,
                                                  CalibrationSummary* summary) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  std::map<std::string, TensorEntry> by_name;
  for (const TensorEntry& e : entries) by_name[e.name] = e;
  const int threads = o.threads > 0 ? o.threads : cpu::default_thread_count();
  const auto samples = read_calib_jsonl(o.calib);
  TempDir tmp;
  std::unique_ptr<Model> own;
  ActivationMap own_acts;
  const Model* ref = o.calib_reference;
  const ActivationMap* acts = o.calib_activations;
  if (!ref || !acts) {
    CompileOptions f;
    f.input = o.input;
    f.output = tmp.path() / "float.evb";
    f.quant = "f32";
    f.context = o.context;
    f.prefill_chunk = o.prefill_chunk;
    log(fmt::format("calibration: compiling the float reference ({} samples)", samples.size()));
    compile_model(f);
    own = std::make_unique<Model>(f.output);
    ref = own.get();
    own_acts = collect_activations(*ref, samples, o.threads, o.calib_rows, log);
    acts = &own_acts;
  }
  std::shared_ptr<const Transforms> t;
  {
    cpu::ThreadPool pool(threads);
    t = std::make_shared<const Transforms>(calibrate(pool, *ref, by_name, *acts, log, summary));
  }
  return o.calib_check ? end_to_end_check(o, *ref, samples, t, summary) : t;
}

}  // namespace

// `--quant w8a16` names the HTP's quantized build as the seeds did: int8 weights and 16-bit
// activations in the HTP graphs (--htp-quant a16w8), f16 in the CPU sections it falls back to.
CompileOptions with_htp_preset(const CompileOptions& in) {
  CompileOptions o = in;
  // w4a16 is also a CPU preset: with a target it names the HTP's int4 build instead.
  const bool w4 = o.quant == "w4a16" && !o.htp_target.empty();
  if (o.quant != "w8a16" && !w4) return o;
  check(!o.htp_target.empty(),
        "--quant w8a16 (int8 weights, 16-bit activations) is the HTP's preset: add --target "
        "htp-v75 (or htp-v73, htp-v79, htp-v81); on the CPU use w8a8, w4a16 or f16");
  const std::string htp = w4 ? "a16w4" : "a16w8";
  check(o.htp_quant == "fp16" || o.htp_quant == htp, "--quant {} and --htp-quant {} disagree",
        o.quant, o.htp_quant);
  o.htp_quant = htp;
  o.quant = "f16";
  return o;
}

CompileSummary compile_model(const CompileOptions& requested) {
  const auto t0 = std::chrono::steady_clock::now();
  const CompileOptions o = with_htp_preset(requested);
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  const QuantPreset preset = parse_quant_preset(o.quant, o.group, o.zero_point, o.vision_quant);
  HtpCompileOptions htp;
  htp.target = o.htp_target;
  htp.quant = o.htp_quant;
  htp.calib = o.calib;
  htp.threads = o.threads;
  htp.share_weights = o.htp_share_weights;
  htp.split_layers = o.htp_split_layers;
  htp.overrides = o.overrides;
  if (!o.htp_target.empty()) check_htp_options(htp);  // before any work
  check(std::filesystem::is_directory(o.input),
        "{}: not a directory (expected a hub checkpoint: config.json, *.safetensors, tokenizer "
        "files)",
        o.input.string());

  ImportedModel m = import_checkpoint(o, preset.matrix, log);
  const LlmConfig& cfg = m.llm;
  RuntimeConfig& rt = m.runtime;
  const LlmWeights& weights = m.llm_weights;
  const VisionWeights& vweights = m.vision_weights;
  const models::VlmInfo& vlm = m.vlm;
  check(o.vision_quant.empty() || vlm.is_vlm,
        "--vision-quant {}: {} has no vision tower (a text-only model)", o.vision_quant,
        o.input.string());
  std::set<std::string> encoder_projections;  // what --vision-quant w8a8 stores in int8
  for (const models::VitLayerTensors& ly : vweights.tensors.layers)
    for (const std::string* w : {&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.fc1w, &ly.fc2w})
      encoder_projections.insert(*w);

  EvbWriteInput in;
  in.producer = "edgevl 0.1.0";
  std::map<std::string, int32_t> index;
  std::vector<const WeightSpec*> spec_of;
  std::vector<const WeightSpec*> all_specs;
  for (const WeightSpec& s : weights.specs) all_specs.push_back(&s);
  for (const WeightSpec& s : vweights.specs) all_specs.push_back(&s);
  for (const WeightSpec* sp : all_specs) {
    const WeightSpec& s = *sp;
    TensorEntry e;
    e.name = s.name;
    e.shape = s.shape;
    e.source = s.source;
    const bool vision =
        sp >= vweights.specs.data() && sp < vweights.specs.data() + vweights.specs.size();
    assign_storage(preset, s.role,
                   !vision                             ? WeightPlace::Llm
                   : encoder_projections.count(s.name) ? WeightPlace::VisionEncoder
                                                       : WeightPlace::VisionOther,
                   e);
    index[s.name] = int32_t(in.tensors.size());
    in.tensors.push_back(e);
    spec_of.push_back(&s);
  }
  if (!o.overrides.empty()) {
    std::vector<WeightRole> roles;
    for (const WeightSpec* sp : spec_of) roles.push_back(sp->role);
    apply_quant_overrides(read_quant_overrides(o.overrides), preset, roles, in.tensors);
  }
  CompileSummary sum;
  std::shared_ptr<const Transforms> transforms = o.transforms;
  // The samples calibrate the CPU's integer weights; a float build takes them for its HTP
  // graphs only (add_htp_section).
  const bool integer_weights = std::any_of(in.tensors.begin(), in.tensors.end(), [](const auto& e) {
    return e.dtype == DType::Q8 || e.dtype == DType::Q4;
  });
  if (!transforms && !o.calib.empty() && integer_weights) {
    transforms = run_calibration(o, in.tensors, &sum.calibration);
    sum.calibrated = true;
  }
  sum.transforms = transforms;

  rt.embedding_tensor = index.at(weights.tensors.embedding);
  // The family builds its graphs (src/models); the passes below are the compiler's.
  const models::LlmFamily& family = models::family_named(cfg.family);
  const models::DecoderTensors& dt = weights.tensors;
  std::vector<Graph> graphs;
  graphs.push_back(family.decoder_graph("prefill", rt.prefill_chunk, cfg, dt, index));
  graphs.push_back(family.decoder_graph("decode", 1, cfg, dt, index));
  graphs.push_back(family.head_graph("head", 1, cfg, dt, index));
  if (o.decode_batch > 1) {
    graphs.push_back(family.decoder_graph("decode_batch", o.decode_batch, cfg, dt, index));
    graphs.push_back(family.head_graph("head_batch", o.decode_batch, cfg, dt, index));
  }
  if (vlm.is_vlm) graphs.push_back(models::internvit_graph(vlm.vision, vweights.tensors, index));
  if (m.qwen_vision_shape.present())
    graphs.push_back(
        models::qwen3_vl_vision_graph(m.qwen_vision_shape, m.qwen_vision.tensors, index));
  for (Graph& g : graphs) finish_graph(g, in.tensors, o.htp_target.empty());

  ByteWriter wc, wr, wg, wt, wtmpl;
  // The runtime config is written after the graphs exist (it names the embedding tensor).
  write_config(wc, cfg);
  write_config(wr, rt);
  wg.put<uint32_t>(uint32_t(graphs.size()));
  for (const Graph& g : graphs) write_graph(wg, g);
  text::write_tokenizer(m.tokenizer, wt);
  text::write_chat_template(wtmpl, m.chat_template);
  in.sections.emplace_back(SectionId::LlmConfig, std::move(wc.buffer()));
  in.sections.emplace_back(SectionId::RuntimeConfig, std::move(wr.buffer()));
  in.sections.emplace_back(SectionId::Graphs, std::move(wg.buffer()));
  in.sections.emplace_back(SectionId::Tokenizer, std::move(wt.buffer()));
  in.sections.emplace_back(SectionId::ChatTemplate, std::move(wtmpl.buffer()));
  if (vlm.is_vlm) {
    ByteWriter wv;
    write_config(wv, vlm.vision);
    in.sections.emplace_back(SectionId::VisionConfig, std::move(wv.buffer()));
  }

  std::vector<float> scratch;
  const std::vector<TensorEntry> entries = in.tensors;  // `in` is moved into the writer
  in.fill_tensor = [&](size_t i, uint8_t* out) {
    const TensorEntry& e = entries[i];
    scratch.resize(size_t(e.numel()));
    spec_of[i]->produce(scratch.data());
    if (transforms) {
      auto t = transforms->find(e.name);
      if (t != transforms->end()) apply_transform(t->second, e, scratch.data());
    }
    store_tensor(scratch.data(), e, out);
  };
  size_t last_pct = 0;
  in.progress = [&](size_t done, size_t total) {
    const size_t pct = done * 100 / total;
    if (pct / 10 != last_pct / 10 || done == total) {
      log(fmt::format("writing weights: {}/{} tensors ({}%)", done, total, pct));
      last_pct = pct;
    }
  };
  sum.tensors = in.tensors.size();
  for (const auto& e : in.tensors) sum.weight_bytes += e.bytes;
  write_evb(o.output, std::move(in));
  if (!o.htp_target.empty()) add_htp_section(o.output, htp, log);
  sum.file_bytes = std::filesystem::file_size(o.output);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace edgevl::compiler
