/* edgevl: run a compiled vision-language or language model (.evb) from C.
 *
 * A model handle is a loaded binary with its thread pool; sessions are conversations on it.
 * Calls on one model and its sessions may come from any thread: they are serialized (one
 * forward pass runs at a time). Every function that can fail returns an edgevl_status; the
 * message of the last failure on the calling thread is edgevl_last_error(). Strings are UTF-8.
 *
 *   edgevl_model* m;
 *   if (edgevl_model_load("model.evb", NULL, &m) != EDGEVL_OK) puts(edgevl_last_error());
 *   edgevl_session* s;
 *   edgevl_session_create(m, &s);
 *   edgevl_session_add_image_file(s, "photo.jpg");
 *   edgevl_session_chat(s, "What is in the picture?", NULL, on_token, NULL);
 *   edgevl_session_free(s);
 *   edgevl_model_free(m);
 */
#ifndef EDGEVL_H
#define EDGEVL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every incompatible change of this header's types or functions. */
#define EDGEVL_ABI_VERSION 1

#if defined(__GNUC__)
#define EDGEVL_API __attribute__((visibility("default")))
#else
#define EDGEVL_API
#endif

typedef enum edgevl_status {
  EDGEVL_OK = 0,
  EDGEVL_ERR_INVALID_ARGUMENT = 1, /* a null handle, a bad option value, an unknown ISA level */
  EDGEVL_ERR_LOAD = 2,             /* the binary is missing, corrupt, or built for another CPU */
  EDGEVL_ERR_IMAGE = 3,            /* undecodable, too large, or the model has no vision */
  EDGEVL_ERR_CONTEXT_FULL = 4,     /* prompt + max_tokens exceed the context */
  EDGEVL_ERR_PROMPT = 5,           /* the prompt cannot be built (placeholders vs images...) */
  EDGEVL_ERR_INTERNAL = 6
} edgevl_status;

typedef struct edgevl_model edgevl_model;
typedef struct edgevl_session edgevl_session;

/* The ABI version the library was built with (compare with EDGEVL_ABI_VERSION). */
EDGEVL_API int edgevl_abi_version(void);
EDGEVL_API const char* edgevl_version(void);
/* The message of the last failure on this thread ("" when none). Valid until the next call. */
EDGEVL_API const char* edgevl_last_error(void);
EDGEVL_API const char* edgevl_status_name(edgevl_status s);

/* Forces a kernel level for the whole process ("best", "avx2", "avx512-vnni", ...); the
 * default honours the EDGEVL_ISA environment variable. Fails naming what the CPU lacks. */
EDGEVL_API edgevl_status edgevl_set_isa(const char* level);
/* The active kernel level's name. */
EDGEVL_API const char* edgevl_isa(void);

typedef struct edgevl_model_options {
  int threads;              /* 0 = the physical cores */
  int64_t image_cache_mb;   /* features of images seen again are reused; 0 = no cache */
  int64_t max_image_pixels; /* decoded width x height; 0 = 50 megapixels */
  int max_tiles;            /* 0 = the model's */
} edgevl_model_options;

EDGEVL_API void edgevl_model_options_init(edgevl_model_options* o);
/* `options` may be NULL (defaults). */
EDGEVL_API edgevl_status edgevl_model_load(const char* path, const edgevl_model_options* options,
                                           edgevl_model** out);
/* The same on a backend: "cpu" (NULL), "htp" (the Qualcomm HTP target the binary was compiled
 * for with `edgevl compile --target`), or a target ("htp-v75": a binary compiled for another is
 * refused naming both; one without HTP graphs gets them built at load). The HTP runs the ops it
 * supports, the CPU the rest; the QNN library is found at run time (EDGEVL_QNN_LIB_DIR, the
 * setup's venv, the system path). */
EDGEVL_API edgevl_status edgevl_model_load_on(const char* path, const edgevl_model_options* options,
                                              const char* backend, edgevl_model** out);
/* "cpu", or the HTP target the model runs on ("htp-v75"). */
EDGEVL_API const char* edgevl_model_backend(const edgevl_model* m);
EDGEVL_API void edgevl_model_free(edgevl_model* m);
EDGEVL_API int edgevl_model_has_vision(const edgevl_model* m);
EDGEVL_API int32_t edgevl_model_context(const edgevl_model* m);
EDGEVL_API int edgevl_model_threads(const edgevl_model* m);

/* `context` 0 = as compiled (it may only be lowered). */
EDGEVL_API edgevl_status edgevl_session_create(edgevl_model* m, int32_t context,
                                               edgevl_session** out);
EDGEVL_API void edgevl_session_free(edgevl_session* s);
/* Starts a new conversation (the system message stays). */
EDGEVL_API edgevl_status edgevl_session_reset(edgevl_session* s);
/* The system message of the conversation (NULL or "" = the template's default). */
EDGEVL_API edgevl_status edgevl_session_set_system(edgevl_session* s, const char* text);

/* Attach an image to the next user message (VLMs). Decoding and tiling happen here; the
 * vision tower runs when the message is sent. */
EDGEVL_API edgevl_status edgevl_session_add_image_file(edgevl_session* s, const char* path);
/* Encoded JPEG / PNG / BMP bytes. */
EDGEVL_API edgevl_status edgevl_session_add_image_bytes(edgevl_session* s, const uint8_t* data,
                                                        size_t size);
/* 8-bit RGB, row-major, no padding: width * height * 3 bytes. */
EDGEVL_API edgevl_status edgevl_session_add_image_rgb(edgevl_session* s, const uint8_t* rgb,
                                                      int width, int height);
/* Attach a video file to the next user message (Qwen3-VL / Qwen3.5; any container and codec
 * FFmpeg decodes). Frames are sampled and preprocessed here, as the model's video processor
 * does; EDGEVL_ERR_IMAGE for an undecodable file, a model without video input, or a library
 * built without FFmpeg. Added in 1.x: check edgevl_version() if linking dynamically against
 * older libraries. */
EDGEVL_API edgevl_status edgevl_session_add_video_file(edgevl_session* s, const char* path);

typedef struct edgevl_generate_options {
  int32_t max_tokens; /* 0 = up to 256, within the context */
  float temperature;  /* 0 = greedy */
  int32_t top_k;      /* 0 = off */
  float top_p;        /* 1 = off */
  float min_p;        /* 0 = off */
  float repeat_penalty;
  uint64_t seed;           /* 0 = random */
  const char* const* stop; /* stop strings, n_stop of them */
  int n_stop;
} edgevl_generate_options;

EDGEVL_API void edgevl_generate_options_init(edgevl_generate_options* o);

/* Called with each piece of generated text (whole UTF-8, never a stop string; not
 * NUL-terminated). Return nonzero to stop the generation there. */
typedef int (*edgevl_token_callback)(const char* text, size_t len, void* user);

/* Sends `user_message` (with the images attached since the last message) and generates the
 * assistant's reply, which joins the conversation. Earlier turns stay in the KV cache. The
 * callback and `options` may be NULL. */
EDGEVL_API edgevl_status edgevl_session_chat(edgevl_session* s, const char* user_message,
                                             const edgevl_generate_options* options,
                                             edgevl_token_callback on_text, void* user);
/* A continuation of raw text, without the chat template (not part of the conversation). */
EDGEVL_API edgevl_status edgevl_session_complete(edgevl_session* s, const char* text,
                                                 const edgevl_generate_options* options,
                                                 edgevl_token_callback on_text, void* user);
/* Sampling controls outside edgevl_generate_options (whose layout is fixed by ABI 1); they
 * apply to every later chat / complete call on the session until changed. Penalties as OpenAI
 * defines them: a token's logit loses frequency * (its count in the window) + presence (when
 * it occurs at all); last_n is the window of these and of repeat_penalty (default 64, -1 = the
 * whole context, 0 = no penalties). */
EDGEVL_API edgevl_status edgevl_session_set_penalties(edgevl_session* s, float presence,
                                                      float frequency, int32_t last_n);
/* n (token id, bias) pairs added to the logits before sampling (-INFINITY bans a token);
 * n = 0 clears them. Ids outside the vocabulary are refused. */
EDGEVL_API edgevl_status edgevl_session_set_logit_bias(edgevl_session* s, const int32_t* tokens,
                                                       const float* bias, int n);

/* Constrained output: later chat / complete calls on the session answer with a JSON document
 * valid under `schema_json`, a JSON Schema (the subset `edgevl run --json-schema` takes: README;
 * "{\"type\":\"object\"}" is any JSON object). Documents always end complete within
 * max_tokens; a max_tokens below the shortest document fails the call. NULL clears the
 * constraint. A malformed schema or an unsupported keyword is EDGEVL_ERR_INVALID_ARGUMENT with
 * the keyword and its path in edgevl_last_error(). */
EDGEVL_API edgevl_status edgevl_session_set_json_schema(edgevl_session* s, const char* schema_json);
/* The same for a GBNF grammar (the subset `edgevl run --grammar` takes: README): the reply is
 * one text of its rule `root`. NULL clears. One constraint at a time: either call replaces
 * what the other set. */
EDGEVL_API edgevl_status edgevl_session_set_grammar(edgevl_session* s, const char* gbnf);

/* The text of the last reply (valid until the next call on the session). */
EDGEVL_API const char* edgevl_session_last_text(const edgevl_session* s);

typedef struct edgevl_stats {
  int32_t prompt_tokens; /* of the last call */
  int32_t reused_tokens; /* of those, already in the KV cache */
  int32_t generated_tokens;
  int32_t images, tiles;
  double load_ms;       /* of the model */
  double preprocess_ms; /* decoding and tiling the last message's images */
  double vision_ms;     /* the vision tower, last call */
  double prefill_ms, decode_ms;
  double ttft_ms; /* vision + prefill */
  double prefill_tokens_per_s, decode_tokens_per_s;
  const char* stop_reason; /* "length", "stop_token", "stop_string", "cancelled" */
} edgevl_stats;

EDGEVL_API edgevl_status edgevl_session_stats(const edgevl_session* s, edgevl_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* EDGEVL_H */
