#pragma once
// `edgevl serve`: the OpenAI-compatible HTTP server (chat completions with images, text
// completions, models, health, metrics) and the web chat page, on cpp-httplib.
#include <cstdint>
#include <string>

namespace edgevl::server {

struct ServerOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (printed, and written to port_file)
  std::string port_file;  // tests: the bound port is written here once listening
  int threads = 0;
  std::string backend = "cpu";  // EngineOptions::backend
  int parallel = 1;
  int queue = 16;
  int32_t context = 0;
  size_t max_body = 32u << 20;
  int64_t max_image_pixels = 50'000'000;
  int max_images = 8;
  int max_tiles = 0;
  int64_t image_cache_mb = 256;
  bool allow_remote_images = false;
  double timeout_s = 600;  // generation time per request
  // Cap on a request's max_tokens, and its value when the request has none (0: no cap, up to
  // the end of the context).
  int32_t max_tokens = 0;
  std::string cors_origin;  // Access-Control-Allow-Origin for this origin ("*": any); "": none
};

// Listens until SIGINT / SIGTERM; returns the process exit code.
int run_server(const ServerOptions& o);

}  // namespace edgevl::server
