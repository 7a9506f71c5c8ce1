#include "app/bench_image.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/clock.h"
#include "core/error.h"
#include "runtime/chat/conversation.h"
#include "runtime/decoding/generate.h"
#include "runtime/execution/model_cost.h"
#include "runtime/execution/vision_encoder.h"

namespace edgevl::app {

namespace {

// The ttft question: the words of an ordinary request, cut to at most `max_tokens` tokens in
// this model's tokenizer (a synthetic checkpoint's small vocabulary splits English into many
// more tokens than a real one does).
std::string question_of_tokens(const text::Tokenizer& tok, size_t max_tokens) {
  const std::string full =
      "Please look carefully at this picture and describe in two short sentences what the main "
      "object is, what colour it has, where it is placed, and what is behind it in the scene.";
  std::string q;
  size_t pos = 0;
  while (pos < full.size()) {
    const size_t next = std::min(full.find(' ', pos + 1), full.size());
    const std::string longer = full.substr(0, next);
    if (tok.encode(longer).size() > max_tokens) break;
    q = longer;
    pos = next;
  }
  return q.empty() ? full.substr(0, full.find(' ')) : q;
}

// Time to first token of `make_image()` (called afresh each repetition, untimed: a prepared
// image carries its features once encoded) and a ~30-token question: prompt building with the
// vision tower, LLM prefill, one generated token.
void bench_ttft(Session& session, VisionEncoder& encoder, const ImageBenchOpts& o,
                const std::string& name, const std::function<ImageRef()>& make_image,
                nlohmann::json& tests, std::vector<BenchRow>& rows) {
  const Model& model = session.model();
  o.progress(name);
  const std::string question = question_of_tokens(model.tokenizer(), 30);
  GenerateOptions g;
  g.n_predict = 1;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  std::vector<double> tt;
  int32_t prompt_tokens = 0;
  Profiler* prof = o.profiler_for(name);
  Conversation conv(session, &encoder);
  for (int r = 0; r <= o.reps; ++r) {
    ImageRef img = make_image();
    session.engine().set_profiler(r > 0 ? prof : nullptr);
    const auto t0 = Clock::now();
    const Prompt p = build_chat_prompt(model, {{"user", question, {img}}});
    conv.reset();
    conv.run(p, g);
    if (r > 0) tt.push_back(ms_since(t0));
    prompt_tokens = int32_t(p.ids.size());
  }
  session.engine().set_profiler(nullptr);
  const BenchStats st = bench_stats(tt);
  const size_t q_tokens = model.tokenizer().encode(question).size();
  tests.push_back({{"name", name},
                   {"ms", st.mean},
                   {"sd", st.sd},
                   {"prompt_tokens", prompt_tokens},
                   {"question_tokens", int64_t(q_tokens)},
                   {"samples", tt}});
  rows.push_back({name, fmt::format("{:.1f} ± {:.1f} ms", st.mean, st.sd),
                  fmt::format("{} prompt tokens ({} question)", prompt_tokens, q_tokens)});
}

void bench_internvl(Session& session, const ImageBenchOpts& o, std::mt19937_64& rng,
                    nlohmann::json& tests, std::vector<BenchRow>& rows) {
  const Model& model = session.model();
  const VisionConfig& v = *model.vision();
  const ModelCost cost(model);
  o.progress("vision");
  vision::Tiles tiles;
  tiles.count = 1;
  tiles.grid = vision::TileGrid{1, 1};
  tiles.has_thumbnail = false;
  tiles.pixels.resize(size_t(3 * int64_t(v.image_size) * v.image_size));
  std::normal_distribution<float> nd(0.f, 1.f);  // normalised pixels are roughly N(0, 1)
  for (auto& p : tiles.pixels) p = std::clamp(nd(rng), -2.2f, 2.7f);
  std::vector<float> out(size_t(v.tokens_per_tile()) * size_t(model.config().hidden));
  std::vector<double> ms;
  Profiler* prof = o.profiler_for("vision");
  for (int r = 0; r <= o.reps; ++r) {
    session.engine().set_profiler(r > 0 ? prof : nullptr);
    const auto t0 = Clock::now();
    session.engine().encode_tile(tiles.pixels.data(), out.data());
    if (r > 0) ms.push_back(ms_since(t0));
  }
  session.engine().set_profiler(nullptr);
  const BenchStats s = bench_stats(ms);
  const double gflop_s = cost.vision_flops() / (s.mean / 1000.0) / 1e9;
  tests.push_back({{"name", "vision"},
                   {"ms_per_tile", s.mean},
                   {"sd", s.sd},
                   {"gflop_s", gflop_s},
                   {"samples", ms}});
  rows.push_back({"vision", fmt::format("{:.1f} ± {:.1f} ms/tile", s.mean, s.sd),
                  fmt::format("{:.1f} GFLOP/s", gflop_s)});
  VisionEncoder encoder(session.engine());
  bench_ttft(
      session, encoder, o, "ttft", [&] { return encoder.prepare_tiles(tiles); }, tests, rows);
}

void bench_qwen_vl(Session& session, const ImageBenchOpts& o, std::mt19937_64& rng,
                   nlohmann::json& tests, std::vector<BenchRow>& rows) {
  const ModelCost cost(session.model());
  VisionEncoder encoder(session.engine());  // no feature cache: every image is encoded
  auto random_image = [&](int w, int h) {
    std::vector<uint8_t> rgb(size_t(w) * size_t(h) * 3);
    std::uniform_int_distribution<int> d(0, 255);
    for (auto& b : rgb) b = uint8_t(d(rng));
    return encoder.prepare_rgb(w, h, rgb);
  };
  check(!o.sizes.empty(), "--image-size: give at least one W x H");
  for (const auto& [w, h] : o.sizes) {
    const std::string name = fmt::format("vision@{}x{}", w, h);
    o.progress(name);
    std::vector<double> ms, pre_ms;
    int64_t patches = 0, tokens = 0;
    Profiler* prof = o.profiler_for(name);
    for (int r = 0; r <= o.reps; ++r) {
      ImageRef img = random_image(w, h);
      patches = img->pixels.shape.empty() ? 0 : img->pixels.shape[0];
      tokens = img->tokens;
      session.engine().set_profiler(r > 0 ? prof : nullptr);
      const auto t0 = Clock::now();
      encoder.features(*img);
      if (r > 0) ms.push_back(ms_since(t0)), pre_ms.push_back(img->preprocess_ms);
    }
    session.engine().set_profiler(nullptr);
    const BenchStats s = bench_stats(ms), p = bench_stats(pre_ms);
    const double gflop_s = cost.qwen_vision_flops(patches) / (s.mean / 1000.0) / 1e9;
    tests.push_back({{"name", name},
                     {"width", w},
                     {"height", h},
                     {"patches", patches},
                     {"image_tokens", tokens},
                     {"ms_per_image", s.mean},
                     {"sd", s.sd},
                     {"preprocess_ms", p.mean},
                     {"gflop", cost.qwen_vision_flops(patches) / 1e9},
                     {"gflop_s", gflop_s},
                     {"samples", ms}});
    rows.push_back({name, fmt::format("{:.1f} ± {:.1f} ms/image", s.mean, s.sd),
                    fmt::format("{:.1f} GFLOP/s, {} patches, +{:.1f} ms preprocess", gflop_s,
                                patches, p.mean)});
  }
  const auto [w, h] = o.sizes.front();
  bench_ttft(
      session, encoder, o, fmt::format("ttft@{}x{}", w, h),
      [&, w = w, h = h] { return random_image(w, h); }, tests, rows);
}

}  // namespace

BenchStats bench_stats(const std::vector<double>& v) {
  BenchStats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    double acc = 0;
    for (double x : v) acc += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(acc / double(v.size() - 1));
  }
  return s;
}

std::pair<int, int> parse_image_size(const std::string& s) {
  int w = 0, h = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%dx%d%c", &w, &h, &tail) != 2) w = h = 0;
  check(w > 0 && h > 0 && w <= 16384 && h <= 16384,
        "--image-size {}: expected WIDTHxHEIGHT, e.g. 448x448 (each 1 to 16384)", s);
  return {w, h};
}

void bench_images(Session& session, const ImageBenchOpts& o, std::mt19937_64& rng,
                  nlohmann::json& tests, std::vector<BenchRow>& rows) {
  if (session.model().find_graph("qwen_vision"))
    bench_qwen_vl(session, o, rng, tests, rows);
  else
    bench_internvl(session, o, rng, tests, rows);
}

}  // namespace edgevl::app
