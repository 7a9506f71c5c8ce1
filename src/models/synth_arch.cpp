#include "models/synth_arch.h"

namespace edgevl::models {

SynthArch llm_synth_arch(std::string name, std::function<nlohmann::ordered_json()> config,
                         std::function<nlohmann::ordered_json()> generation,
                         SynthTokenizer tokenizer) {
  return {std::move(name), false, [=](const SynthOverrides& o) {
            SynthFiles f;
            f.config = config();
            f.generation = generation();
            f.tokenizer = tokenizer;
            if (o.layers != -1) f.config["num_hidden_layers"] = o.layers;
            if (!o.torch_dtype.empty()) f.config["torch_dtype"] = o.torch_dtype;
            return f;
          }};
}

SynthArch llm_synth_arch(std::string name, const char* config, const char* generation,
                         SynthTokenizer tokenizer) {
  return llm_synth_arch(
      std::move(name), [config] { return nlohmann::ordered_json::parse(config); },
      [generation] { return nlohmann::ordered_json::parse(generation); }, tokenizer);
}

}  // namespace edgevl::models
