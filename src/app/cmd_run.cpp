#include <fnmatch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "runtime/generate.h"
#include "runtime/image_prompt.h"
#include "runtime/prompt.h"
#include "vision/image.h"

namespace edgevl::app {

namespace {

struct RunOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model, prompt, prompt_file, system, dump_dir, dump_filter = "*";
  std::vector<std::string> images;
  int max_tiles = 0;
  double max_pixels_mp = 50;
  int32_t n = 128;
  int threads = 0;
  int32_t ctx = 0;
  bool raw = false, json = false, ignore_eos = false, no_bos = false;
  std::vector<std::string> stops;
  SamplerParams sp;
};

// --dump: every named tensor of every graph execution as DIR/NNNNN-graph-name.npy.
DumpFn make_dumper(const std::string& dir, const std::string& filter) {
  std::filesystem::create_directories(dir);
  auto seq = std::make_shared<int>(0);
  return [=](const std::string& graph, const std::string& value, const float* data, int64_t rows,
             int64_t cols) {
    if (fnmatch(filter.c_str(), value.c_str(), 0) != 0) return;
    const std::string file = fmt::format("{}/{:05d}-{}-{}.npy", dir, (*seq)++, graph, value);
    const int64_t shape[2] = {rows, cols};
    write_npy(file, std::span<const float>(data, size_t(rows * cols)), shape);
  };
}

// --dump for the vision side: the preprocessed tiles and the projector outputs, whole.
void dump_image_tensors(const std::string& dir, const Model& m,
                        const std::vector<vision::Tiles>& tiles, const ImagePrompt& ip) {
  const VisionConfig& v = *m.vision();
  std::vector<float> px;
  for (const auto& t : tiles) px.insert(px.end(), t.pixels.begin(), t.pixels.end());
  const int64_t n = int64_t(ip.tiles), size = v.image_size, d = m.config().hidden;
  const int64_t pshape[4] = {n, 3, size, size};
  write_npy(std::filesystem::path(dir) / "pixel_values.npy", px, pshape);
  std::vector<float> emb;
  emb.reserve(size_t(n * v.tokens_per_tile() * d));
  for (size_t i = 0; i < ip.ids.size(); ++i)
    if (ip.ids[i] == v.img_context_id)
      emb.insert(emb.end(), ip.embeds.begin() + int64_t(i) * d,
                 ip.embeds.begin() + int64_t(i + 1) * d);
  const int64_t eshape[3] = {n, v.tokens_per_tile(), d};
  write_npy(std::filesystem::path(dir) / "vision_embeds.npy", emb, eshape);
}

int run_model(const RunOpts& o) {
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) prompt = read_text_file(o.prompt_file);
  Model model(o.model);
  Session session(model, SessionOptions{o.threads, o.ctx});
  if (!o.dump_dir.empty()) session.engine().set_dump(make_dumper(o.dump_dir, o.dump_filter));

  // Images: decode and tile on the host, then the vision graph per tile inside the prompt.
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  std::vector<vision::Tiles> tiles;
  if (!o.images.empty()) {
    check(model.vision() != nullptr, "{} is a text-only model: it cannot take images (-i)",
          o.model);
    check(!o.raw, "--raw cannot be combined with images: image prompts need the chat template");
    const vision::PreprocessConfig pc = preprocess_config(*model.vision(), o.max_tiles);
    vision::DecodeLimits lim;
    lim.max_pixels = int64_t(o.max_pixels_mp * 1e6);
    for (const auto& path : o.images)
      tiles.push_back(vision::preprocess(vision::decode_image_file(path, lim), pc));
  }
  const double preprocess_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();

  std::vector<int32_t> ids;
  std::vector<float> embeds;
  ImagePrompt ip;
  if (o.raw) {
    ids = encode_raw(model, prompt, !o.no_bos);
  } else {
    std::vector<text::ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", prompt});
    if (model.vision()) {
      // Also checks placeholders vs images and the context before the vision graph runs.
      ip = build_image_prompt(session, msgs, tiles, o.n);
      ids = ip.ids;
    } else {
      ids = encode_chat(model, msgs);
    }
  }
  if (!o.dump_dir.empty() && !tiles.empty()) dump_image_tensors(o.dump_dir, model, tiles, ip);
  GenerateOptions g;
  g.n_predict = o.n;
  g.sampling = o.sp;
  g.stop_strings = o.stops;
  if (!o.raw)
    for (const auto& s : model.chat_template().stop_strings) g.stop_strings.push_back(s);
  g.ignore_eos = o.ignore_eos;
  check_fits_context(session, int64_t(ids.size()), o.n, o.model);

  auto on_text = [&](std::string_view t) {
    if (o.json) return;
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };
  GenerateResult r =
      generate(session, ids, g, on_text, ip.embeds.empty() ? nullptr : ip.embeds.data());
  const double ttft_ms = preprocess_ms + ip.vision_ms + r.prefill_ms;
  const double prefill_tps = r.prefill_ms > 0 ? r.prompt_tokens * 1000.0 / r.prefill_ms : 0;
  const size_t decoded = r.tokens.empty() ? 0 : r.tokens.size() - 1;
  const double decode_tps = r.decode_ms > 0 && decoded > 0 ? decoded * 1000.0 / r.decode_ms : 0;
  if (o.json) {
    nlohmann::json j;
    j["load_ms"] = model.load_ms();
    j["prompt_tokens"] = r.prompt_tokens;
    j["prefill_tok_s"] = prefill_tps;
    j["decode_tok_s"] = decode_tps;
    j["peak_rss_mb"] = peak_rss_mb();
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["stop_reason"] = stop_reason_name(r.stop);
    j["threads"] = session.threads();
    j["images"] = ip.images;
    j["tiles"] = ip.tiles;
    j["image_tokens"] = ip.image_tokens;
    j["preprocess_ms"] = preprocess_ms;
    j["vision_ms_per_tile"] = ip.tiles > 0 ? ip.vision_ms / ip.tiles : 0.0;
    j["ttft_ms"] = ttft_ms;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    if (ip.images > 0)
      std::fprintf(stderr,
                   "\n[%d image(s), %d tile(s), %d image tokens | preprocess %.1f ms | vision %.1f "
                   "ms/tile | time to first token %.1f ms]",
                   ip.images, ip.tiles, ip.image_tokens, preprocess_ms,
                   ip.vision_ms / std::max(1, ip.tiles), ttft_ms);
    std::fprintf(stderr,
                 "\n[load %.1f ms | prompt %d tok, prefill %.1f tok/s | generated %zu tok, decode "
                 "%.1f tok/s | stop: %s | peak RSS %.0f MB | %d threads]\n",
                 model.load_ms(), r.prompt_tokens, prefill_tps, r.tokens.size(), decode_tps,
                 stop_reason_name(r.stop), peak_rss_mb(), session.threads());
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (chat template applied)");
  auto o = std::make_shared<RunOpts>();
  cmd->add_option("-m,--model", o->model, "Model binary (.evb)")->required();
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  auto* pf = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
  p->excludes(pf);
  cmd->add_option("-n,--n-predict", o->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("-i,--image", o->images, "Image file (JPEG, PNG, BMP); repeatable");
  cmd->add_option("--max-tiles", o->max_tiles,
                  "Most 448x448 tiles per image (default: the model's)");
  cmd->add_option("--max-pixels", o->max_pixels_mp, "Largest image accepted, in megapixels")
      ->capture_default_str();
  cmd->add_option("--system", o->system, "System message (default: the template's)");
  cmd->add_flag("--raw", o->raw,
                "No chat template: the prompt as is (BOS if the tokenizer adds one)");
  cmd->add_flag("--no-bos", o->no_bos, "With --raw: never add BOS");
  cmd->add_option("--temp", o->sp.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", o->sp.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", o->sp.top_p, "Top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", o->sp.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sp.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->sp.repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  cmd->add_option("--seed", o->sp.seed, "Sampling seed (0 = random)");
  cmd->add_option("--stop", o->stops, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--ctx", o->ctx, "Context length (at most the compiled one)");
  cmd->add_flag("--json", o->json, "Print one JSON object with the text, ids and timings");
  cmd->add_option("--dump", o->dump_dir, "Write every named tensor of the run as .npy into DIR");
  cmd->add_option("--dump-filter", o->dump_filter, "Only dump tensors whose name matches GLOB");
  add_isa_option(cmd, &o->isa);
  cmd->callback([=] {
    *run = [=] {
      apply_isa(o->isa);
      return run_model(*o);
    };
  });
}

}  // namespace edgevl::app
