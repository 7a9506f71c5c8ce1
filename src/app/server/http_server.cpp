#include "app/server/http_server.h"

#include <httplib.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "app/server/openai_response.h"
#include "app/server/scheduler.h"
#include "core/error.h"
#include "runtime/assistant.h"
#include "runtime/constraints/json_schema_reader.h"

namespace edgevl::server {

namespace {

using nlohmann::json;

// Set by SIGINT / SIGTERM (the handler does nothing else): request threads cancel their jobs
// at the next token, streams end with finish_reason "cancelled" and [DONE], then run() stops
// the listener (httplib stops feeding a stream once its listener is closed).
std::atomic<bool> g_stopping{false};

// The routes and their methods: /metrics labels (so that arbitrary paths make no new series),
// 405 with Allow for a known path's other methods, CORS preflights.
struct Route {
  const char* path;
  const char* methods;
};
constexpr Route kRoutes[] = {{"/", "GET"},
                             {"/health", "GET"},
                             {"/metrics", "GET"},
                             {"/v1/models", "GET"},
                             {"/v1/chat/completions", "POST"},
                             {"/v1/completions", "POST"}};

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

std::string route_label(const std::string& path) {
  const Route* r = find_route(path);
  return r ? r->path : "unmatched";
}

// What the access log line says of a request. httplib serves a request on one thread from
// routing to the logger (streams included), so a thread_local carries it there.
struct AccessRecord {
  std::chrono::steady_clock::time_point start{};
  int64_t prompt = -1, generated = -1;
};
thread_local AccessRecord t_access;

// A client's path in the log: printable ASCII only (no forged lines), at most 200 bytes.
std::string loggable(const std::string& s) {
  std::string out;
  for (const char c : s.substr(0, 200)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return s.size() > 200 ? out + "..." : out;
}

const char kWebPage[] =
#include "chat_page.inc"
    ;

// Everything that exists once the model is loaded.
struct Loaded {
  std::unique_ptr<Assistant> assistant;  // the model, its engine and vision encoder
  std::unique_ptr<Scheduler> scheduler;
  std::string name;  // the model id clients see
  // The tokens' byte trie that response_format constraints are built over (once per model).
  std::shared_ptr<const TokenVocabulary> vocab;
  // response_format json_object's automaton, shared by every such request (its token tables
  // too: the cache is thread-safe), so that they pay neither its compile nor its tables again.
  std::shared_ptr<const TokenConstraint> any_object;
};

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}", prefix, rng());
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type = "invalid_request_error", const std::string& param = {},
                const std::string& code = {}) {
  res.status = status;
  res.set_content(error_json(message, type, param, code).dump(), "application/json");
}

// Fetches a remote image (only with --allow-remote-images): http(s), bounded size and time.
std::vector<uint8_t> fetch_image(const std::string& url, size_t max_bytes) {
  const size_t scheme_end = url.find("://");
  const size_t path_at = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_at);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client cli(origin);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(15);
  cli.set_follow_location(true);
  std::vector<uint8_t> bytes;
  bool too_big = false;
  auto res = cli.Get(path, [&](const char* data, size_t n) {
    if (bytes.size() + n > max_bytes) {
      too_big = true;
      return false;
    }
    bytes.insert(bytes.end(), data, data + n);
    return true;
  });
  if (too_big)
    throw ApiError(413, "invalid_request_error",
                   fmt::format("the image at {} is larger than {} bytes", url, max_bytes),
                   "image_url");
  if (!res || res->status != 200)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("could not fetch the image at {} ({})", url,
                               res ? std::to_string(res->status) : httplib::to_string(res.error())),
                   "image_url");
  return bytes;
}

Timings timings_of(const Job& job) {
  const GenerateResult r = job.result();
  return {job.ttft_ms(), job.stats().vision_ms, r.prefill_ms, r.decode_ms};
}

class HttpServer {
 public:
  explicit HttpServer(const ServerOptions& o) : o_(o) {
    limits_.max_images = o.max_images;
    limits_.allow_remote_images = o.allow_remote_images;
    limits_.max_tokens_cap = o.max_tokens;
    routes();
  }

  int run();

 private:
  void routes();
  void load();
  // The body of both completion endpoints once the request is parsed: queue, then answer.
  void serve_job(httplib::Response& res, const SamplingRequest& sp, Prompt prompt, bool chat);
  void access_log(const httplib::Request& req, const httplib::Response& res);
  void cors(const httplib::Request& req, httplib::Response& res) const;
  Loaded* ready() { return ready_.load() ? &loaded_ : nullptr; }

  ServerOptions o_;
  RequestLimits limits_;
  httplib::Server http_;
  Metrics metrics_;
  Loaded loaded_;
  std::atomic<bool> ready_{false};
  std::string load_error_;
  std::atomic<int> streams_{0};  // event streams being written
};

void HttpServer::load() {
  try {
    // Tests of the 503-while-loading answers slow the load down on purpose.
    if (const char* d = std::getenv("EDGEVL_SERVE_LOAD_DELAY_MS"))
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
    Loaded l;
    AssistantOptions ao;
    ao.threads = o_.threads;
    ao.backend = o_.backend;
    ao.images.max_pixels = o_.max_image_pixels;
    ao.images.max_tiles = o_.max_tiles;
    ao.images.cache_bytes = size_t(o_.image_cache_mb) << 20;
    l.assistant = std::make_unique<Assistant>(o_.model, ao);
    SchedulerOptions so;
    so.parallel = o_.parallel;
    so.queue = o_.queue;
    so.context = o_.context;
    l.scheduler =
        std::make_unique<Scheduler>(l.assistant->engine(), l.assistant->vision(), so, metrics_);
    l.name = std::filesystem::path(o_.model).filename().string();
    // Request threads read the limits only once ready_ is set (below).
    limits_.max_beams = l.assistant->engine().max_batch();
    l.vocab = l.assistant->vocabulary();
    l.any_object = make_json_constraint(any_json_object(), l.vocab);
    loaded_ = std::move(l);
    ready_ = true;
    std::fprintf(stderr, "edgevl serve: %s loaded (%s, %d threads, %d slot(s), context %d)\n",
                 o_.model.c_str(), loaded_.assistant->has_vision() ? "vision-language" : "text",
                 loaded_.assistant->engine().threads(), o_.parallel, loaded_.scheduler->context());
  } catch (const std::exception& e) {
    load_error_ = e.what();
    std::fprintf(stderr, "edgevl: error: %s\n", e.what());
    // stop() only acts on a running server: wait for listen_after_bind to have started.
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_.stop();
  }
}

void HttpServer::serve_job(httplib::Response& res, const SamplingRequest& sp, Prompt prompt,
                           bool chat) {
  Loaded& l = loaded_;
  const int32_t ctx = l.scheduler->context();
  const int32_t n_prompt = int32_t(prompt.ids.size());
  t_access.prompt = n_prompt;
  // Without max_tokens: up to --max-tokens, else to the end of the context.
  const int32_t room = ctx - n_prompt;
  const int32_t n =
      sp.max_tokens.value_or(o_.max_tokens > 0 ? std::min(o_.max_tokens, room) : room);
  if (n_prompt + (sp.max_tokens ? n : 1) > ctx)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("this model's context is {} tokens; the prompt has {} and {} were "
                               "asked for: shorten the conversation or lower max_tokens",
                               ctx, n_prompt, sp.max_tokens ? n : 1),
                   sp.max_tokens ? "max_tokens" : "messages", "context_length_exceeded");
  auto job = std::make_shared<Job>();
  job->prompt = std::move(prompt);
  job->options.n_predict = n;
  job->options.sampling.temperature = sp.temperature;
  job->options.sampling.top_p = sp.top_p;
  job->options.sampling.top_k = sp.top_k;
  job->options.sampling.min_p = sp.min_p;
  job->options.sampling.repeat_penalty = sp.repeat_penalty;
  job->options.sampling.repeat_last_n = sp.repeat_last_n;
  job->options.sampling.presence_penalty = sp.presence_penalty;
  job->options.sampling.frequency_penalty = sp.frequency_penalty;
  job->options.sampling.logit_bias = sp.logit_bias;
  job->options.sampling.seed = sp.seed;
  try {
    validate_sampler_params(job->options.sampling, l.assistant->model().config().vocab_size);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", e.what(), "logit_bias");
  }
  job->options.stop_strings = sp.stop;
  job->options.ignore_eos = sp.ignore_eos;
  job->options.logprobs = sp.logprobs;
  if (sp.response_schema) {
    try {
      job->options.constraint = sp.response_any_object
                                    ? l.any_object
                                    : make_json_constraint(*sp.response_schema, l.vocab);
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error", e.what(), "response_format");
    }
    const auto& c = *job->options.constraint;
    const int32_t need = c.min_tokens(c.start());
    if (need > n)
      throw ApiError(400, "invalid_request_error",
                     need == TokenConstraint::kUnreachable
                         ? std::string("the model's vocabulary cannot spell any document the "
                                       "response_format schema allows")
                         : fmt::format("the shortest document the response_format schema allows "
                                       "takes {} tokens; max_tokens is {}",
                                       need, n),
                     "max_tokens");
  }
  job->stream = sp.stream;
  if (sp.num_beams > 1) {
    // The chat template's stop strings need no counterpart: those that are single tokens are
    // among the model's stop ids, which end a beam.
    BeamOptions b;
    b.num_beams = sp.num_beams;
    b.max_new_tokens = n;
    b.length_penalty = sp.length_penalty;
    b.early_stopping = parse_early_stopping(sp.early_stopping);
    if (sp.ignore_eos) b.eos_ids = {-1};  // no id matches: every beam runs to max_tokens
    job->beams = b;
  }
  if (chat)
    for (const auto& s : l.assistant->model().chat_template().stop_strings)
      job->options.stop_strings.push_back(s);
  if (o_.timeout_s > 0)
    job->deadline = job->arrived + std::chrono::milliseconds(int64_t(o_.timeout_s * 1000));
  if (!l.scheduler->submit(job))
    throw ApiError(429, "rate_limit_exceeded",
                   fmt::format("the server is busy: {} slot(s) generating and {} request(s) "
                               "queued; retry later",
                               o_.parallel, o_.queue));

  const ResponseIds ids{random_id(chat ? "chatcmpl-" : "cmpl-"), unix_time(), l.name};
  const text::Tokenizer& tok = l.assistant->model().tokenizer();
  const TokenBytes bytes_of = [&tok](int32_t id) { return tok.token_bytes(id); };
  const bool want_lp = sp.logprobs >= 0;
  if (!sp.stream) {
    while (!job->wait_done(std::chrono::milliseconds(200)))
      if (g_stopping) job->cancelled = true;
    metrics_.ttft(job->ttft_ms() / 1000);
    if (auto err = job->error())
      throw ApiError(err->first, err->first >= 500 ? "server_error" : "invalid_request_error",
                     err->second);
    const GenerateResult r = job->result();
    const Timings t = timings_of(*job);
    t_access.generated = int64_t(r.tokens.size());
    const json lp = !want_lp ? json(nullptr)
                    : chat   ? chat_logprobs_json(r.logprobs, bytes_of)
                             : completion_logprobs_json(r.logprobs, bytes_of);
    res.set_content((chat ? chat_completion_json(ids, r, t, lp) : completion_json(ids, r, t, lp))
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
    return;
  }
  // Server-sent events: the role first, then text as it comes, the finish reason, usage when
  // asked, [DONE]. A client that goes away cancels the generation at its next token.
  const bool usage = sp.include_usage;
  auto first = std::make_shared<bool>(true);
  auto text_offset = std::make_shared<size_t>(0);  // completions' logprobs text_offset
  res.set_header("Cache-Control", "no-cache");
  ++streams_;
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, ids, chat, usage, first, want_lp, bytes_of, text_offset](
          size_t, httplib::DataSink& sink) {
        const auto write = [&](const std::string& s) {
          if (!sink.is_writable() || !sink.write(s.data(), s.size())) {
            job->cancelled = true;
            return false;
          }
          return true;
        };
        if (*first) {
          *first = false;
          if (chat &&
              !write(sse(chat_chunk_json(ids, {{"role", "assistant"}, {"content", ""}}, nullptr))))
            return false;
        }
        if (g_stopping) job->cancelled = true;
        std::string piece;
        std::vector<TokenLogprob> lps;
        const bool done =
            job->wait(&piece, std::chrono::milliseconds(200), want_lp ? &lps : nullptr);
        if (!piece.empty() || !lps.empty()) {
          json lp = nullptr;
          if (want_lp) {
            lp = chat ? chat_logprobs_json(lps, bytes_of)
                      : completion_logprobs_json(lps, bytes_of, *text_offset);
            for (const auto& t : lps) *text_offset += bytes_of(t.id).size();
          }
          const json chunk = chat ? chat_chunk_json(ids, {{"content", piece}}, nullptr, lp)
                                  : completion_chunk_json(ids, piece, nullptr, lp);
          if (!write(sse(chunk))) return false;
        } else if (!done && !sink.is_writable()) {
          job->cancelled = true;
          return false;
        }
        if (!done) return true;
        metrics_.ttft(job->ttft_ms() / 1000);
        if (auto err = job->error()) {
          write(sse(error_json(err->second,
                               err->first >= 500 ? "server_error" : "invalid_request_error")));
        } else {
          const GenerateResult r = job->result();
          t_access.generated = int64_t(r.tokens.size());
          const char* fin = finish_reason(r.stop);
          if (!write(sse(chat ? chat_chunk_json(ids, json::object(), fin)
                              : completion_chunk_json(ids, "", fin))))
            return false;
          if (usage &&
              !write(sse(usage_chunk_json(ids, chat ? "chat.completion.chunk" : "text_completion",
                                          r, timings_of(*job)))))
            return false;
        }
        write("data: [DONE]\n\n");
        sink.done();
        return true;
      },
      [this, job](bool success) {
        if (!success) job->cancelled = true;
        --streams_;
      });
}

void HttpServer::access_log(const httplib::Request& req, const httplib::Response& res) {
  metrics_.request(route_label(req.path), res.status);
  const AccessRecord a = std::exchange(t_access, AccessRecord{});
  const std::string tokens = a.prompt < 0 ? ""
                                          : fmt::format(" prompt {} generated {}", a.prompt,
                                                        std::max<int64_t>(0, a.generated));
  const std::string ms = a.start == std::chrono::steady_clock::time_point{}
                             ? "-"
                             : fmt::format("{:.0f}", std::chrono::duration<double, std::milli>(
                                                         std::chrono::steady_clock::now() - a.start)
                                                         .count());
  std::fprintf(stderr, "edgevl serve: %s %s %d%s %s ms\n", loggable(req.method).c_str(),
               loggable(req.path).c_str(), res.status, tokens.c_str(), ms.c_str());
}

// Cross-origin browsers are answered only for --cors-origin (exact, or "*"); without it the
// page served at / (same origin) is the only browser client.
void HttpServer::cors(const httplib::Request& req, httplib::Response& res) const {
  if (o_.cors_origin.empty() || !req.has_header("Origin") ||
      res.has_header("Access-Control-Allow-Origin"))
    return;
  const std::string origin = req.get_header_value("Origin");
  if (o_.cors_origin != "*" && origin != o_.cors_origin) return;
  res.set_header("Access-Control-Allow-Origin", o_.cors_origin == "*" ? "*" : origin);
  res.set_header("Vary", "Origin");
}

void HttpServer::routes() {
  http_.set_payload_max_length(o_.max_body);
  http_.set_read_timeout(30);
  http_.set_write_timeout(30);
  // Errors httplib answers itself (413 over --max-body, 404, 400 bad framing) get the error
  // object too.
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = fmt::format("HTTP status {}", res.status);
    if (res.status == 413)
      msg = fmt::format("the request body exceeds this server's limit of {} bytes (--max-body)",
                        o_.max_body);
    if (res.status == 404) {
      if (const Route* r = find_route(req.path)) {
        res.status = 405;
        res.set_header("Allow", r->methods);
        msg = fmt::format("{} takes {}, not {}", r->path, r->methods, req.method);
      } else {
        msg = fmt::format("no route for {} {}", req.method, req.path);
      }
    }
    cors(req, res);
    res.set_content(error_json(msg, "invalid_request_error")
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
  });
  http_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiError& e) {
          send_error(res, e.status, e.what(), e.type, e.param, e.code);
        } catch (const ContextFullError& e) {
          send_error(res, 400, e.what(), "invalid_request_error", "messages",
                     "context_length_exceeded");
        } catch (const Error& e) {
          send_error(res, 400, e.what());
        } catch (const std::exception& e) {
          send_error(res, 500, e.what(), "server_error");
        }
      });
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_access = AccessRecord{std::chrono::steady_clock::now()};
    cors(req, res);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { access_log(req, res); });
  // CORS preflights: 204 with the route's methods; the allow-origin header only for an origin
  // --cors-origin admits (set by the pre-routing handler).
  http_.Options(".*", [](const httplib::Request& req, httplib::Response& res) {
    const Route* r = find_route(req.path);
    if (!r) {
      res.status = 404;
      return;
    }
    res.status = 204;
    res.set_header("Allow", std::string(r->methods) + ", OPTIONS");
    if (res.has_header("Access-Control-Allow-Origin")) {
      res.set_header("Access-Control-Allow-Methods", std::string(r->methods) + ", OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization");
      res.set_header("Access-Control-Max-Age", "600");
    }
  });

  http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kWebPage, "text/html; charset=utf-8");
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready()) {
      res.set_content(R"({"status":"ok"})", "application/json");
    } else {
      res.status = 503;
      res.set_content(R"({"status":"loading"})", "application/json");
    }
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    Loaded* l = ready();
    if (!l) return send_error(res, 503, "the model is loading", "server_error");
    json m = {{"id", l->name},
              {"object", "model"},
              {"created", unix_time()},
              {"owned_by", "edgevl"},
              {"context_length", l->scheduler->context()},
              {"vision", l->assistant->has_vision()}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(),
                    "application/json");
  });
  http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Loaded* l = ready();
    if (!l) return send_error(res, 503, "the model is loading; retry shortly", "server_error");
    ChatRequest cr = parse_chat_request(req.body, limits_);
    std::vector<Message> msgs;
    for (size_t i = 0; i < cr.messages.size(); ++i) {
      ChatTurn& t = cr.messages[i];
      Message m{t.role, std::move(t.text), {}};
      for (ImagePart& img : t.images) {
        if (!l->assistant->has_vision())
          throw ApiError(400, "invalid_request_error",
                         fmt::format("model '{}' is text-only: it cannot take images", l->name),
                         fmt::format("messages[{}].content", i));
        if (!img.url.empty()) img.bytes = fetch_image(img.url, limits_.max_image_bytes);
        try {
          const std::string what = fmt::format("messages[{}] {}", i, img.video ? "video" : "image");
          m.images.push_back(img.video ? l->assistant->video_bytes(img.bytes, what)
                                       : l->assistant->image_bytes(img.bytes, what));
        } catch (const Error& e) {
          throw ApiError(400, "invalid_request_error", e.what(),
                         fmt::format("messages[{}].content", i));
        }
        metrics_.image(m.images.back()->features != nullptr);
      }
      msgs.push_back(std::move(m));
    }
    Prompt p = l->assistant->chat_prompt(msgs, cr.thinking);
    serve_job(res, cr.sampling, std::move(p), true);
  });
  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Loaded* l = ready();
    if (!l) return send_error(res, 503, "the model is loading; retry shortly", "server_error");
    CompletionRequest cr = parse_completion_request(req.body, limits_);
    Prompt p = l->assistant->raw_prompt(cr.prompt, true);
    serve_job(res, cr.sampling, std::move(p), false);
  });
}

int HttpServer::run() {
  // A missing file is an error now, not after the port is taken (the load itself runs while
  // listening, answering 503, because a large model takes seconds to map and check).
  {
    std::ifstream probe(o_.model, std::ios::binary);
    check(probe.good(), "{}: cannot open the model binary", o_.model);
  }
  int port = o_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(o_.host);
  } else if (!http_.bind_to_port(o_.host, port)) {
    port = -1;
  }
  check(port > 0, "cannot listen on {}:{} (in use, or not an address of this machine)", o_.host,
        o_.port);
  if (!o_.port_file.empty()) std::ofstream(o_.port_file) << port << "\n";
  std::fprintf(stderr, "edgevl serve: listening on http://%s:%d (loading %s)\n", o_.host.c_str(),
               port, o_.model.c_str());
  const auto on_signal = [](int) { g_stopping = true; };
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // On a signal: the request threads cancel their jobs; the listener closes once the streams
  // have written their last events (or after 10 s, for a client that stopped reading).
  std::atomic<bool> listening_done{false};
  std::thread stopper([this, &listening_done] {
    while (!g_stopping && !listening_done)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (listening_done) return;
    std::fprintf(stderr, "edgevl serve: stopping (%d stream(s) ending)\n", streams_.load());
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (streams_ > 0 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    while (!http_.is_running() && !listening_done)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_.stop();
  });
  std::thread loader([this] { load(); });
  http_.listen_after_bind();
  listening_done = true;
  stopper.join();
  loader.join();
  loaded_.scheduler.reset();  // before the engine it runs on
  if (!load_error_.empty()) return 1;
  std::fprintf(stderr, "edgevl serve: stopped\n");
  return 0;
}

}  // namespace

int run_server(const ServerOptions& o) {
  HttpServer s(o);
  return s.run();
}

}  // namespace edgevl::server
