#include <fnmatch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/commands.h"
#include "app/generation_options.h"
#include "app/interrupt.h"
#include "core/error.h"
#include "core/npy.h"
#include "runtime/assistant.h"
#include "runtime/decoding/token_loop.h"
#include "runtime/execution/htp_delegate.h"

namespace edgevl::app {

namespace {

struct RunOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model, prompt, prompt_file, system, dump_dir, dump_filter = "*";
  bool prompt_given = false;  // -p (even empty) or -f
  bool no_think = false;
  std::vector<std::string> images;
  std::vector<std::string> videos;
  int max_tiles = 0;
  double max_pixels_mp = 50;
  int32_t n = 128;
  int threads = 0;
  std::string backend = "cpu";
  int32_t ctx = 0;
  bool raw = false, json = false, ignore_eos = false, no_bos = false;
  GenerationFlags gen;
  // Beam search (runtime/decoding/beam_search.h): off at 1 beam (the sampler's path).
  int32_t beams = 1;
  float length_penalty = 1.0f;
  std::string early_stopping = "false";
};

// --beams N: transformers-style beam search over the prompt's tokens; prints the best
// hypothesis (its EOS left out of the text) and the search's timings.
int run_beams(const RunOpts& o, Assistant& a, Chat& chat, const Turn& t) {
  check(o.gen.lookup == 0 && o.gen.draft.empty(),
        "--beams cannot be combined with speculative decoding (--lookup / --draft)");
  check(!o.gen.constrained(),
        "--beams cannot be combined with constrained output (--json-schema / --json-object / "
        "--grammar)");
  const Prompt& p = t.prompt;
  BeamOptions b;
  b.num_beams = o.beams;
  b.max_new_tokens = o.n;
  b.length_penalty = o.length_penalty;
  b.early_stopping = parse_early_stopping(o.early_stopping);
  b.context = o.ctx;
  if (o.ignore_eos) b.eos_ids = {-1};  // no id matches: every beam runs to -n
  BeamResult r;
  const BeamReply reply = chat.beam_reply(t, b, &r);
  const BeamHypothesis& best = r.hypotheses.front();
  const std::vector<int32_t>& toks = reply.tokens;
  const bool eos = reply.stopped;
  const std::string& text = reply.text;
  const int32_t decode_steps = std::max(0, r.steps - 1);
  const double tps = r.decode_ms > 0 ? decode_steps * o.beams * 1000.0 / r.decode_ms : 0;
  Engine& engine = a.engine();
  if (o.json) {
    nlohmann::json j;
    j["text"] = text;
    j["tokens"] = toks;
    j["score"] = best.score;
    j["stop_reason"] = eos ? "stop_token" : "length";
    j["beams"] = o.beams;
    j["length_penalty"] = o.length_penalty;
    j["early_stopping"] = o.early_stopping;
    j["prompt_tokens"] = p.ids.size();
    j["steps"] = r.steps;
    j["prefill_ms"] = r.prefill_ms;
    j["decode_ms"] = r.decode_ms;
    j["select_ms"] = r.select_ms;
    j["reorder_ms"] = r.reorder_ms;
    j["rows_copied"] = r.rows_copied;
    j["decode_tok_s"] = tps;  // all beams' tokens
    j["threads"] = engine.threads();
    nlohmann::json hyps = nlohmann::json::array();
    for (const auto& h : r.hypotheses) hyps.push_back({{"tokens", h.tokens}, {"score", h.score}});
    j["hypotheses"] = hyps;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s\n", text.c_str());
    std::fprintf(
        stderr,
        "\n[beams %d | prompt %zu tok | %d steps, decode %.1f tok/s (all beams) | "
        "select %.2f ms, reorder %.2f ms (%lld KV rows copied) | score %.5f | %d threads]\n",
        o.beams, p.ids.size(), r.steps, tps, r.select_ms, r.reorder_ms, (long long)r.rows_copied,
        double(best.score), engine.threads());
  }
  return 0;
}

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

// --dump for the vision side: the processor's pixels and the vision features, whole (and each
// image's DeepStack rows where the tower makes them). The pixels of all images stack along the
// first axis (InternVL: tiles; Qwen-VL: patches, a video's groups one after another); the
// features are [images or tiles][tokens each][hidden] when every tile (a video's group) or
// image has the same count, else [tokens][hidden].
void dump_image_tensors(const std::string& dir, const Model& m, VisionEncoder& enc,
                        const Prompt& p) {
  std::vector<float> px, emb;
  std::vector<int64_t> pshape;
  int64_t per = -1;  // tokens per tile, while every tile has the same
  int64_t units = 0, tokens = 0;
  const int64_t d = m.config().hidden;
  size_t i = 0;  // image (or video) index
  for (const Prompt::ImageRun& run : p.images) {
    if (run.offset != 0) continue;  // a video's later groups: the same item
    PreparedImage& img = *run.image;
    const auto& t = img.pixels;
    check(!t.shape.empty() && (pshape.empty() || std::equal(t.shape.begin() + 1, t.shape.end(),
                                                            pshape.begin() + 1, pshape.end())),
          "--dump: the images' pixels do not stack");
    if (pshape.empty())
      pshape = t.shape;
    else
      pshape[0] += t.shape[0];
    px.insert(px.end(), t.pixels.begin(), t.pixels.end());
    const auto f = enc.features(img);
    emb.insert(emb.end(), f->begin(), f->end());
    const int64_t each = img.tokens / std::max(1, img.tiles);
    per = (per < 0 || per == each) && each * img.tiles == img.tokens ? each : 0;
    units += img.tiles;
    tokens += img.tokens;
    if (img.deepstack) {
      const int64_t k = int64_t(img.deepstack->size()) / (int64_t(img.tokens) * d);
      const int64_t dshape[3] = {k, img.tokens, d};
      write_npy(std::filesystem::path(dir) / fmt::format("deepstack_embeds_{}.npy", i),
                *img.deepstack, dshape);
    }
    ++i;
  }
  write_npy(std::filesystem::path(dir) / "pixel_values.npy", px, pshape);
  if (per > 0) {
    const int64_t eshape[3] = {units, per, d};
    write_npy(std::filesystem::path(dir) / "vision_embeds.npy", emb, eshape);
  } else {
    const int64_t eshape[2] = {tokens, d};
    write_npy(std::filesystem::path(dir) / "vision_embeds.npy", emb, eshape);
  }
}

struct HtpSummary {
  int ops = 0, htp_ops = 0, graphs = 0;
  std::string cpu;  // op kinds left on the CPU
};
HtpSummary htp_summary(const HtpBackend& h) {
  HtpSummary s;
  for (const HtpGraphReport& gr : h.report()) {
    s.ops += gr.ops, s.htp_ops += gr.htp_ops, s.graphs += gr.segments;
    for (const std::string& k : gr.cpu_ops)
      if (s.cpu.find(k) == std::string::npos) s.cpu += (s.cpu.empty() ? "" : ", ") + k;
  }
  if (s.cpu.empty()) s.cpu = "none";
  return s;
}

int run_model(const RunOpts& o) {
  check(o.prompt_given,
        "run needs a prompt: -p TEXT or -f FILE (-p '' generates from an empty prompt)");
  // From the start: a Ctrl-C while loading or encoding images ends the generation at its first
  // token, and the summary still prints (a second Ctrl-C leaves at once).
  std::optional<InterruptScope> ctrl_c(std::in_place);
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) prompt = read_text_file(o.prompt_file);
  AssistantOptions ao;
  ao.threads = o.threads;
  ao.backend = o.backend;
  ao.images.max_pixels = int64_t(o.max_pixels_mp * 1e6);
  ao.images.max_tiles = o.max_tiles;
  ao.images.keep_pixels = !o.dump_dir.empty();
  Assistant a(o.model, ao);
  const Model& model = a.model();
  Chat chat(a, o.ctx);
  if (!o.dump_dir.empty()) a.engine().set_dump(make_dumper(o.dump_dir, o.dump_filter));
  if (!o.images.empty()) {
    check(a.has_vision(), "{} is a text-only model: it cannot take images (-i)", o.model);
    check(!o.raw, "--raw cannot be combined with images: image prompts need the chat template");
    for (const auto& path : o.images) chat.add_image(a.image_file(path));
  }
  if (!o.videos.empty()) {
    check(a.has_vision(), "{} is a text-only model: it cannot take videos (-v)", o.model);
    check(!o.raw, "--raw cannot be combined with videos: video prompts need the chat template");
    for (const auto& path : o.videos) chat.add_image(a.video_file(path));
  }
  chat.set_system(o.system);
  chat.set_thinking(!o.no_think);
  // Placeholders, <IMG_CONTEXT> counts and the context are all checked before a graph runs.
  Turn t;
  if (o.raw)
    t.prompt = a.raw_prompt(prompt, !o.no_bos);
  else
    t = chat.turn(prompt);
  const Prompt& p = t.prompt;
  check_fits_context(chat.session(), int64_t(p.ids.size()), o.n, o.model);
  if (!o.dump_dir.empty() && a.vision()) dump_image_tensors(o.dump_dir, model, *a.vision(), p);
  if (o.beams > 1) {
    ctrl_c.reset();  // a beam search has no step to stop at: Ctrl-C ends the process
    return run_beams(o, a, chat, t);
  }

  GenerateOptions g;
  g.n_predict = o.n;
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<DraftModel> draft;
  apply_generation_flags(o.gen, model, o.threads, &g, &draft_model, &draft);
  g.ignore_eos = o.ignore_eos;  // (reply() adds the template's stop strings)

  auto on_text = [&](std::string_view text) {
    if (!o.json) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    return !InterruptScope::interrupted();
  };
  GenerateResult r = o.raw ? chat.complete(p, g, on_text) : chat.reply(t, g, on_text);
  // The only way to cancel a run is Ctrl-C: say so.
  const char* stop = r.stop == StopReason::Cancelled ? "interrupted" : stop_reason_name(r.stop);
  const ReplyStats& ts = chat.last_stats();
  const double preprocess_ms = ts.preprocess_ms, ttft_ms = ts.ttft_ms;
  const double prefill_tps = ts.prefill_tokens_per_s(), decode_tps = ts.decode_tokens_per_s();
  if (o.json) {
    nlohmann::json j;
    j["load_ms"] = model.load_ms();
    j["prompt_tokens"] = r.prompt_tokens;
    j["prefill_tok_s"] = prefill_tps;
    j["decode_tok_s"] = decode_tps;
    j["peak_rss_mb"] = peak_rss_mb();
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["stop_reason"] = stop;
    j["threads"] = a.engine().threads();
    if (const HtpBackend* h = a.engine().htp()) {
      const HtpSummary hs = htp_summary(*h);
      j["htp"] = {{"target", h->target()},     {"from_binary", h->from_binary()},
                  {"load_ms", h->load_ms()},   {"ops", hs.ops},
                  {"htp_ops", hs.htp_ops},     {"graphs", hs.graphs},
                  {"executes", h->executes()}, {"accel_cycles", h->accel_cycles()}};
    }
    j["images"] = ts.images;
    j["tiles"] = ts.tiles;
    j["image_tokens"] = ts.image_tokens;
    j["preprocess_ms"] = preprocess_ms;
    j["vision_ms_per_tile"] = ts.tiles > 0 ? ts.vision_ms / ts.tiles : 0.0;
    j["ttft_ms"] = ttft_ms;
    if (g.constraint) {
      const auto st = g.constraint->stats();
      j["constraint_ms"] = r.constraint_ms;
      j["constraint_ms_per_token"] =
          r.constraint_steps > 0 ? r.constraint_ms / r.constraint_steps : 0.0;
      j["constraint_dfa_states"] = st.dfa_states;
      j["constraint_cached_states"] = st.cached_states;
      j["constraint_cache_mb"] = double(st.cache_bytes) / (1 << 20);
      j["constraint_tables_ms"] = st.tables_ms;  // of constraint_ms: first visits of states
    }
    if (g.speculative.enabled()) {
      j["spec_passes"] = r.spec_passes;
      j["spec_drafted"] = r.spec_drafted;
      j["spec_accepted"] = r.spec_accepted;
      j["spec_acceptance"] = r.spec_drafted > 0 ? double(r.spec_accepted) / r.spec_drafted : 0.0;
      j["spec_replays"] = r.spec_replays;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    if (ts.images > 0)
      std::fprintf(stderr,
                   "\n[%d image(s), %d tile(s), %d image tokens | preprocess %.1f ms | vision %.1f "
                   "ms/tile | time to first token %.1f ms]",
                   ts.images, ts.tiles, ts.image_tokens, preprocess_ms,
                   ts.vision_ms / std::max(1, ts.tiles), ttft_ms);
    std::fprintf(stderr,
                 "\n[load %.1f ms | prompt %d tok, prefill %.1f tok/s | generated %zu tok, decode "
                 "%.1f tok/s | stop: %s | peak RSS %.0f MB | %d threads]\n",
                 model.load_ms(), r.prompt_tokens, prefill_tps, r.tokens.size(), decode_tps, stop,
                 peak_rss_mb(), a.engine().threads());
    if (const HtpBackend* h = a.engine().htp()) {
      const HtpSummary hs = htp_summary(*h);
      std::fprintf(stderr,
                   "[%s (%s, %.1f ms): %d of %d ops in %d HTP graphs, CPU: %s | %llu HTP "
                   "executes, %llu simulated accelerator cycles]\n",
                   h->target().c_str(), h->from_binary() ? "context binary" : "built at load",
                   h->load_ms(), hs.htp_ops, hs.ops, hs.graphs, hs.cpu.c_str(),
                   (unsigned long long)h->executes(), (unsigned long long)h->accel_cycles());
    }
    if (g.constraint)
      std::fprintf(stderr, "[constraint: %d DFA states, %d token tables, %.2f ms/token masking]\n",
                   g.constraint->stats().dfa_states, g.constraint->stats().cached_states,
                   r.constraint_steps > 0 ? r.constraint_ms / r.constraint_steps : 0.0);
    if (g.speculative.enabled())
      std::fprintf(
          stderr,
          "[speculative: %d passes, %d drafted, %d accepted (%.1f%%), %.2f tokens per "
          "pass%s]\n",
          r.spec_passes, r.spec_drafted, r.spec_accepted,
          r.spec_drafted > 0 ? 100.0 * r.spec_accepted / r.spec_drafted : 0.0,
          r.spec_passes > 0 ? double(r.tokens.size() - 1) / r.spec_passes : 0.0,
          r.spec_replays > 0
              ? fmt::format(", {} passes' kept rows run again (recurrent state)", r.spec_replays)
                    .c_str()
              : "");
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
  cmd->add_option("-v,--video", o->videos,
                  "Video file (any container and codec FFmpeg decodes; Qwen3-VL / Qwen3.5); "
                  "frames sampled as the model's video processor does; repeatable");
  cmd->add_option("--max-tiles", o->max_tiles,
                  "Most 448x448 tiles per image (default: the model's)");
  cmd->add_option("--max-pixels", o->max_pixels_mp, "Largest image accepted, in megapixels")
      ->capture_default_str();
  cmd->add_option("--system", o->system, "System message (default: the template's)");
  cmd->add_flag("--no-think", o->no_think,
                "Replies start with thinking off (the template's closed empty think block)");
  cmd->add_flag("--raw", o->raw,
                "No chat template: the prompt as is (BOS if the tokenizer adds one)");
  cmd->add_flag("--no-bos", o->no_bos, "With --raw: never add BOS");
  add_generation_flags(cmd, &o->gen);
  cmd->add_option("--beams", o->beams,
                  "Beam search with N beams, batched through one decode pass per step (1 = off); "
                  "deterministic: the sampling flags do not apply")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--length-penalty", o->length_penalty,
                  "Beam search: a finished beam scores sum(logprobs) / length^F")
      ->capture_default_str();
  cmd->add_option("--early-stopping", o->early_stopping,
                  "Beam search: true (stop once N beams finished), false (stop when no running "
                  "beam can win at its current length), never (... at -n when F > 0); the flag "
                  "alone means true")
      ->expected(0, 1)
      // CLI11 gives an option without a value its default string: that is the bare flag's
      // meaning (true); when absent the variable keeps false.
      ->default_str("true")
      ->option_text("[MODE=false]")
      ->check(CLI::IsMember({"true", "false", "never"}));
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--backend", o->backend,
                  "cpu, or htp (the target compiled into the model) / htp-v73 ... htp-v81: the "
                  "Qualcomm HTP (its simulator on x86) runs the ops it supports, the CPU the rest")
      ->default_str("cpu");
  cmd->add_option("--ctx", o->ctx, "Context length (at most the compiled one)");
  cmd->add_flag("--json", o->json, "Print one JSON object with the text, ids and timings");
  cmd->add_option("--dump", o->dump_dir, "Write every named tensor of the run as .npy into DIR");
  cmd->add_option("--dump-filter", o->dump_filter, "Only dump tensors whose name matches GLOB");
  add_isa_option(cmd, &o->isa);
  cmd->callback([=] {
    o->prompt_given = p->count() + pf->count() > 0;
    *run = [=] {
      apply_isa(o->isa);
      return run_model(*o);
    };
  });
}

}  // namespace edgevl::app
