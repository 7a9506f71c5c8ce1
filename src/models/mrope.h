#pragma once
// Interleaved multimodal RoPE settings of the Qwen-VL text models (Qwen3-VL, Qwen3.5): how many
// rotary frequencies follow the height and the width position (the rest follow the temporal
// one), read from the rope settings' mrope_section and kept as ints in the config's flags, which
// AttentionShape::of (blocks.h) hands to the Rope ops. Frequency i follows h when i % 3 == 1 and
// i < 3 * h, w when i % 3 == 2 and i < 3 * w, else t; the frequencies are those that rotate
// (rot_dim / 2 of them: all of head_dim / 2 for Qwen3-VL, the partial rotary's for Qwen3.5).
#include <array>
#include <cstdint>

#include "core/error.h"
#include "format/json_fields.h"
#include "format/model_config.h"

namespace edgevl::models {

inline constexpr const char* kMropeH = "mrope_section_h";
inline constexpr const char* kMropeW = "mrope_section_w";

// `f`: the text config. transformers 4.57 wrote rope_scaling, 5.x writes rope_parameters: the
// same keys. `dflt`: the family's mrope_section when the key is absent. mrope_interleaved is not
// read: both families' rotary embeddings always interleave.
inline void read_mrope_section(const JsonFields& f, LlmConfig& c, std::array<int32_t, 3> dflt) {
  std::array<int32_t, 3> s = dflt;
  const char* key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (const nlohmann::json* rs = f.opt_object(key)) {
    const JsonFields r(*rs, f.what() + " " + key);
    if (const nlohmann::json* sec = r.opt("mrope_section")) {
      check(sec->is_array() && sec->size() == 3,
            "{}: mrope_section must be a list of 3 integers (t, h, w frequencies), got {}",
            r.what(), sec->dump());
      for (size_t i = 0; i < 3; ++i) {
        check((*sec)[i].is_number_integer() && (*sec)[i].get<int32_t>() >= 0 &&
                  (*sec)[i].get<int32_t>() < 16384,
              "{}: mrope_section {} must hold non-negative integers", r.what(), sec->dump());
        s[i] = (*sec)[i].get<int32_t>();
      }
    }
  }
  c.flags.set(kMropeH, s[1]);
  c.flags.set(kMropeW, s[2]);
}

}  // namespace edgevl::models
