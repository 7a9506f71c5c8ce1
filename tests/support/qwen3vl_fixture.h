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

// 24-bit BMP (bottom-up rows, 4-byte aligned).
inline std::vector<uint8_t> bmp_bytes(const vision::Image& img) {
  const uint32_t row = uint32_t(img.width * 3 + 3) & ~3u, size = 54 + row * uint32_t(img.height);
  std::vector<uint8_t> b(size, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int k = 0; k < 4; ++k) b[at + size_t(k)] = uint8_t(v >> (8 * k));
  };
  b[0] = 'B', b[1] = 'M';
  put32(2, size), put32(10, 54), put32(14, 40), put32(18, uint32_t(img.width));
  put32(22, uint32_t(img.height));
  b[26] = 1, b[28] = 24;
  put32(34, row * uint32_t(img.height));
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c)  // BGR
        b[54 + size_t(img.height - 1 - y) * row + size_t(x) * 3 + size_t(2 - c)] =
            img.rgb[(size_t(y) * size_t(img.width) + size_t(x)) * 3 + size_t(c)];
  return b;
}

}  // namespace edgevl::test
