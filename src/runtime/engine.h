#pragma once
// What running the graphs needs besides a conversation's KV cache: the thread pool, the one
// arena the compiler planned for all graphs, and the graphs bound to it. One engine serves any
// number of sessions (runtime/session.h), one step at a time: it is not for concurrent callers
// (the server drives it from one scheduler thread). Nothing is allocated per token.
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "runtime/executor.h"
#include "runtime/model.h"

namespace edgevl {

struct EngineOptions {
  int threads = 0;  // 0 = physical cores
};

class Engine {
 public:
  explicit Engine(const Model& model, EngineOptions opts = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Model& model() const { return model_; }
  int threads() const;
  cpu::ThreadPool& pool() { return *pool_; }

  // Runs `n` embedding rows ([n, hidden]) through the prefill (chunked) or decode graph at
  // positions n_past, n_past + 1, ... of the KV caches `kv`. Returns the final hidden state of
  // the last row (valid until the next call); when `all_hidden` is set, also copies every row's
  // final hidden state there ([n, hidden]).
  const float* forward(const KvCaches& kv, int32_t n_past, const float* rows, int64_t n,
                       float* all_hidden = nullptr);
  // The LM head of one final hidden row: vocab_size logits into `logits`.
  void head(const float* hidden_row, float* logits);
  // Host-side embedding lookup (token ids -> float rows [ids.size(), hidden]).
  void embed(std::span<const int32_t> ids, float* out) const;
  // Token rows of one prefill chunk (the prefill graph's width).
  int32_t chunk() const;

  // VLMs: one preprocessed tile ([3, size, size] normalised floats) through the vision
  // graph; writes tokens_per_tile rows of llm_hidden floats to `out`.
  void encode_tile(const float* pixels, float* out);

  void set_dump(DumpFn fn) { dump_ = std::move(fn); }
  // Records every op of every graph run into `p` (null: stop); the caller owns it.
  void set_profiler(Profiler* p) { profiler_ = p; }

 private:
  const Model& model_;
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
  // allocating it (a graph or config it refuses) leaks nothing.
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], FreeDeleter> arena_;
  std::vector<float> hidden_row_;
  std::vector<int32_t> positions_;
  DumpFn dump_;
  Profiler* profiler_ = nullptr;
};

// 64-byte aligned, zeroed bytes for std::free (the arena, KV caches); throws when out of memory.
uint8_t* aligned_zeroed_bytes(size_t n);

}  // namespace edgevl
