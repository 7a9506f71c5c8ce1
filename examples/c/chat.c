/* A minimal app on the edgevl C API: load a model, optionally attach an image, ask two
 * questions in one conversation (the second reuses the first's KV cache), stream the reply
 * and print the timings.
 *
 *   edgevl-example-c MODEL.evb [-i IMAGE] [-n MAX_TOKENS] [-s STOP_AFTER_PIECES] QUESTION...
 *
 * Exit status: 0 on success, 1 on a usage error, 2 when an edgevl call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgevl.h"

struct stream {
  int pieces;
  int stop_after; /* 0 = never stop early */
};

static int on_text(const char* text, size_t len, void* user) {
  struct stream* st = (struct stream*)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  st->pieces++;
  return st->stop_after > 0 && st->pieces >= st->stop_after;
}

static int failed(const char* what, edgevl_status s) {
  fprintf(stderr, "edgevl-example-c: %s: %s (%s)\n", what, edgevl_last_error(),
          edgevl_status_name(s));
  return 2;
}

int main(int argc, char** argv) {
  const char* model_path = NULL;
  const char* image = NULL;
  const char* questions[8];
  int n_questions = 0, i;
  edgevl_generate_options gen;
  edgevl_model* model = NULL;
  edgevl_session* session = NULL;
  edgevl_status s;
  struct stream st;
  int rc = 0;

  if (edgevl_abi_version() != EDGEVL_ABI_VERSION) {
    fprintf(stderr, "edgevl-example-c: library ABI %d, header ABI %d\n", edgevl_abi_version(),
            EDGEVL_ABI_VERSION);
    return 1;
  }
  edgevl_generate_options_init(&gen);
  gen.temperature = 0.0f; /* greedy: the same answer every run */
  gen.max_tokens = 16;
  st.pieces = 0;
  st.stop_after = 0;
  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
      image = argv[++i];
    } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      gen.max_tokens = atoi(argv[++i]);
    } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
      st.stop_after = atoi(argv[++i]);
    } else if (!model_path) {
      model_path = argv[i];
    } else if (n_questions < 8) {
      questions[n_questions++] = argv[i];
    }
  }
  if (!model_path || n_questions == 0) {
    fprintf(stderr, "usage: %s MODEL.evb [-i IMAGE] [-n MAX_TOKENS] [-s STOP_AFTER] QUESTION...\n",
            argv[0]);
    return 1;
  }

  s = edgevl_model_load(model_path, NULL, &model);
  if (s != EDGEVL_OK) return failed("load", s);
  printf("edgevl %s (ABI %d), kernels: %s, %d threads, context %d\n", edgevl_version(),
         edgevl_abi_version(), edgevl_isa(), edgevl_model_threads(model),
         (int)edgevl_model_context(model));
  s = edgevl_session_create(model, 0, &session);
  if (s != EDGEVL_OK) {
    rc = failed("session", s);
    goto done;
  }
  if (image) {
    s = edgevl_session_add_image_file(session, image);
    if (s != EDGEVL_OK) {
      rc = failed("image", s);
      goto done;
    }
  }
  for (i = 0; i < n_questions; ++i) {
    edgevl_stats stats;
    printf("> %s\n", questions[i]);
    s = edgevl_session_chat(session, questions[i], &gen, on_text, &st);
    if (s != EDGEVL_OK) {
      rc = failed("chat", s);
      goto done;
    }
    edgevl_session_stats(session, &stats);
    printf("\n[prompt %d tokens (%d reused), %d generated, %d image(s) %d tile(s), "
           "ttft %.1f ms, decode %.1f tok/s, stop: %s]\n",
           (int)stats.prompt_tokens, (int)stats.reused_tokens, (int)stats.generated_tokens,
           (int)stats.images, (int)stats.tiles, stats.ttft_ms, stats.decode_tokens_per_s,
           stats.stop_reason);
  }
done:
  edgevl_session_free(session);
  edgevl_model_free(model);
  return rc;
}
