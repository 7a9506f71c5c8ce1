// `edgevl chat`: a multi-turn conversation on stdin/stdout. Each turn feeds only what is new
// to the KV cache; `/image PATH` attaches an image to the next user message.
#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "core/error.h"
#include "runtime/generate.h"
#include "runtime/image_prompt.h"
#include "runtime/prompt.h"
#include "vision/image.h"

namespace edgevl::app {

namespace {

struct ChatOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model, system;
  int32_t n = 512;
  int threads = 0, max_tiles = 0;
  int32_t ctx = 0;
  SamplerParams sp;
};

const char* kHelp =
    "commands: /image PATH (attach to the next message), /reset (new conversation), /quit\n";

int run_chat(const ChatOpts& o) {
  Model model(o.model);
  Session session(model, SessionOptions{o.threads, o.ctx});
  const text::ChatTemplate& tmpl = model.chat_template();
  GenerateOptions g;
  g.n_predict = o.n;
  g.sampling = o.sp;
  g.stop_strings = tmpl.stop_strings;
  std::fprintf(stderr, "edgevl chat: %s (%s, context %d tokens). %s", o.model.c_str(),
               model.vision() ? "vision-language" : "text", session.context(), kHelp);

  std::vector<text::ChatMessage> history;  // for templates re-rendered whole (Llama-2)
  std::vector<int32_t> unfed;              // generated ids not yet in the KV cache
  std::vector<vision::Tiles> images;
  bool first = true;
  std::string line;
  for (;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line == "/quit" || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/help") {
      std::fputs(kHelp, stderr);
      continue;
    }
    if (line == "/reset") {
      session.reset();
      history.clear();
      unfed.clear();
      images.clear();
      first = true;
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    try {
      if (line.rfind("/image ", 0) == 0) {
        check(model.vision() != nullptr, "{} is a text-only model: it cannot take images", o.model);
        const std::string path = line.substr(7);
        images.push_back(vision::preprocess(vision::decode_image_file(path),
                                            preprocess_config(*model.vision(), o.max_tiles)));
        std::fprintf(stderr, "(attached %s: %d tile(s))\n", path.c_str(), images.back().count);
        continue;
      }
      std::string content = line;
      if (!images.empty() && content.find("<image>") == std::string::npos)
        for (size_t i = 0; i < images.size(); ++i) content = "<image>\n" + content;
      std::string rendered;
      if (tmpl.llama2_style) {
        // [INST] turns fold the system message into the first one: re-render everything.
        history.push_back({"user", content});
        session.reset();
        unfed.clear();
        rendered = tmpl.render(history, true);
      } else if (first) {
        std::vector<text::ChatMessage> msgs;
        if (!o.system.empty()) msgs.push_back({"system", o.system});
        msgs.push_back({"user", content});
        rendered = tmpl.render(msgs, true);
      } else {
        // Close the assistant turn, then the new user turn and the generation prompt.
        rendered = tmpl.turn_close + tmpl.turn_open_prefix + "user" + tmpl.turn_open_suffix +
                   content + tmpl.turn_close + tmpl.turn_open_prefix + "assistant" +
                   tmpl.turn_open_suffix;
      }
      if (!unfed.empty()) {
        session.eval_tokens(unfed);
        unfed.clear();
      }
      ImagePrompt p = build_image_prompt_text(session, rendered, images, std::min<int32_t>(o.n, 1),
                                              first || tmpl.llama2_style);
      images.clear();
      first = false;
      const int32_t room = session.context() - session.n_past() - int32_t(p.ids.size());
      g.n_predict = std::min(o.n, room);
      check(g.n_predict > 0, "the conversation is full ({} tokens); /reset to start again",
            session.context());
      const int32_t before = session.n_past();
      GenerateResult r = generate(
          session, p.ids, g,
          [](std::string_view t) {
            std::fwrite(t.data(), 1, t.size(), stdout);
            std::fflush(stdout);
          },
          p.embeds.empty() ? nullptr : p.embeds.data());
      std::printf("\n");
      // Tokens sampled but not yet evaluated go in at the start of the next turn.
      const size_t fed = size_t(session.n_past() - before) - p.ids.size();
      unfed.assign(r.tokens.begin() + long(fed), r.tokens.end());
      if (tmpl.llama2_style) history.push_back({"assistant", r.text});
      std::fprintf(stderr, "[%zu tok, %.1f tok/s]", r.tokens.size(),
                   r.decode_ms > 0 ? double(r.tokens.size()) * 1000.0 / r.decode_ms : 0.0);
    } catch (const Error& e) {
      std::fprintf(stderr, "edgevl: error: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace

void add_chat(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("chat", "Multi-turn conversation (/image PATH attaches images)");
  auto o = std::make_shared<ChatOpts>();
  cmd->add_option("-m,--model", o->model, "Model binary (.evb)")->required();
  cmd->add_option("--system", o->system, "System message (default: the template's)");
  cmd->add_option("-n,--n-predict", o->n, "Most tokens per reply")->capture_default_str();
  cmd->add_option("--temp", o->sp.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", o->sp.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", o->sp.top_p, "Top-p (1 = off)")->capture_default_str();
  cmd->add_option("--seed", o->sp.seed, "Sampling seed (0 = random)");
  cmd->add_option("--max-tiles", o->max_tiles, "Most tiles per image (default: the model's)");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--ctx", o->ctx, "Context length (at most the compiled one)");
  add_isa_option(cmd, &o->isa);
  cmd->callback([=] {
    *run = [=] {
      apply_isa(o->isa);
      return run_chat(*o);
    };
  });
}

}  // namespace edgevl::app
