#include <cstdio>

#include "app/commands.h"
#include "synth/synth.h"

namespace edgevl::app {

void add_synth(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a random-weight checkpoint of a real architecture's shape (hub layout)");
  auto o = std::make_shared<synth::SynthOptions>();
  std::string archs;
  for (const auto& a : synth::synth_arch_names()) archs += (archs.empty() ? "" : ", ") + a;
  cmd->add_option("--arch", o->arch, "Architecture: " + archs)->required();
  cmd->add_option("--layers", o->layers, "Decoder layers (default: the real count)");
  cmd->add_option("--vision-layers", o->vision_layers,
                  "Vision tower layers, vision archs only (InternVL, Qwen3.5; default: the "
                  "real count)");
  cmd->add_flag("--hf-names", o->hf_names,
                "Write the transformers-native (-hf) layout, InternVL archs only");
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Stored type: bf16, f16, f32")->capture_default_str();
  cmd->add_option("--out", o->out, "Output directory")->required();
  cmd->callback([=] {
    *run = [=] {
      synth::synth_checkpoint(
          *o, [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); });
      std::fprintf(stderr, "wrote %s\n", o->out.string().c_str());
      return 0;
    };
  });
}

}  // namespace edgevl::app
