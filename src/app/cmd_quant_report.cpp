#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "compiler/quant_report.h"

namespace edgevl::app {

namespace {

void print_table(const compiler::QuantReport& r, size_t max_layers) {
  std::printf("quant-report: %s%s%s, KV %s%s; evaluated on %s\n", r.quant.c_str(),
              r.target.empty() ? "" : " on ", r.target.c_str(), r.kv_type.c_str(),
              r.calibrated ? ", calibrated" : "", r.eval_source.c_str());
  std::printf("weights %s (f32 %s, %.3fx), KV cache %s at the compiled context (f32 %s)\n",
              human_bytes(r.weight_bytes).c_str(), human_bytes(r.weight_bytes_float).c_str(),
              double(r.weight_bytes) / double(r.weight_bytes_float),
              human_bytes(r.kv_bytes).c_str(), human_bytes(r.kv_bytes_float).c_str());
  if (r.calibrated)
    std::printf(
        "calibration: %d groups, %d rescaled, %d tensors clipped, %d GPTQ-compensated, mean "
        "gain %.2f dB; KL on the samples %.6f -> %.6f: %s\n",
        r.calibration.groups, r.calibration.scaled, r.calibration.clipped_tensors,
        r.calibration.gptq_tensors, r.calibration.mean_gain_db, r.calibration.kl_plain,
        r.calibration.kl_calibrated, r.calibration.kept ? "applied" : "not applied");
  std::printf(
      "\n%-56s %-10s %9s %9s\n",
      r.layers_in_order ? "value at an HTP graph boundary (graph order)" : "layer (worst first)",
      "type", "SQNR dB", "rel L2");
  for (size_t i = 0; i < r.layers.size() && i < max_layers; ++i) {
    const auto& l = r.layers[i];
    std::printf("%-56s %-10s %9.2f %9.5f\n", l.name.c_str(), l.type.c_str(), l.sqnr_db, l.rel_l2);
  }
  if (r.layers.size() > max_layers)
    std::printf("... %zu more (all with --json)\n", r.layers.size() - max_layers);
  const auto& a = r.agreement;
  std::printf("\nend to end over %lld positions: top-1 agreement %.4f, mean KL %.6f",
              (long long)a.positions, a.top1, a.mean_kl);
  if (r.has_perplexity)
    std::printf(", perplexity %.4f (f32 %.4f)", std::exp(a.nll), std::exp(a.nll_float));
  std::printf("\n");
  if (r.vision.present)
    std::printf(
        "vision tower (encoder projections %s) vs f32 on %s: embeddings cosine %.6f; after an "
        "image prompt: next-token KL %.6f, top-1 %s vs the f32 model; the tower's own share "
        "(quantized LLM, f32 vs quantized tower features): KL %.6f, top-1 %s\n",
        r.vision.storage.c_str(), r.vision.source.c_str(), r.vision.cosine, r.vision.kl,
        r.vision.top1_same ? "equal" : "DIFFERENT", r.vision.kl_tower,
        r.vision.top1_same_tower ? "equal" : "DIFFERENT");
  if (!r.protected_layers.empty())
    std::printf("protecting %zu layer(s): top-1 %.4f, mean KL %.6f (%s)\n",
                r.protected_layers.size(), r.agreement_protected.top1,
                r.agreement_protected.mean_kl, r.target_met ? "target met" : "target NOT met");
}

nlohmann::json to_json(const compiler::QuantReport& r) {
  nlohmann::json j;
  j["quant"] = r.quant;
  j["target"] = r.target.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.target);
  j["kv_type"] = r.kv_type;
  j["calibrated"] = r.calibrated;
  j["eval"] = r.eval_source;
  j["positions"] = r.agreement.positions;
  j["top1_agreement"] = r.agreement.top1;
  j["mean_kl"] = r.agreement.mean_kl;
  j["perplexity"] = r.has_perplexity ? nlohmann::json(std::exp(r.agreement.nll)) : nullptr;
  j["perplexity_float"] =
      r.has_perplexity ? nlohmann::json(std::exp(r.agreement.nll_float)) : nullptr;
  j["weight_bytes"] = r.weight_bytes;
  j["weight_bytes_f32"] = r.weight_bytes_float;
  j["kv_bytes"] = r.kv_bytes;
  j["kv_bytes_f32"] = r.kv_bytes_float;
  if (r.calibrated)
    j["calibration"] = {{"groups", r.calibration.groups},
                        {"rescaled", r.calibration.scaled},
                        {"clipped_tensors", r.calibration.clipped_tensors},
                        {"gptq_tensors", r.calibration.gptq_tensors},
                        {"mean_gain_db", r.calibration.mean_gain_db},
                        {"kl_samples_plain", r.calibration.kl_plain},
                        {"kl_samples_calibrated", r.calibration.kl_calibrated},
                        {"applied", r.calibration.kept}};
  if (r.vision.present)
    j["vision"] = {{"source", r.vision.source},
                   {"storage", r.vision.storage},
                   {"cosine", r.vision.cosine},
                   {"kl", r.vision.kl},
                   {"top1_same", r.vision.top1_same},
                   {"kl_tower", r.vision.kl_tower},
                   {"top1_same_tower", r.vision.top1_same_tower}};
  j["layers"] = nlohmann::json::array();
  for (const auto& l : r.layers)
    j["layers"].push_back(
        {{"name", l.name}, {"type", l.type}, {"sqnr_db", l.sqnr_db}, {"rel_l2", l.rel_l2}});
  if (!r.protected_layers.empty()) {
    nlohmann::json p = nlohmann::json::array();
    for (const auto& [name, type] : r.protected_layers)
      p.push_back({{"name", name}, {"type", type}});
    j["protected"] = {{"layers", p},
                      {"top1_agreement", r.agreement_protected.top1},
                      {"mean_kl", r.agreement_protected.mean_kl},
                      {"target_met", r.target_met}};
  }
  return j;
}

}  // namespace

void add_quant_report(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand(
      "quant-report", "Per-layer and end-to-end error of a quantization setting against f32");
  auto o = std::make_shared<compiler::QuantReportOptions>();
  auto json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  auto top = std::make_shared<size_t>(20);
  cmd->add_option("dir", o->input, "Checkpoint directory")->required();
  auto* quant = cmd->add_option("--quant", o->quant,
                                "Preset: w8a8, w4a8, w4a16, f16, bf16; with --target: w8a16 "
                                "(the default there) or f16")
                    ->capture_default_str();
  cmd->add_option("--target", o->target,
                  "The HTP build for this Hexagon target (htp-v73, htp-v75, htp-v79, htp-v81), "
                  "run on the HTP: the error at its graphs' boundaries, in graph order");
  cmd->add_option("--group", o->group, "Q4 group size: 32, 64, 128")->capture_default_str();
  cmd->add_flag("--zero-point", o->zero_point, "Q4 with a zero point per group");
  cmd->add_option("--vision-quant", o->vision_quant,
                  "Vision tower storage, as compile: f32, f16, bf16 or w8a8");
  cmd->add_option("--kv", o->kv, "KV cache type of the quantized model")->capture_default_str();
  cmd->add_option("--overrides", o->overrides, "Per-tensor overrides JSON (as compile)");
  cmd->add_option("--calib", o->calib, "Calibration samples (JSONL, as compile)");
  cmd->add_option("--text", o->text, "Evaluation text (enables perplexity)");
  cmd->add_option("--max-tokens", o->max_tokens, "Evaluation tokens taken from --text")
      ->capture_default_str();
  cmd->add_option("--calib-rows", o->calib_rows, "Input rows recorded per projection")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--write-overrides", o->write_overrides,
                  "Write an overrides file protecting the worst layers until --target-kl");
  cmd->add_option("--target-kl", o->target_kl, "Mean KL the protection aims for")
      ->capture_default_str();
  cmd->add_option("--top", *top, "Layers shown in the table")->capture_default_str();
  cmd->add_flag("--json", *json, "One JSON object on stdout");
  cmd->add_flag("-q,--quiet", *quiet, "No progress output");
  cmd->callback([=] {
    *run = [=] {
      if (!o->target.empty() && quant->count() == 0) o->quant = "w8a16";
      if (!*quiet) o->log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
      const auto r = compiler::quant_report(*o);
      if (*json)
        std::printf("%s\n", to_json(r).dump(2).c_str());
      else
        print_table(r, *top);
      if (!o->write_overrides.empty())
        std::fprintf(stderr, "wrote %s (%zu protected layers)\n",
                     o->write_overrides.string().c_str(), r.protected_layers.size());
      return 0;
    };
  });
}

}  // namespace edgevl::app
