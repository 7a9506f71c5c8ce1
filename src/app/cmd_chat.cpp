// `edgevl chat`: a multi-turn conversation on stdin/stdout. Each turn feeds only what is new
// to the KV cache (runtime/chat/conversation.h); `/image PATH` attaches an image to the next user
// message.
#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "app/generation_options.h"
#include "core/error.h"
#include "runtime/chat/conversation.h"

namespace edgevl::app {

namespace {

struct ChatOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model, system;
  int32_t n = 512;
  int threads = 0, max_tiles = 0;
  int32_t ctx = 0;
  GenerationFlags gen;
};

const char* kHelp =
    "commands: /image PATH (attach to the next message), /reset (new conversation), /quit\n";

int run_chat(const ChatOpts& o) {
  Model model(o.model);
  Engine engine(model, EngineOptions{o.threads});
  Session session(engine, SessionOptions{0, o.ctx});
  std::unique_ptr<VisionEncoder> vision;
  if (model.vision()) {
    ImageOptions io;
    io.max_tiles = o.max_tiles;
    io.cache_bytes = 64u << 20;  // an image re-attached later is not encoded again
    vision = std::make_unique<VisionEncoder>(engine, io);
  }
  Conversation conv(session, vision.get());
  GenerateOptions g;
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<DraftModel> draft;
  apply_generation_flags(o.gen, model, o.threads, &g, &draft_model, &draft);
  std::fprintf(stderr, "edgevl chat: %s (%s, context %d tokens). %s", o.model.c_str(),
               model.vision() ? "vision-language" : "text", session.context(), kHelp);

  // The whole conversation is rendered every turn; the Conversation feeds only what the KV
  // cache does not already hold (for [INST] templates that re-render the first turn too).
  std::vector<Message> history;
  if (!o.system.empty()) history.push_back({"system", o.system, {}});
  const size_t base = history.size();
  std::vector<ImageRef> images;
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
      conv.reset();
      history.resize(base);
      images.clear();
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    try {
      if (line.rfind("/image ", 0) == 0) {
        check(vision != nullptr, "{} is a text-only model: it cannot take images", o.model);
        const std::string path = line.substr(7);
        images.push_back(vision->prepare_file(path));
        std::fprintf(stderr, "(attached %s: %d tile(s))\n", path.c_str(), images.back()->tiles);
        continue;
      }
      // The turn joins the history only once it is answered: a failed turn leaves no trace.
      std::vector<Message> next = history;
      next.push_back({"user", line, images});
      const Prompt p = build_chat_prompt(model, next);
      g.n_predict = std::min(o.n, session.context() - int32_t(p.ids.size()));
      check(g.n_predict > 0, "the conversation is full ({} tokens); /reset to start again",
            session.context());
      GenerateOptions turn = g;
      for (const auto& s : model.chat_template().stop_strings) turn.stop_strings.push_back(s);
      const GenerateResult r = conv.run(p, turn, [](std::string_view t) {
        std::fwrite(t.data(), 1, t.size(), stdout);
        std::fflush(stdout);
      });
      images.clear();
      history = std::move(next);
      std::printf("\n");
      history.push_back({"assistant", r.text, {}});
      std::fprintf(stderr, "[%zu tok, %.1f tok/s, %d of %d prompt tokens reused]", r.tokens.size(),
                   r.decode_ms > 0 ? double(r.tokens.size()) * 1000.0 / r.decode_ms : 0.0,
                   r.reused_tokens, r.prompt_tokens);
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
  add_generation_flags(cmd, &o->gen);
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
