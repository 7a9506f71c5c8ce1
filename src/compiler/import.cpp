#include "compiler/import.h"

#include <climits>
#include <set>

#include "compiler/tokenizer_import.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "format/checkpoint.h"
#include "format/json_fields.h"
#include "models/llm_config.h"
#include "models/registry.h"
#include "vision/qwen_vl_preprocess.h"
#include "vision/qwen_vl_video.h"

namespace edgevl::compiler {

namespace {

DType parse_kv_type(const std::string& s) {
  DType t;
  check(dtype_from_name(s, &t) && kv_type_supported(t),
        "unsupported --kv '{}': choose f32, f16, q8 or auto", s);
  return t;
}

RuntimeConfig runtime_config(const CompileOptions& o, const LlmConfig& cfg, DType matrix_type) {
  RuntimeConfig rt;
  const int32_t max_pos = cfg.max_position > 0 ? cfg.max_position : 4096;
  rt.context = o.context > 0 ? o.context : std::min(max_pos, 4096);
  check(rt.context <= max_pos || cfg.max_position <= 0,
        "--context {} exceeds the model's max_position_embeddings {}", rt.context, max_pos);
  check(o.prefill_chunk >= 1 && o.prefill_chunk <= 4096, "--chunk {} out of range [1, 4096]",
        o.prefill_chunk);
  rt.prefill_chunk = std::min(o.prefill_chunk, rt.context);
  check(o.decode_batch >= 1 && o.decode_batch <= 64, "--batch {} out of range [1, 64]",
        o.decode_batch);
  rt.kv_type =
      o.kv == "auto" ? (matrix_type == DType::F32 ? DType::F32 : DType::F16) : parse_kv_type(o.kv);
  return rt;
}

// InternVL prompts need <img>, </img> and <IMG_CONTEXT> from the tokenizer.
void resolve_image_tokens(const CompileOptions& o, const LlmConfig& cfg,
                          const text::TokenizerData& tok, VisionConfig& v) {
  const text::Tokenizer t(tok);
  auto special = [&](const char* s) {
    auto id = t.find_token(s);
    check(id.has_value(), "{}: the tokenizer has no '{}' token, which InternVL prompts need",
          o.input.string(), s);
    return *id;
  };
  v.img_start_id = special("<img>");
  v.img_end_id = special("</img>");
  v.img_context_id = special("<IMG_CONTEXT>");
  v.llm_hidden = cfg.hidden;
}

}  // namespace

ImportedModel import_checkpoint(const CompileOptions& o, DType matrix_type,
                                const std::function<void(const std::string&)>& log) {
  check(std::filesystem::is_directory(o.input),
        "{}: not a directory (expected a hub checkpoint: config.json, *.safetensors, tokenizer "
        "files)",
        o.input.string());
  ImportedModel m;
  m.llm = models::load_llm_config(o.input);
  const LlmConfig& cfg = m.llm;
  const models::LlmFamily& family = models::family_named(cfg.family);
  log(fmt::format("{}: {} d={} layers={} heads={}/{} ffn={} vocab={}", o.input.string(), cfg.family,
                  cfg.hidden, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.ffn, cfg.vocab_size));
  m.runtime = runtime_config(o, cfg, matrix_type);

  m.tokenizer = load_tokenizer_dir(o.input);
  const std::string hf_template = load_chat_template_string(o.input).value_or("");
  m.vlm = models::load_vlm_info(o.input);
  m.chat_template =
      m.vlm.is_vlm ? models::internvl_template(m.vlm, cfg.family, hf_template, o.input.string())
                   : family.chat_template(hf_template);
  if (m.vlm.is_vlm) {
    const VisionConfig& v = m.vlm.vision;
    resolve_image_tokens(o, cfg, m.tokenizer, m.vlm.vision);
    log(
        fmt::format("vision: InternViT d={} layers={}/{} heads={} ffn={} image {} patch {}, "
                    "{} tokens per tile, template {}",
                    v.hidden, v.n_layers, m.vlm.vision_layers, v.n_heads, v.ffn, v.image_size,
                    v.patch_size, v.tokens_per_tile(), m.chat_template.name));
  }

  m.checkpoint = std::make_unique<const Checkpoint>(o.input);
  const Checkpoint& ckpt = *m.checkpoint;
  m.llm_weights = plan_llm_weights(ckpt, cfg, family, models::llm_naming(m.vlm), m.runtime.context);
  if (m.vlm.is_vlm) m.vision_weights = plan_vision_weights(ckpt, m.vlm);
  std::set<std::string> consumed = m.llm_weights.consumed;
  consumed.insert(m.vision_weights.consumed.begin(), m.vision_weights.consumed.end());
  m.qwen_vision_shape = qwen_vision_shape(cfg);
  if (m.qwen_vision_shape.present()) {
    // The vision graph's width: the processor's max_pixels in patches, at most kMaxPatches or
    // --vision-max-patches (larger images are resized to fit, as smart_resize does with a
    // smaller max_pixels).
    constexpr int64_t kMaxPatches = 4096;  // a 1024x1024 image at patch 16
    check(
        o.vision_max_patches == 0 || (o.vision_max_patches >= 4 && o.vision_max_patches <= 16384 &&
                                      o.vision_max_patches % 4 == 0),
        "--vision-max-patches {}: a multiple of 4 from 4 to 16384 (a 2048x2048 image at patch "
        "16)",
        o.vision_max_patches);
    QwenVisionShape& vs = m.qwen_vision_shape;
    vision::QwenVlPreprocessConfig pre;
    if (const auto pp = o.input / "preprocessor_config.json"; std::filesystem::exists(pp))
      pre = vision::parse_qwen_vl_preprocessor(read_json_file(pp), pp.string());
    check(pre.patch_size == vs.patch && pre.merge_size == vs.merge &&
              pre.temporal_patch_size == vs.temporal && pre.rescale_factor == 1.0 / 255.0 &&
              pre.max_pixels <= INT32_MAX,
          "{}: preprocessor_config.json (patch {}, merge {}, temporal {}, rescale {}) does not "
          "match the vision tower (patch {}, merge {}, temporal {}, rescale 1/255)",
          o.input.string(), pre.patch_size, pre.merge_size, pre.temporal_patch_size,
          pre.rescale_factor, vs.patch, vs.merge, vs.temporal);
    // What the runtime's processor needs (runtime/chat/qwen_vl_prompt.cpp).
    m.llm.flags.set("vision.min_pixels", int32_t(pre.min_pixels));
    m.llm.flags.set("vision.max_pixels", int32_t(pre.max_pixels));
    for (int ch = 0; ch < 3; ++ch) {
      m.llm.flags.set("vision.mean." + std::to_string(ch), pre.mean[ch]);
      m.llm.flags.set("vision.std." + std::to_string(ch), pre.std[ch]);
    }
    // The video processor's settings (video_preprocessor_config.json, else its class
    // defaults): what the runtime's video path reads (runtime/execution/image_processor.cpp).
    // Without the file, class defaults that do not fit the tower (a patch size other than 16)
    // leave the binary without video, as transformers could not run one either.
    vision::QwenVlVideoConfig video;
    const auto vp = o.input / "video_preprocessor_config.json";
    const bool has_video_config = std::filesystem::exists(vp);
    if (has_video_config)
      video = vision::parse_qwen_vl_video_preprocessor(read_json_file(vp), vp.string());
    const bool video_fits = video.pre.patch_size == vs.patch && video.pre.merge_size == vs.merge &&
                            video.pre.temporal_patch_size == vs.temporal &&
                            video.pre.rescale_factor == 1.0 / 255.0 &&
                            video.pre.max_pixels <= INT32_MAX;
    check(video_fits || !has_video_config,
          "{}: video_preprocessor_config.json (patch {}, merge {}, temporal {}) does not match "
          "the vision tower (patch {}, merge {}, temporal {})",
          o.input.string(), video.pre.patch_size, video.pre.merge_size,
          video.pre.temporal_patch_size, vs.patch, vs.merge, vs.temporal);
    if (video_fits) {
      m.llm.flags.set("video.min_pixels", int32_t(video.pre.min_pixels));
      m.llm.flags.set("video.max_pixels", int32_t(video.pre.max_pixels));
      for (int ch = 0; ch < 3; ++ch) {
        m.llm.flags.set("video.mean." + std::to_string(ch), video.pre.mean[ch]);
        m.llm.flags.set("video.std." + std::to_string(ch), video.pre.std[ch]);
      }
      m.llm.flags.set("video.fps", float(video.sampling.fps));
      m.llm.flags.set("video.min_frames", video.sampling.min_frames);
      m.llm.flags.set("video.max_frames", video.sampling.max_frames);
      m.llm.flags.set("video.cap_pixels_per_frame", int32_t(video.cap_pixels_per_frame));
      m.llm.flags.set("video.max_video_tokens", video.max_video_tokens);
    } else {
      log("vision: no video_preprocessor_config.json and the video processor's defaults do not "
          "fit this tower: the binary takes no video");
    }
    const int64_t max_pixels = pre.max_pixels;
    const int64_t block = int64_t(vs.patch) * vs.patch * vs.merge * vs.merge;
    const int64_t cap = o.vision_max_patches > 0 ? o.vision_max_patches : kMaxPatches;
    vs.max_patches = int32_t(std::clamp<int64_t>(max_pixels / block, 1, cap / 4) * 4);
    set_qwen_vision_max_patches(m.llm, vs.max_patches);
    m.qwen_vision = plan_qwen3_vl_vision(ckpt, vs);
    for (const WeightSpec& s : m.qwen_vision.specs) m.vision_weights.specs.push_back(s);
    m.vision_weights.consumed.insert(m.qwen_vision.consumed.begin(), m.qwen_vision.consumed.end());
    consumed.insert(m.qwen_vision.consumed.begin(), m.qwen_vision.consumed.end());
    log(
        fmt::format("vision: {} tower d={} blocks={} heads={} ffn={} patch {}, DeepStack {}, up to "
                    "{} patches",
                    cfg.family, vs.hidden, vs.depth, vs.heads, vs.ffn, vs.patch,
                    vs.deepstack.size(), vs.max_patches));
  } else {
    check(o.vision_max_patches == 0,
          "--vision-max-patches: {} has no Qwen-VL vision tower (InternVL's tiles are fixed)",
          o.input.string());
  }
  std::vector<std::string> allowed = family.unused_ok();
  if (cfg.tie_embeddings)  // some exporters save the tied head too; it is the embedding
    for (const char* head : {"lm_head.weight", "output.weight"}) allowed.push_back(head);
  check_all_consumed(ckpt, consumed, allowed);
  return m;
}

}  // namespace edgevl::compiler
