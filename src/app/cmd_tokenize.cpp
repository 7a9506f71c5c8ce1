#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "compiler/tokenizer_import.h"
#include "core/error.h"
#include "runtime/execution/model.h"

namespace edgevl::app {

void add_tokenize(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("tokenize", "Show the token ids of a text");
  struct Opts {
    std::string model, tokenizer_dir, text;
    bool no_bos = false, json = false, no_special = false;
  };
  auto o = std::make_shared<Opts>();
  auto* m = cmd->add_option("-m,--model", o->model, "Model binary (.evb)");
  auto* t = cmd->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (hub files)");
  m->excludes(t);
  cmd->add_option("text", o->text, "Text to encode")->required();
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS even when the tokenizer adds one");
  cmd->add_flag("--no-special", o->no_special, "Treat special-token strings as plain text");
  cmd->add_flag("--json", o->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  cmd->callback([=] {
    *run = [=] {
      check(!o->model.empty() || !o->tokenizer_dir.empty(), "give -m MODEL.evb or --tokenizer DIR");
      std::unique_ptr<Model> model;
      std::unique_ptr<text::Tokenizer> own;
      const text::Tokenizer* tok;
      if (!o->model.empty()) {
        model = std::make_unique<Model>(o->model);
        tok = &model->tokenizer();
      } else {
        own = std::make_unique<text::Tokenizer>(compiler::load_tokenizer_dir(o->tokenizer_dir));
        tok = own.get();
      }
      std::vector<int32_t> ids;
      if (tok->add_bos() && !o->no_bos && tok->bos_id() >= 0) ids.push_back(tok->bos_id());
      for (int32_t id : tok->encode(o->text, !o->no_special)) ids.push_back(id);
      if (o->json) {
        nlohmann::json j;
        j["ids"] = ids;
        j["pieces"] = nlohmann::json::array();
        for (int32_t id : ids) j["pieces"].push_back(tok->piece(id));
        std::printf("%s\n",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      } else {
        for (int32_t id : ids) std::printf("%6d  %s\n", id, tok->piece(id).c_str());
        std::printf("%zu tokens\n", ids.size());
      }
      return 0;
    };
  });
}

}  // namespace edgevl::app
