// `edgevl serve`: options of the OpenAI-compatible server (src/app/server/).
#include "app/commands.h"
#include "app/server/http_server.h"

namespace edgevl::app {

void add_serve(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server (/v1/chat/completions with images, "
      "/v1/completions, /v1/models, /health, /metrics) with a web chat page at /");
  auto o = std::make_shared<server::ServerOptions>();
  auto isa = std::make_shared<std::string>();
  cmd->add_option("-m,--model", o->model, "Model binary (.evb)")->required();
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--port-file", o->port_file, "Write the bound port to this file");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--backend", o->backend,
                  "cpu, or htp (the target compiled into the model) / htp-v73 ... htp-v81: the "
                  "Qualcomm HTP runs the ops it supports, the CPU the rest")
      ->default_str("cpu");
  cmd->add_option("--parallel", o->parallel, "Conversations generating together (slots)")
      ->capture_default_str();
  cmd->add_option("--queue", o->queue, "Requests waiting beyond the slots before 429")
      ->capture_default_str();
  cmd->add_option("--ctx", o->context, "Context per slot (at most the compiled one)");
  cmd->add_option("--max-body", o->max_body, "Largest request body in bytes (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-image-pixels", o->max_image_pixels, "Largest decoded image (pixels)")
      ->capture_default_str();
  cmd->add_option("--max-images", o->max_images, "Images per request")->capture_default_str();
  cmd->add_option("--max-tiles", o->max_tiles, "Most tiles per image (default: the model's)");
  cmd->add_option("--image-cache-mb", o->image_cache_mb,
                  "Features of images seen before, kept for reuse (MB)")
      ->capture_default_str();
  cmd->add_flag("--allow-remote-images", o->allow_remote_images,
                "Fetch http(s) image URLs (default: data: URIs only)");
  cmd->add_option("--timeout", o->timeout_s, "Generation time per request, seconds (0: none)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens,
                  "Most tokens a request generates: a larger max_tokens is refused, and a request "
                  "without one gets this many (0: up to the end of the context)")
      ->capture_default_str();
  cmd->add_option("--cors-origin", o->cors_origin,
                  "Answer cross-origin browser requests from this origin (\"*\": any); by "
                  "default only the page at / (same origin) can call the API from a browser");
  add_isa_option(cmd, isa.get());
  cmd->callback([=] {
    *run = [=] {
      apply_isa(*isa);
      return server::run_server(*o);
    };
  });
}

}  // namespace edgevl::app
