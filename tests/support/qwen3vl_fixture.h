#pragma once
// The tiny Qwen3-VL golden (tests/fixtures/golden/qwen3vl, tools/golden/make_qwen3vl_goldens.py)
// as the conversation-path tests use it: its image prompts with the reference's greedy ids,
// each image decoded (the procedural ones always, the photos when ../shared/data is there),
// and BMP bytes of an image (how tests hand one over as a file, bytes or a data: URL).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/test_paths.h"
#include "vision/image.h"
#include "vision/vision_test_util.h"

namespace edgevl::test {

inline std::filesystem::path qwen3vl_dir() {
  return fixtures_dir() / "golden" / "qwen3vl";
}

struct Qwen3VlImagePrompt {
  std::string name;
  vision::Image image;
  std::vector<int32_t> prompt_ids, tokens;  // the reference's prompt and 16 greedy ids
  int32_t rope_delta = 0;
  std::string logits;  // the reference's logits of every prompt position ([ids][vocab] .npy)
};

// golden.json's image prompts ("What is this?" after one image) whose image is available.
inline std::vector<Qwen3VlImagePrompt> qwen3vl_image_prompts() {
  const auto g = nlohmann::json::parse(read_text_file(qwen3vl_dir() / "golden.json"));
  std::vector<Qwen3VlImagePrompt> out;
  for (const auto& p : g["image_prompts"]) {
    Qwen3VlImagePrompt q;
    q.name = p["image"];
    std::string src;
    for (const auto& e : g["images"])
      if (e["name"] == q.name) src = e["source"];
    if (src.starts_with("procedural:")) {
      int w = 0, h = 0;
      if (std::sscanf(src.c_str() + 11, "%dx%d", &w, &h) != 2) continue;
      q.image = vision::test::procedural(w, h);
    } else {
      const auto dir = shared_data("images");
      if (dir.empty()) continue;
      q.image = vision::decode_image_file(dir.parent_path() / src.substr(7));
    }
    q.prompt_ids = p["prompt_ids"].get<std::vector<int32_t>>();
    q.tokens = p["tokens"].get<std::vector<int32_t>>();
    q.rope_delta = p["rope_delta"];
    q.logits = p["logits"];
    out.push_back(std::move(q));
  }
  return out;
}

using vision::test::bmp_bytes;

}  // namespace edgevl::test
