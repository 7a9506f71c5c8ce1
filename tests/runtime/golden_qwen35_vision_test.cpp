// Qwen3.5 with images against transformers (tests/fixtures/golden/qwen35vl, made by
// tools/golden/make_qwen35_goldens.py --vision): the vision tower (Qwen3-VL's without
// DeepStack) from the image, the image prompt's logits with the gated attention layer's
// interleaved MRoPE over its partial rotary (head_dim 64, 16 rotated dims, mrope_section
// [4, 2, 2]), greedy ids at cache position + rope_delta, the recurrent state carried through an
// image prompt fed in pieces and through batched decode, and `edgevl run -i` with the template's
// <think> opening (and --no-think). The photo case runs when ../shared/data is there.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "compiler/compile.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "core/temp_dir.h"
#include "format/qwen_vision_config.h"
#include "runtime/chat/qwen_vl_prompt.h"
#include "runtime/decoding/token_loop.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/rope_positions.h"
#include "runtime/execution/session.h"
#include "support/cli_image_run.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"
#include "synth/text_file.h"
#include "vision/image.h"
#include "vision/qwen_vl_preprocess.h"
#include "vision/vision_test_util.h"

namespace edgevl {
namespace {

const std::filesystem::path kDir = test::fixtures_dir() / "golden" / "qwen35vl";

nlohmann::json read_json(const std::string& name) {
  return nlohmann::json::parse(read_text_file(kDir / name));
}

// max|a - b| / max|b|.
double rel_diff(std::span<const float> a, std::span<const float> b) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_ref = std::max(max_ref, double(std::fabs(b[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  return max_diff / max_ref;
}

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// The golden image entry of `name`.
nlohmann::json image_entry(const nlohmann::json& g, const std::string& name) {
  for (const auto& e : g["images"])
    if (e["name"] == name) return e;
  throw Error("no golden image " + name);
}

// The image of a golden entry: procedural ones always, the photo from ../shared/data (empty
// image when the data is absent).
vision::Image golden_image(const nlohmann::json& e) {
  const std::string src = e["source"];
  if (src.starts_with("procedural:")) {
    int w = 0, h = 0;
    check(std::sscanf(src.c_str() + 11, "%dx%d", &w, &h) == 2, "bad source {}", src);
    return vision::test::procedural(w, h);
  }
  const auto dir = test::shared_data("images");
  if (dir.empty()) return {};
  return vision::decode_image_file(dir.parent_path() / src.substr(7));
}

// The binary reads the tower (no DeepStack), the sections over the rotated frequencies and
// the token ids from the top level.
TEST(GoldenQwen35Vision, ConfigReadsTowerAndSections) {
  const Model& m = test::compiled_model(kDir, "f32");
  const LlmConfig& c = m.config();
  const auto cfg = read_json("config.json");
  const QwenVisionShape s = qwen_vision_shape(c);
  EXPECT_EQ(s.depth, 2);
  EXPECT_EQ(s.hidden, 32);
  EXPECT_TRUE(s.deepstack.empty());
  EXPECT_EQ(s.out, c.hidden);
  EXPECT_EQ(c.flags.get_int("mrope_section_h", 0), 2);
  EXPECT_EQ(c.flags.get_int("mrope_section_w", 0), 2);
  EXPECT_EQ(c.flags.get_int("vision.image_token", -1), cfg["image_token_id"].get<int32_t>());
  EXPECT_EQ(c.flags.get_int("vision.start_token", -1), cfg["vision_start_token_id"].get<int32_t>());
  EXPECT_EQ(c.flags.get_int("vision.end_token", -1), cfg["vision_end_token_id"].get<int32_t>());
  Engine engine(m, EngineOptions{2});
  EXPECT_EQ(engine.deepstack_layers(), 0);
  EXPECT_EQ(engine.qwen_max_patches(), 64);  // max_pixels 16384 / 16^2
}

TEST(GoldenQwen35Vision, PositionsMatchGetRopeIndex) {
  const auto g = read_json("golden.json");
  const int32_t image_token = read_json("config.json")["image_token_id"];
  int checked = 0;
  for (const auto& p : g["image_prompts"]) {
    if (!p.contains("positions_thw")) continue;
    const std::vector<int32_t> ids = p["prompt_ids"];
    const MergedGrid grid{p["grid_thw"][1].get<int32_t>() / 2, p["grid_thw"][2].get<int32_t>() / 2};
    const RopePositions r = mrope_positions(ids, image_token, std::span(&grid, 1));
    const std::vector<std::vector<int32_t>> want = p["positions_thw"];  // [axis][token]
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t a = 0; a < 3; ++a) ASSERT_EQ(r.thw[3 * i + a], want[a][i]) << i << " axis " << a;
    EXPECT_EQ(r.rope_delta, p["rope_delta"].get<int32_t>());
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// From the image: edgevl's processor (its pixel values' sums equal the reference's, which the
// golden keeps instead of the pixels), then the tower; the merger's rows against the
// reference's, at f32.
TEST(GoldenQwen35Vision, VisionTowerFromTheImageMatchesReference) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  const vision::QwenVlPreprocessConfig cfg = vision::parse_qwen_vl_preprocessor(
      nlohmann::json::parse(read_text_file(kDir / "preprocessor_config.json")), "fixture");
  const size_t d = size_t(m.config().hidden);
  int ran = 0;
  for (const auto& e : g["images"]) {
    const std::string name = e["name"];
    SCOPED_TRACE(name);
    const vision::Image img = golden_image(e);
    if (img.width == 0) {
      std::printf("[ skipped  ] %s: %s\n", name.c_str(),
                  test::shared_data_missing("images").c_str());
      continue;
    }
    const vision::QwenVlPixels px = vision::preprocess_qwen_vl(img, cfg);
    ASSERT_EQ(px.grid_h, e["grid_thw"][1].get<int32_t>());
    ASSERT_EQ(px.grid_w, e["grid_thw"][2].get<int32_t>());
    ASSERT_EQ(int64_t(px.values.size()),
              e["pixels_shape"][0].get<int64_t>() * e["pixels_shape"][1].get<int64_t>());
    double sum = 0, sumsq = 0;
    for (float v : px.values) sum += v, sumsq += double(v) * v;
    const double ref_sumsq = e["pixels_sumsq"];
    EXPECT_NEAR(sum, e["pixels_sum"].get<double>(), 1e-9 * ref_sumsq);
    EXPECT_NEAR(sumsq, ref_sumsq, 1e-9 * ref_sumsq);
    const size_t tokens = size_t(px.patches() / 4);
    std::vector<float> out(tokens * d);
    engine.encode_qwen_image(px.values.data(), px.grid_h, px.grid_w, out.data());
    const NpyArray ref = read_npy(kDir / e["vision"].get<std::string>());
    ASSERT_EQ(ref.data.size(), out.size());
    const double rel = rel_diff(out, ref.data);
    EXPECT_LE(rel, 1e-5);
    std::printf("[ golden   ] qwen35 vision %s (%dx%d patches): max|diff|/max|ref| = %.3g\n",
                name.c_str(), px.grid_h, px.grid_w, rel);
    ++ran;
  }
  EXPECT_GE(ran, 2);
}

// The tower through the quantized presets' tables (the preset's vision storage; the checkpoint's
// weights are bf16 already, so this is the bf16 kernels' activations) against the reference.
TEST(GoldenQwen35Vision, VisionTowerQuantized) {
  const auto g = read_json("golden.json");
  const auto& e = g["images"][0];  // the procedural 80x144 (4x8 patches)
  const vision::QwenVlPreprocessConfig cfg = vision::parse_qwen_vl_preprocessor(
      nlohmann::json::parse(read_text_file(kDir / "preprocessor_config.json")), "fixture");
  const vision::QwenVlPixels px = vision::preprocess_qwen_vl(golden_image(e), cfg);
  const NpyArray ref = read_npy(kDir / e["vision"].get<std::string>());
  // Measured (AVX-512): 0.0040 of the largest value for bf16 and w8a8 (Qwen3-VL's tower: 0.0036).
  for (const char* quant : {"bf16", "w8a8"}) {
    Engine engine(test::compiled_model(kDir, quant), EngineOptions{2});
    std::vector<float> out(ref.data.size());
    engine.encode_qwen_image(px.values.data(), px.grid_h, px.grid_w, out.data());
    const double rel = rel_diff(out, ref.data);
    std::printf("[ quant    ] qwen35 vision %s: max|diff|/max|ref| = %.3g\n", quant, rel);
    EXPECT_LE(rel, 0.02) << quant;
  }
}

// One image prompt of the golden with the reference's vision rows at its image tokens.
struct ImagePrompt {
  std::string image;
  std::vector<int32_t> ids, expected;
  std::vector<float> rows;
  RopePositions pos;
};

ImagePrompt image_prompt(Engine& engine, const nlohmann::json& p) {
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const size_t d = size_t(engine.model().config().hidden);
  ImagePrompt ip;
  ip.image = p["image"];
  ip.ids = p["prompt_ids"].get<std::vector<int32_t>>();
  ip.expected = p["tokens"].get<std::vector<int32_t>>();
  const size_t n = ip.ids.size();
  const MergedGrid grid{p["grid_thw"][1].get<int32_t>() / 2, p["grid_thw"][2].get<int32_t>() / 2};
  ip.pos = mrope_positions(ip.ids, image_token, std::span(&grid, 1));
  ip.rows.resize(n * d);
  engine.embed(ip.ids, ip.rows.data());
  const NpyArray vis = read_npy(kDir / ("vision_" + ip.image + ".npy"));
  size_t j = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ip.ids[i] != image_token) continue;
    check((j + 1) * d <= vis.data.size(), "more image tokens than vision rows");
    std::copy_n(vis.data.begin() + long(j * d), d, ip.rows.begin() + long(i * d));
    ++j;
  }
  check(j * d == vis.data.size(), "fewer image tokens than vision rows");
  return ip;
}

// The image prompts' logits at every position (image rows: 3D positions through the partial
// MRoPE) and 16 greedy ids; f32 to 1e-4 of the largest logit as the text goldens.
TEST(GoldenQwen35Vision, ImagePromptLogitsAndGreedyMatchReference) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Session s(m, SessionOptions{2, 0});
  ASSERT_TRUE(s.has_recurrent_state());
  int checked = 0;
  for (const auto& p : g["image_prompts"]) {
    if (!p.contains("logits")) continue;
    const ImagePrompt ip = image_prompt(s.engine(), p);
    SCOPED_TRACE(ip.image);
    s.reset();
    s.set_all_logits(true);
    std::span<const float> logits =
        s.eval_multimodal(ip.rows.data(), int64_t(ip.ids.size()), ip.pos.thw.data(), nullptr);
    s.set_all_logits(false);
    EXPECT_EQ(s.rope_delta(), ip.pos.rope_delta);
    const NpyArray ref = read_npy(kDir / p["logits"].get<std::string>());
    ASSERT_EQ(ref.data.size(), s.all_logits().size());
    const double rel = rel_diff(s.all_logits(), ref.data);
    EXPECT_LE(rel, 1e-4);
    std::printf("[ golden   ] qwen35 image prompt %s: max|diff|/max|ref| = %.3g\n",
                ip.image.c_str(), rel);
    std::vector<int32_t> got;
    for (size_t t = 0; t < ip.expected.size(); ++t) {
      got.push_back(argmax(logits));
      logits = s.eval_tokens(std::span(&got.back(), 1));
    }
    EXPECT_EQ(got, ip.expected);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// The same image prompt fed in pieces (text before the image, the image run cut in two, the
// rest) carries the conv and delta states and the rope delta like one pass.
TEST(GoldenQwen35Vision, ImagePromptInPiecesEqualsOnePass) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Session one(m, SessionOptions{2, 0}), parts(m, SessionOptions{2, 0});
  const ImagePrompt ip = image_prompt(one.engine(), g["image_prompts"][0]);
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const auto first_image = std::find(ip.ids.begin(), ip.ids.end(), image_token) - ip.ids.begin();
  const int64_t n = int64_t(ip.ids.size()), d = m.config().hidden;
  one.set_all_logits(true);
  parts.set_all_logits(true);
  one.eval_multimodal(ip.rows.data(), n, ip.pos.thw.data(), nullptr);
  std::vector<float> pieces;
  int64_t at = 0;
  for (int64_t end : {int64_t(first_image), int64_t(first_image) + 3, n}) {
    parts.eval_multimodal(ip.rows.data() + at * d, end - at, ip.pos.thw.data() + 3 * at, nullptr);
    pieces.insert(pieces.end(), parts.all_logits().begin(), parts.all_logits().end());
    at = end;
  }
  EXPECT_EQ(parts.rope_delta(), ip.pos.rope_delta);
  ASSERT_EQ(pieces.size(), one.all_logits().size());
  const double rel = rel_diff(pieces, one.all_logits());
  std::printf("[ state    ] qwen35 image prompt in pieces vs one pass: %.3g\n", rel);
  // Measured 6.8e-6 (AVX-512; the chunkings round differently, and this random model amplifies
  // rounding as the text fixture's does); a state or delta carried wrongly moves them by O(1).
  EXPECT_LE(rel, 5e-5);
  // Decoding on from the pieces: the reference's greedy ids.
  parts.set_all_logits(false);
  std::vector<int32_t> got = {argmax(std::span(pieces).last(size_t(m.config().vocab_size)))};
  while (got.size() < ip.expected.size())
    got.push_back(argmax(parts.eval_tokens(std::span(&got.back(), 1))));
  EXPECT_EQ(got, ip.expected);
}

// Batched decode (each row its own conv / delta state and rope delta): two image prompts with
// different deltas decoded together give the reference's greedy ids.
TEST(GoldenQwen35Vision, BatchedDecodeKeepsEachRopeDelta) {
  TempDir tmp;
  compiler::CompileOptions o;
  o.input = kDir;
  o.output = tmp.path() / "b.evb";
  o.quant = "f32";
  o.context = 256;
  o.decode_batch = 4;
  compiler::compile_model(o);
  const Model m(o.output);
  Engine engine(m, EngineOptions{2});
  ASSERT_GE(engine.max_batch(), 2);
  const auto g = read_json("golden.json");
  const ImagePrompt a = image_prompt(engine, g["image_prompts"][0]);
  const ImagePrompt b = image_prompt(engine, g["image_prompts"][1]);
  ASSERT_NE(a.pos.rope_delta, b.pos.rope_delta);
  ASSERT_NE(a.expected, b.expected);
  Session sa(engine), sb(engine);
  std::vector<int32_t> ta = {argmax(sa.eval_multimodal(a.rows.data(), int64_t(a.ids.size()),
                                                       a.pos.thw.data(), nullptr))},
                       tb = {argmax(sb.eval_multimodal(b.rows.data(), int64_t(b.ids.size()),
                                                       b.pos.thw.data(), nullptr))};
  const size_t vocab = size_t(m.config().vocab_size);
  std::vector<float> logits(2 * vocab);
  Session* seqs[] = {&sa, &sb};
  while (ta.size() < a.expected.size()) {
    const int32_t toks[] = {ta.back(), tb.back()};
    engine.decode_batch(seqs, toks, logits.data());
    ta.push_back(argmax(std::span(logits.data(), vocab)));
    tb.push_back(argmax(std::span(logits.data() + vocab, vocab)));
  }
  EXPECT_EQ(ta, a.expected);
  EXPECT_EQ(tb, b.expected);
}

// The runtime's image-prompt path (what `run -i` uses): the chat template with the image run
// and <think>\n (or the closed block with thinking off), the processor, the tower, the prompt
// ids and greedy ids equal to the reference's.
TEST(GoldenQwen35Vision, ImagePromptFromTheImageFile) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  TempDir tmp;
  int ran = 0;
  for (const auto& p : g["image_prompts"]) {
    const std::string name = p["image"];
    const bool thinking = p["thinking"];
    SCOPED_TRACE(name + (thinking ? "" : " no-think"));
    const nlohmann::json e = image_entry(g, name);
    std::filesystem::path file;
    if (e["source"].get<std::string>().starts_with("procedural:")) {
      file = tmp.path() / (name + ".bmp");
      vision::test::write_bmp(file, golden_image(e));
    } else {
      const auto dir = test::shared_data("images");
      if (dir.empty()) continue;
      file = dir.parent_path() / e["source"].get<std::string>().substr(7);
    }
    Session s(engine);
    const QwenVlTurn turn = qwen_vl_prefill(s, {file}, g["question"], "", thinking);
    EXPECT_EQ(turn.ids, p["prompt_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(turn.images, 1);
    GenerateOptions o;
    o.n_predict = int32_t(p["tokens"].size());
    o.sampling.temperature = 0;
    o.ignore_eos = true;
    const GenerateResult r = generate(s, turn.ids, o, {}, nullptr, int32_t(turn.ids.size()) - 1);
    EXPECT_EQ(r.tokens, p["tokens"].get<std::vector<int32_t>>());
    ++ran;
  }
  EXPECT_GE(ran, 3);
}

// Large images run the rotary's gathered rows through the thread pool (the tiny golden's rows
// are too few to split): the golden checkpoint compiled for 1024x1024 images (4096 patches) and
// a 1024-row prefill chunk, one procedural image through the tower and the image prompt on one
// thread and on two agree (a worker reading its own empty thread_local rows crashed or gave
// garbage here).
TEST(GoldenQwen35Vision, LargeImageSameOnOneAndTwoThreads) {
  TempDir tmp;
  const auto ck = tmp.path() / "ck";
  std::filesystem::copy(kDir, ck);
  auto pre = read_json("preprocessor_config.json");
  pre["size"]["longest_edge"] = 1024 * 1024;
  synth::write_text_file(ck / "preprocessor_config.json", pre.dump(2));
  auto config = read_json("config.json");  // room for the long prompt (plain RoPE limit only)
  config["text_config"]["max_position_embeddings"] = 4096;
  synth::write_text_file(ck / "config.json", config.dump(2));
  compiler::CompileOptions o;
  o.input = ck;
  o.output = tmp.path() / "large.evb";
  o.quant = "f32";
  o.context = 2048;
  o.prefill_chunk = 1024;
  compiler::compile_model(o);
  const Model m(o.output);
  const vision::QwenVlPreprocessConfig cfg =
      vision::parse_qwen_vl_preprocessor(pre, "large preprocessor_config.json");
  const vision::QwenVlPixels px =
      vision::preprocess_qwen_vl(vision::test::procedural(1024, 1024), cfg);
  ASSERT_EQ(px.patches(), 4096);
  const auto g = read_json("golden.json");
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const int32_t start = read_json("config.json")["vision_start_token_id"];
  const int32_t end = read_json("config.json")["vision_end_token_id"];
  const size_t d = size_t(m.config().hidden), tokens = size_t(px.patches() / 4);
  // A prompt of the golden's text around this image's run of pads.
  const std::vector<int32_t> golden_ids = g["image_prompts"][0]["prompt_ids"];
  std::vector<int32_t> ids;
  for (int32_t id : golden_ids) {
    if (id == image_token) continue;
    ids.push_back(id);
    if (id == start) ids.insert(ids.end(), tokens, image_token);
  }
  ASSERT_NE(std::find(ids.begin(), ids.end(), end), ids.end());
  ASSERT_GT(ids.size(), 1024u);  // the image rows fill a whole chunk
  const MergedGrid grid{px.grid_h / 2, px.grid_w / 2};
  const RopePositions pos = mrope_positions(ids, image_token, std::span(&grid, 1));
  std::vector<std::vector<float>> feats, logits;
  for (int threads : {1, 2}) {
    Engine engine(m, EngineOptions{threads});
    feats.emplace_back(tokens * d);
    engine.encode_qwen_image(px.values.data(), px.grid_h, px.grid_w, feats.back().data());
    std::vector<float> rows(ids.size() * d);
    engine.embed(ids, rows.data());
    for (size_t i = 0, j = 0; i < ids.size(); ++i)
      if (ids[i] == image_token)
        std::copy_n(feats.back().begin() + long(j++ * d), d, rows.begin() + long(i * d));
    Session s(engine);
    const auto l = s.eval_multimodal(rows.data(), int64_t(ids.size()), pos.thw.data(), nullptr);
    logits.emplace_back(l.begin(), l.end());
  }
  const double rv = rel_diff(feats[1], feats[0]), rl = rel_diff(logits[1], logits[0]);
  std::printf("[ threads  ] qwen35 4096-patch image, 2 vs 1 thread: tower %.3g, logits %.3g\n", rv,
              rl);
  EXPECT_LE(rv, 1e-5);
  EXPECT_LE(rl, 1e-5);
}

// `edgevl run -m X.evb -i image` with thinking on and off (--no-think).
TEST(GoldenQwen35Vision, CliRunWithImageMatchesReference) {
  const auto g = read_json("golden.json");
  const auto evb = test::compiled_path(kDir, "f32");
  test::compiled_model(kDir, "f32");  // compiles it
  TempDir tmp;
  int ran = 0;
  for (const auto& p : g["image_prompts"]) {
    const std::string name = p["image"];
    const nlohmann::json e = image_entry(g, name);
    if (name != "odd80x144") continue;  // the procedural image, both thinking modes
    const bool thinking = p["thinking"];
    SCOPED_TRACE(thinking ? "think" : "no-think");
    const auto file = tmp.path() / (name + ".bmp");
    vision::test::write_bmp(file, golden_image(e));
    test::expect_cli_image_run(evb, file, g["question"], thinking ? "" : " --no-think", p);
    ++ran;
  }
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace edgevl
