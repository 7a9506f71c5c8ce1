// `edgevl chat`: a multi-turn conversation on stdin/stdout (a Chat, runtime/assistant.h). Each
// turn feeds only what is new to the KV cache; `/image PATH` attaches an image to the next user
// message. Ctrl-C stops a reply (what was generated stays in the conversation); at the prompt it
// ends the chat.
#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "app/generation_options.h"
#include "app/interrupt.h"
#include "core/error.h"
#include "runtime/assistant.h"

namespace edgevl::app {

namespace {

struct ChatOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model, system;
  bool no_think = false;
  int32_t n = 512;
  int threads = 0, max_tiles = 0;
  int32_t ctx = 0;
  std::string backend = "cpu";
  GenerationFlags gen;
};

const char* kHelp =
    "commands: /image PATH, /video PATH (attach to the next message), /reset (new "
    "conversation), /help, /quit; Ctrl-C stops a reply; a line starting with // sends one "
    "starting with /\n";

// "/word ..." that is none of the commands above (a path like "/tmp/x" is a message).
bool unknown_command(const std::string& line) {
  if (line.size() < 2 || line[0] != '/' || line[1] == '/') return false;
  const size_t end = line.find(' ');
  const std::string word = line.substr(1, end == std::string::npos ? std::string::npos : end - 1);
  if (word.find('/') != std::string::npos) return false;
  for (const char* c : {"image", "video", "reset", "help", "quit", "exit"})
    if (word == c) return false;
  return true;
}

int run_chat(const ChatOpts& o) {
  AssistantOptions ao;
  ao.threads = o.threads;
  ao.backend = o.backend;
  ao.images.max_tiles = o.max_tiles;
  ao.images.cache_bytes = 64u << 20;  // an image re-attached later is not encoded again
  Assistant a(o.model, ao);
  Chat chat(a, o.ctx);
  chat.set_system(o.system);
  chat.set_thinking(!o.no_think);
  GenerateOptions g;
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<DraftModel> draft;
  apply_generation_flags(o.gen, a.model(), o.threads, &g, &draft_model, &draft);
  std::fprintf(stderr, "edgevl chat: %s (%s, context %d tokens). %s", o.model.c_str(),
               a.has_vision() ? "vision-language" : "text", chat.context(), kHelp);

  // The whole conversation is rendered every turn; the Chat feeds only what the KV cache does
  // not already hold (for [INST] templates that re-render the first turn too).
  InterruptScope ctrl_c;
  std::string line;
  for (;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line == "/quit" || line == "/exit") break;
    if (line.empty()) continue;
    if (unknown_command(line)) {
      std::fprintf(stderr, "unknown command %s; %s", line.substr(0, line.find(' ')).c_str(), kHelp);
      continue;
    }
    if (line.rfind("//", 0) == 0) line.erase(0, 1);
    if (line == "/help") {
      std::fputs(kHelp, stderr);
      continue;
    }
    if (line == "/reset") {
      chat.reset();
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    try {
      if (line.rfind("/image ", 0) == 0) {
        check(a.has_vision(), "{} is a text-only model: it cannot take images", o.model);
        const std::string path = line.substr(7);
        const ImageRef img = a.image_file(path);
        chat.add_image(img);
        std::fprintf(stderr, "(attached %s: %d tile(s), %d image tokens)\n", path.c_str(),
                     img->tiles, img->tokens);
        continue;
      }
      if (line.rfind("/video ", 0) == 0) {
        check(a.has_vision(), "{} is a text-only model: it cannot take videos", o.model);
        const std::string path = line.substr(7);
        const ImageRef video = a.video_file(path);
        chat.add_image(video);
        std::fprintf(stderr, "(attached %s: %d frame group(s), %d video tokens)\n", path.c_str(),
                     video->groups, video->tokens);
        continue;
      }
      // A failed turn leaves no trace: it joins the history only once answered.
      const Turn t = chat.turn(line);
      g.n_predict = std::min(o.n, t.room);
      check(g.n_predict > 0, "the conversation is full ({} tokens); /reset to start again",
            chat.context());
      InterruptScope::clear();
      const GenerateResult r = chat.reply(t, g, [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return !InterruptScope::interrupted();
      });
      InterruptScope::clear();
      std::printf("\n");
      if (r.stop == StopReason::Cancelled)
        std::fprintf(stderr, "(stopped: the reply so far stays in the conversation)\n");
      const ReplyStats& st = chat.last_stats();
      std::fprintf(stderr, "[%zu tok, %.1f tok/s, %d of %d prompt tokens reused]", r.tokens.size(),
                   r.decode_ms > 0 ? double(r.tokens.size()) * 1000.0 / r.decode_ms : 0.0,
                   st.reused_tokens, st.prompt_tokens);
    } catch (const Error& e) {
      std::fprintf(stderr, "edgevl: error: %s\n", e.what());
    }
  }
  if (InterruptScope::interrupted()) std::fprintf(stderr, "\n");  // Ctrl-C at the prompt
  return 0;
}

}  // namespace

void add_chat(CLI::App& app, Command* run) {
  auto* cmd =
      app.add_subcommand("chat", "Multi-turn conversation (/image PATH, /video PATH attach them)");
  auto o = std::make_shared<ChatOpts>();
  cmd->add_option("-m,--model", o->model, "Model binary (.evb)")->required();
  cmd->add_option("--system", o->system, "System message (default: the template's)");
  cmd->add_flag("--no-think", o->no_think,
                "Replies start with thinking off (the template's closed empty think block)");
  cmd->add_option("-n,--n-predict", o->n, "Most tokens per reply")->capture_default_str();
  add_generation_flags(cmd, &o->gen);
  cmd->add_option("--max-tiles", o->max_tiles, "Most tiles per image (default: the model's)");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--backend", o->backend,
                  "cpu, or htp (the target compiled into the model) / htp-v73 ... htp-v81: the "
                  "Qualcomm HTP runs the ops it supports, the CPU the rest")
      ->default_str("cpu");
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
