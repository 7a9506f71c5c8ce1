#include <cstdio>

#include "app/commands.h"
#include "compiler/compile.h"

namespace edgevl::app {

void add_compile(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("compile", "Compile a hub checkpoint directory into a .evb");
  auto o = std::make_shared<compiler::CompileOptions>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("dir", o->input, "Checkpoint directory (config.json, *.safetensors, tokenizer)")
      ->required();
  cmd->add_option("-o,--output", o->output, "Output .evb file")->required();
  cmd->add_option("--quant", o->quant,
                  "Preset: f32, f16, bf16, w8a8, w4a8, w4a16; with --target also the HTP's "
                  "w8a16 / w4a16 (int8 / int4 weights, 16-bit activations; f16 on the CPU)")
      ->capture_default_str();
  cmd->add_option("--group", o->group, "Q4 group size along the input dim: 32, 64, 128")
      ->capture_default_str();
  cmd->add_flag("--zero-point", o->zero_point, "Q4 with a zero point per group (asymmetric)");
  cmd->add_option("--vision-quant", o->vision_quant,
                  "Vision tower storage: f32, f16, bf16 or w8a8 (encoder projections in int8 "
                  "with int8 activations; default: the preset's, bf16 for integer presets)");
  cmd->add_option("--vision-max-patches", o->vision_max_patches,
                  "Qwen-VL: the largest image the vision tower takes, in 16x16 patches (larger "
                  "images are resized to fit; default min(the processor's max_pixels, 4096); at "
                  "most 16384)");
  cmd->add_option("--context", o->context,
                  "KV cache capacity in tokens (default min(max pos, 4096))");
  cmd->add_option("--chunk", o->prefill_chunk, "Prefill chunk width in tokens")
      ->capture_default_str();
  cmd->add_option("--batch", o->decode_batch,
                  "Most sequences a batched decode step serves (1: no batch graphs)")
      ->capture_default_str();
  cmd->add_option("--kv", o->kv,
                  "KV cache type: f32, f16, q8 (int8, a scale per token and head) or auto "
                  "(f32 for --quant f32, else f16)")
      ->capture_default_str();
  cmd->add_option("--overrides", o->overrides,
                  "JSON file of per-tensor types (tensor_quantization_overrides, patterns)");
  cmd->add_option("--calib", o->calib,
                  "Calibration samples, JSONL lines {\"text\": ..., \"image\": optional path}");
  cmd->add_option("--calib-rows", o->calib_rows, "Input rows recorded per projection")
      ->capture_default_str();
  cmd->add_option("--target", o->htp_target,
                  "Also compile the HTP graphs for a Qualcomm Hexagon NPU: htp-v73, htp-v75, "
                  "htp-v79, htp-v81 (needs the QNN HTP library: scripts/setup.sh)");
  cmd->add_option("--htp-quant", o->htp_quant,
                  "HTP graphs' arithmetic: fp16, or a16w8 (int8 weights, uint16 activations "
                  "encoded from the ranges --calib's samples reach)")
      ->default_str("fp16");
  cmd->add_flag("--htp-share-weights", o->htp_share_weights,
                "HTP graphs share equal weights: a smaller context binary for devices (the x86 "
                "simulator cannot load it)");
  cmd->add_option("-t,--threads", o->threads, "Threads for calibration (default: physical cores)");
  auto no_check = std::make_shared<bool>(false);
  cmd->add_flag("--no-calib-check", *no_check,
                "Keep calibration even if it does not lower the KL on the samples");
  cmd->add_flag("-q,--quiet", *quiet, "No progress output");
  cmd->callback([=] {
    *run = [=] {
      if (!*quiet) o->log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
      o->calib_check = !*no_check;
      const auto s = compiler::compile_model(*o);
      std::fprintf(stderr, "wrote %s: %s (%zu tensors, %s of weights) in %.1f s\n",
                   o->output.string().c_str(), human_bytes(s.file_bytes).c_str(), s.tensors,
                   human_bytes(s.weight_bytes).c_str(), s.seconds);
      if (s.calibrated)
        std::fprintf(stderr,
                     "calibration: %d input groups measured, %d rescaled, %d tensors clipped, "
                     "%d GPTQ-compensated, mean output SQNR gain %.2f dB on the recorded rows; "
                     "%s\n",
                     s.calibration.groups, s.calibration.scaled, s.calibration.clipped_tensors,
                     s.calibration.gptq_tensors, s.calibration.mean_gain_db,
                     s.transforms ? "applied" : "not applied (no lower KL on the samples)");
      return 0;
    };
  });
}

}  // namespace edgevl::app
