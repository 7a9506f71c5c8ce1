// The C API (include/edgevl.h): a thin shim over the runtime's entry point (runtime/assistant.h).
// A model handle is an Assistant behind one mutex; a session handle is a Chat with the sampling
// settings the C calls set. C++ exceptions never cross the boundary: each entry point maps them
// to a status and keeps the message for edgevl_last_error().
#include "edgevl.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/assistant.h"
#include "runtime/constraints/grammar_constraint.h"
#include "runtime/constraints/json_schema_reader.h"
#include "runtime/execution/htp_delegate.h"
#include "runtime/execution/isa.h"

struct edgevl_model {
  std::unique_ptr<edgevl::Assistant> assistant;
  std::string backend;  // "cpu" or the HTP target
  std::mutex mu;        // one forward pass at a time
};

struct edgevl_session {
  edgevl_model* owner = nullptr;
  std::unique_ptr<edgevl::Chat> chat;
  std::string last_text;
  edgevl_stats stats{};
  // Sampling set by edgevl_session_set_penalties / _set_logit_bias (outside the options
  // struct, whose size is part of ABI 1).
  float presence = 0, frequency = 0;
  int32_t last_n = 64;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::shared_ptr<const edgevl::TokenConstraint> constraint;  // set_json_schema / set_grammar
};

namespace {

thread_local std::string g_last_error;

// Runs `f`, mapping exceptions to statuses: `kind` is the status of an edgevl::Error that is
// not more specific (what the call was doing when it failed).
template <class F>
edgevl_status guarded(edgevl_status kind, F&& f) {
  try {
    g_last_error.clear();
    f();
    return EDGEVL_OK;
  } catch (const edgevl::ContextFullError& e) {
    g_last_error = e.what();
    return EDGEVL_ERR_CONTEXT_FULL;
  } catch (const edgevl::Error& e) {
    g_last_error = e.what();
    return kind;
  } catch (const std::bad_alloc&) {
    g_last_error = "out of memory";
    return EDGEVL_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return EDGEVL_ERR_INTERNAL;
  }
}

edgevl_status invalid(const char* what) {
  g_last_error = what;
  return EDGEVL_ERR_INVALID_ARGUMENT;
}

edgevl::GenerateOptions generate_options(const edgevl_session* s, const edgevl_generate_options* o,
                                         int32_t room) {
  edgevl_generate_options d;
  edgevl_generate_options_init(&d);
  if (!o) o = &d;
  edgevl::check(o->max_tokens >= 0, "max_tokens must be >= 0 (got {})", o->max_tokens);
  edgevl::check(o->temperature >= 0, "temperature must be >= 0 (got {})", o->temperature);
  edgevl::check(o->top_p > 0 && o->top_p <= 1, "top_p must be in (0, 1] (got {})", o->top_p);
  edgevl::check(o->n_stop >= 0 && (o->n_stop == 0 || o->stop != nullptr),
                "stop: {} strings but no array", o->n_stop);
  edgevl::GenerateOptions g;
  // Unset: as much as fits, up to 256.
  g.n_predict = o->max_tokens > 0 ? o->max_tokens : std::clamp(room, 1, 256);
  g.sampling.temperature = o->temperature;
  g.sampling.top_k = o->top_k;
  g.sampling.top_p = o->top_p;
  g.sampling.min_p = o->min_p;
  g.sampling.repeat_penalty = o->repeat_penalty;
  g.sampling.seed = o->seed;
  g.sampling.presence_penalty = s->presence;
  g.sampling.frequency_penalty = s->frequency;
  g.sampling.repeat_last_n = s->last_n;
  g.sampling.logit_bias = s->logit_bias;
  g.constraint = s->constraint;
  edgevl::validate_sampler_params(g.sampling, s->owner->assistant->model().config().vocab_size);
  for (int i = 0; i < o->n_stop; ++i) {
    edgevl::check(o->stop[i] != nullptr, "stop[{}] is NULL", i);
    g.stop_strings.emplace_back(o->stop[i]);
  }
  return g;
}

// What the last reply left, for edgevl_session_last_text / _stats.
void record(edgevl_session* s, const edgevl::GenerateResult& r) {
  s->last_text = r.text;
  const edgevl::ReplyStats& rs = s->chat->last_stats();
  edgevl_stats& st = s->stats;
  st = edgevl_stats{};
  st.prompt_tokens = rs.prompt_tokens;
  st.reused_tokens = rs.reused_tokens;
  st.generated_tokens = rs.generated_tokens;
  st.images = rs.images;
  st.tiles = rs.tiles;
  st.load_ms = s->owner->assistant->model().load_ms();
  st.preprocess_ms = rs.preprocess_ms;
  st.vision_ms = rs.vision_ms;
  st.prefill_ms = rs.prefill_ms;
  st.decode_ms = rs.decode_ms;
  st.ttft_ms = rs.vision_ms + rs.prefill_ms;
  st.prefill_tokens_per_s = rs.prefill_tokens_per_s();
  st.decode_tokens_per_s = rs.decode_tokens_per_s();
  st.stop_reason = edgevl::stop_reason_name(r.stop);
}

// The C callback as the runtime's: a non-zero return from the app stops the reply.
std::function<bool(std::string_view)> text_sink(edgevl_token_callback cb, void* user) {
  return [cb, user](std::string_view t) { return !cb || cb(t.data(), t.size(), user) == 0; };
}

// Sets the session's constraint to the automaton `compile` makes (NULL text: clears it).
template <class F>
edgevl_status set_constraint(edgevl_session* s, const char* text, const char* what, F&& compile) {
  if (!s) return invalid(what);
  std::lock_guard lock(s->owner->mu);
  if (!text) {
    s->constraint.reset();
    return EDGEVL_OK;
  }
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] {
    edgevl::ByteDfa dfa = compile(std::string_view(text));
    s->constraint = std::make_shared<const edgevl::TokenConstraint>(
        std::move(dfa), s->owner->assistant->vocabulary());
  });
}

template <class F>
edgevl_status add_image(edgevl_session* s, F&& prepare) {
  if (!s) return invalid("edgevl_session_add_image: session is NULL");
  std::lock_guard lock(s->owner->mu);
  edgevl::Assistant& a = *s->owner->assistant;
  if (!a.has_vision()) {
    g_last_error = a.model().file().path() + " is a text-only model: it cannot take images";
    return EDGEVL_ERR_IMAGE;
  }
  return guarded(EDGEVL_ERR_IMAGE, [&] { s->chat->add_image(prepare(a)); });
}

}  // namespace

extern "C" {

int edgevl_abi_version(void) {
  return EDGEVL_ABI_VERSION;
}

const char* edgevl_version(void) {
  return EDGEVL_VERSION_STRING;
}

const char* edgevl_last_error(void) {
  return g_last_error.c_str();
}

const char* edgevl_status_name(edgevl_status s) {
  switch (s) {
    case EDGEVL_OK: return "ok";
    case EDGEVL_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case EDGEVL_ERR_LOAD: return "load";
    case EDGEVL_ERR_IMAGE: return "image";
    case EDGEVL_ERR_CONTEXT_FULL: return "context_full";
    case EDGEVL_ERR_PROMPT: return "prompt";
    case EDGEVL_ERR_INTERNAL: return "internal";
  }
  return "unknown";
}

edgevl_status edgevl_set_isa(const char* level) {
  if (!level) return invalid("edgevl_set_isa: level is NULL");
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] { edgevl::select_isa(level); });
}

const char* edgevl_isa(void) {
  return edgevl::active_isa();
}

void edgevl_model_options_init(edgevl_model_options* o) {
  if (!o) return;
  *o = edgevl_model_options{};
  o->image_cache_mb = 64;
  o->max_image_pixels = 50'000'000;
}

edgevl_status edgevl_model_load(const char* path, const edgevl_model_options* options,
                                edgevl_model** out) {
  return edgevl_model_load_on(path, options, nullptr, out);
}

edgevl_status edgevl_model_load_on(const char* path, const edgevl_model_options* options,
                                   const char* backend, edgevl_model** out) {
  if (!path || !out) return invalid("edgevl_model_load: path and out must not be NULL");
  *out = nullptr;
  edgevl_model_options d;
  edgevl_model_options_init(&d);
  const edgevl_model_options& o = options ? *options : d;
  if (o.threads < 0 || o.image_cache_mb < 0 || o.max_image_pixels < 0 || o.max_tiles < 0)
    return invalid("edgevl_model_load: options must not be negative");
  return guarded(EDGEVL_ERR_LOAD, [&] {
    edgevl::AssistantOptions ao;
    ao.threads = o.threads;
    ao.backend = backend ? backend : "cpu";
    ao.images.max_pixels = o.max_image_pixels > 0 ? o.max_image_pixels : 50'000'000;
    ao.images.max_tiles = o.max_tiles;
    ao.images.cache_bytes = size_t(o.image_cache_mb) << 20;
    auto m = std::make_unique<edgevl_model>();
    m->assistant = std::make_unique<edgevl::Assistant>(path, ao);
    const edgevl::HtpBackend* htp = m->assistant->engine().htp();
    m->backend = htp ? htp->target() : "cpu";
    *out = m.release();
  });
}

const char* edgevl_model_backend(const edgevl_model* m) {
  return m ? m->backend.c_str() : "";
}

void edgevl_model_free(edgevl_model* m) {
  delete m;
}

int edgevl_model_has_vision(const edgevl_model* m) {
  return m && m->assistant->has_vision() ? 1 : 0;
}

int32_t edgevl_model_context(const edgevl_model* m) {
  return m ? m->assistant->model().runtime_config().context : 0;
}

int edgevl_model_threads(const edgevl_model* m) {
  return m ? m->assistant->engine().threads() : 0;
}

edgevl_status edgevl_session_create(edgevl_model* m, int32_t context, edgevl_session** out) {
  if (!m || !out) return invalid("edgevl_session_create: model and out must not be NULL");
  *out = nullptr;
  if (context < 0) return invalid("edgevl_session_create: context must not be negative");
  std::lock_guard lock(m->mu);
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] {
    auto s = std::make_unique<edgevl_session>();
    s->owner = m;
    s->chat = std::make_unique<edgevl::Chat>(*m->assistant, context);
    *out = s.release();
  });
}

void edgevl_session_free(edgevl_session* s) {
  if (!s) return;
  std::lock_guard lock(s->owner->mu);
  delete s;
}

edgevl_status edgevl_session_reset(edgevl_session* s) {
  if (!s) return invalid("edgevl_session_reset: session is NULL");
  std::lock_guard lock(s->owner->mu);
  s->chat->reset();
  return EDGEVL_OK;
}

edgevl_status edgevl_session_set_system(edgevl_session* s, const char* text) {
  if (!s) return invalid("edgevl_session_set_system: session is NULL");
  std::lock_guard lock(s->owner->mu);
  s->chat->set_system(text ? text : "");
  return EDGEVL_OK;
}

edgevl_status edgevl_session_add_image_file(edgevl_session* s, const char* path) {
  if (!path) return invalid("edgevl_session_add_image_file: path is NULL");
  return add_image(s, [&](edgevl::Assistant& a) { return a.image_file(path); });
}

edgevl_status edgevl_session_add_video_file(edgevl_session* s, const char* path) {
  if (!path) return invalid("edgevl_session_add_video_file: path is NULL");
  return add_image(s, [&](edgevl::Assistant& a) { return a.video_file(path); });
}

edgevl_status edgevl_session_add_image_bytes(edgevl_session* s, const uint8_t* data, size_t size) {
  if (!data && size > 0) return invalid("edgevl_session_add_image_bytes: data is NULL");
  return add_image(s, [&](edgevl::Assistant& a) { return a.image_bytes({data, size}); });
}

edgevl_status edgevl_session_add_image_rgb(edgevl_session* s, const uint8_t* rgb, int width,
                                           int height) {
  if (!rgb) return invalid("edgevl_session_add_image_rgb: rgb is NULL");
  if (width <= 0 || height <= 0) return invalid("edgevl_session_add_image_rgb: bad size");
  return add_image(s, [&](edgevl::Assistant& a) {
    return a.image_rgb(width, height, {rgb, size_t(width) * size_t(height) * 3});
  });
}

void edgevl_generate_options_init(edgevl_generate_options* o) {
  if (!o) return;
  *o = edgevl_generate_options{};
  o->temperature = 0.8f;
  o->top_k = 40;
  o->top_p = 0.95f;
  o->min_p = 0.05f;
  o->repeat_penalty = 1.0f;
}

edgevl_status edgevl_session_chat(edgevl_session* s, const char* user_message,
                                  const edgevl_generate_options* options,
                                  edgevl_token_callback on_text, void* user) {
  if (!s || !user_message) return invalid("edgevl_session_chat: session and message required");
  std::lock_guard lock(s->owner->mu);
  edgevl::Turn turn;
  edgevl_status st = guarded(EDGEVL_ERR_PROMPT, [&] { turn = s->chat->turn(user_message); });
  if (st != EDGEVL_OK) return st;
  // The turn joins the conversation only once answered (Chat::reply).
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] {
    record(s,
           s->chat->reply(turn, generate_options(s, options, turn.room), text_sink(on_text, user)));
  });
}

edgevl_status edgevl_session_complete(edgevl_session* s, const char* text,
                                      const edgevl_generate_options* options,
                                      edgevl_token_callback on_text, void* user) {
  if (!s || !text) return invalid("edgevl_session_complete: session and text required");
  std::lock_guard lock(s->owner->mu);
  edgevl::Prompt p;
  edgevl_status st =
      guarded(EDGEVL_ERR_PROMPT, [&] { p = s->owner->assistant->raw_prompt(text, true); });
  if (st != EDGEVL_OK) return st;
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] {
    const int32_t room = s->chat->context() - int32_t(p.ids.size());
    record(s, s->chat->complete(p, generate_options(s, options, room), text_sink(on_text, user)));
  });
}

edgevl_status edgevl_session_set_penalties(edgevl_session* s, float presence, float frequency,
                                           int32_t last_n) {
  if (!s) return invalid("edgevl_session_set_penalties: session required");
  if (!std::isfinite(presence) || !std::isfinite(frequency))
    return invalid("edgevl_session_set_penalties: penalties must be finite numbers");
  if (last_n < -1) return invalid("edgevl_session_set_penalties: last_n must be >= -1");
  std::lock_guard lock(s->owner->mu);
  s->presence = presence;
  s->frequency = frequency;
  s->last_n = last_n;
  return EDGEVL_OK;
}

edgevl_status edgevl_session_set_logit_bias(edgevl_session* s, const int32_t* tokens,
                                            const float* bias, int n) {
  if (!s || n < 0 || (n > 0 && (!tokens || !bias)))
    return invalid("edgevl_session_set_logit_bias: session, and n >= 0 tokens and biases");
  std::lock_guard lock(s->owner->mu);
  std::vector<std::pair<int32_t, float>> lb;
  for (int i = 0; i < n; ++i) lb.emplace_back(tokens[i], bias[i]);
  return guarded(EDGEVL_ERR_INVALID_ARGUMENT, [&] {
    edgevl::SamplerParams p;
    p.logit_bias = lb;
    edgevl::validate_sampler_params(p, s->owner->assistant->model().config().vocab_size);
    s->logit_bias = std::move(lb);
  });
}

edgevl_status edgevl_session_set_json_schema(edgevl_session* s, const char* schema_json) {
  return set_constraint(s, schema_json, "edgevl_session_set_json_schema: session is NULL",
                        [](std::string_view text) {
                          return edgevl::compile_json_schema(edgevl::parse_json_schema_text(text));
                        });
}

edgevl_status edgevl_session_set_grammar(edgevl_session* s, const char* gbnf) {
  return set_constraint(s, gbnf, "edgevl_session_set_grammar: session is NULL",
                        [](std::string_view text) { return edgevl::compile_grammar(text); });
}

const char* edgevl_session_last_text(const edgevl_session* s) {
  return s ? s->last_text.c_str() : "";
}

edgevl_status edgevl_session_stats(const edgevl_session* s, edgevl_stats* out) {
  if (!s || !out) return invalid("edgevl_session_stats: session and out must not be NULL");
  *out = s->stats;
  if (!out->stop_reason) out->stop_reason = "";
  return EDGEVL_OK;
}

}  // extern "C"
