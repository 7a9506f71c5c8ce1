#pragma once
// One conversation's state: the KV cache, the planned arena, and the thread pool. Feeds
// token ids or embedding rows through the prefill (chunked) or decode graph and returns
// logits. Nothing is allocated per token: buffers are sized at construction.
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "runtime/model.h"

namespace edgevl {

struct SessionOptions {
  int threads = 0;      // 0 = physical cores
  int32_t context = 0;  // 0 = as compiled; may only lower it
};

class Session {
 public:
  Session(const Model& model, SessionOptions opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return model_; }
  int32_t context() const { return context_; }
  int32_t n_past() const { return n_past_; }
  int threads() const;
  void reset() { n_past_ = 0; }

  // Appends tokens to the context; returns the logits after the last one.
  std::span<const float> eval_tokens(std::span<const int32_t> ids);
  // Appends embedding rows ([n, hidden]); returns the logits after the last one.
  std::span<const float> eval_embeddings(const float* rows, int64_t n);
  // When set, eval_* also computes the logits of every position into all_logits().
  void set_all_logits(bool on) { all_logits_on_ = on; }
  const std::vector<float>& all_logits() const { return all_logits_; }
  void set_dump(DumpFn fn) { dump_ = std::move(fn); }
  // Records every op of every graph run into `p` (null: stop); the caller owns it.
  void set_profiler(Profiler* p) { profiler_ = p; }

  // VLMs: one preprocessed tile ([3, size, size] normalised floats) through the vision
  // graph; writes tokens_per_tile rows of llm_hidden floats to `out`.
  void encode_tile(const float* pixels, float* out);

  // Host-side embedding lookup (token ids -> float rows).
  void embed(std::span<const int32_t> ids, float* out) const;

 private:
  void run_head(const float* hidden_row, float* logits);

  const Model& model_;
  int32_t context_ = 0;
  int32_t n_past_ = 0;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::vector<std::unique_ptr<GraphRunner>> bound_;
  const GraphRunner* prefill_ = nullptr;
  const GraphRunner* decode_ = nullptr;
  const GraphRunner* head_ = nullptr;
  const GraphRunner* vision_ = nullptr;
  // The f32 vision attention's per-head matrices (GraphRunner::scratch_floats): left
  // uninitialized, so it only becomes resident on the paths that use it.
  std::unique_ptr<float[]> scratch_;
  // Freed with std::free (aligned_alloc): owned here so that a constructor that throws after
  // allocating them (a graph or config it refuses) leaks nothing.
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], FreeDeleter> arena_;
  size_t arena_bytes_ = 0;
  std::vector<uint8_t*> k_cache_, v_cache_;
  std::unique_ptr<uint8_t[], FreeDeleter> kv_block_;
  KvCaches kv_;
  std::vector<float> embed_rows_, logits_, all_logits_, hidden_row_, hidden_rows_;
  std::vector<int32_t> positions_;
  bool all_logits_on_ = false;
  DumpFn dump_;
  Profiler* profiler_ = nullptr;
};

}  // namespace edgevl
