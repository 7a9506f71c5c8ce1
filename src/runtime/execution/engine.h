#pragma once
// What running the graphs needs besides a conversation's KV cache: the thread pool, the one
// arena the compiler planned for all graphs, and the graphs bound to it. One engine serves any
// number of sessions (runtime/execution/session.h), one step at a time: it is not for concurrent
// callers (the server drives it from one scheduler thread). Nothing is allocated per token.
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/execution/executor.h"
#include "runtime/execution/model.h"

namespace edgevl {

class Session;
class HtpBackend;

// How Engine::verify runs its rows.
enum class VerifyPath {
  Auto,     // Batch when the binary has batch graphs (any rows, in passes), else Prefill
  Batch,    // decode_batch / head_batch graphs, max_batch() rows per pass
  Prefill,  // the prefill graph (any rows per chunk), then the head over all rows
};

struct EngineOptions {
  int threads = 0;  // 0 = physical cores
  // "cpu", or "htp-v73" / "htp-v75" / "htp-v79" / "htp-v81": the Qualcomm HTP takes the ops it
  // supports (runtime/execution/htp_delegate.h), the CPU the rest.
  std::string backend = "cpu";
};

// What a multimodal prompt adds to rows' evaluation (Qwen3-VL): rotary positions other than
// the rows' own, and DeepStack features added to the hidden states after the first layers.
struct MultimodalRows {
  const int32_t* rope_thw = nullptr;  // [n][3] (t, h, w); null: each axis = position + delta
  int32_t rope_delta = 0;             // rotary position - cache position (after an image)
  const float* deepstack = nullptr;   // [deepstack_layers][n][hidden]; null: none
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
                       float* all_hidden = nullptr, const MultimodalRows& mm = {});
  // DeepStack inputs of the prefill graph (the family's "deepstack.<k>" values): 0 for most.
  int32_t deepstack_layers() const { return int32_t(deepstack_.size()); }
  // The LM head of one final hidden row: vocab_size logits into `logits`.
  void head(const float* hidden_row, float* logits);
  // Host-side embedding lookup (token ids -> float rows [ids.size(), hidden]).
  void embed(std::span<const int32_t> ids, float* out) const;
  // Token rows of one prefill chunk (the prefill graph's width).
  int32_t chunk() const;

  // Batched decode: one step of B = seqs.size() sequences (sessions on this engine, each at
  // most once) in one pass over the weights. Token i is appended to seqs[i] at its own
  // position n_past(); every layer's matmuls run once over the B rows, row i attends over
  // seqs[i]'s KV cache only, then the LM head runs once over the B rows. Writes logits
  // [B][vocab_size] (row i: seqs[i]'s next-token logits) and advances each n_past by 1; the
  // sessions' own logits() are untouched. Everything is checked before anything runs (sizes,
  // token ids, engines, repeats, a full context: the error names the sequence), so a refused
  // step changes no session.
  //
  // Up to max_batch() rows run as one step (the `decode_batch` / `head_batch` graphs of
  // `compile --batch N`); a larger B runs as consecutive steps of at most max_batch() rows. A
  // binary compiled without them (max_batch() = 1) runs each row as a plain decode step.
  //
  // Batch invariance: a sequence's logits are bit-identical whichever sequences share its
  // step, at whatever depths, and identical to Session::eval_tokens / eval_embeddings of the
  // same token (B = 1 runs the width-1 decode and head graphs), on every ISA level, when the
  // LLM's matrices are Q8 or Q4 (presets w8a8, w4a8, w4a16; the LM head Q8 / Q4 with f32 or
  // int8 activations): those kernels compute each row in one fixed order at any row count
  // (cpu::matmul_q8 row_invariant), attention and the elementwise ops run per row. F32, F16
  // and BF16 matrices (presets f32, f16, bf16) take kernels whose summation order changes
  // with the row count: their batched logits agree only to rounding. Tested by
  // batch_decode_test (BatchDecode.*).
  void decode_batch(std::span<Session* const> seqs, std::span<const int32_t> tokens, float* logits);
  // The same with embedding rows ([B][hidden]) instead of token ids.
  void decode_batch_embeddings(std::span<Session* const> seqs, const float* rows, float* logits);
  // Rows one batched step runs (the `decode_batch` graph's width; 1 without it).
  int32_t max_batch() const;

  // Speculative verification: appends `ids` to session s at positions n_past, n_past + 1, ...
  // and writes the logits of every row ([ids.size()][vocab]; row i: the next-token logits
  // after ids[0..i]), the weights read once per pass. The Batch path runs the rows through
  // the decode_batch graph with every row on s's cache (row i's attention sees rows < i, whose
  // keys and values the same Attention op stored before it): for Q8 / Q4 matrices each row is
  // bit-identical to a plain decode step (see decode_batch), which keeps greedy speculation
  // exact; more rows than max_batch() take several passes. The Prefill path runs the prefill
  // graph (causal attention over the rows) and then the head over them, max_batch() rows per
  // head pass; its numerics are the prefill's. Roll back rejected rows with Session::truncate.
  void verify(Session& s, std::span<const int32_t> ids, float* logits,
              VerifyPath path = VerifyPath::Auto);

  // VLMs: one preprocessed tile ([3, size, size] normalised floats) through the vision
  // graph; writes tokens_per_tile rows of llm_hidden floats to `out`.
  void encode_tile(const float* pixels, float* out);

  // Qwen3-VL / Qwen3.5: one image through the vision tower. `pixels`: its grid_h x grid_w patches
  // as rows of 3 * T * P * P values in merge-block order (vision/qwen_vl_preprocess.h). Writes the
  // image's grid_h * grid_w / 4 token rows ([n][hidden]) to `out` and, when `deepstack` is set,
  // each DeepStack feature's rows there ([deepstack_layers()][n][hidden]).
  void encode_qwen_image(const float* pixels, int32_t grid_h, int32_t grid_w, float* out,
                         float* deepstack = nullptr);
  // A video: grid_t temporal groups of grid_h x grid_w patches each (vision/qwen_vl_video.h),
  // `out` [grid_t * n][hidden], `deepstack` [layers][grid_t * n][hidden]. The tower attends
  // within one group only (transformers' cu_seqlens: one sequence per frame) and gives every
  // group the same position embeddings and rotary positions, and the rest of it works row by
  // row: so each group is one encode_qwen_image, and a frame needs no more room than an image.
  void encode_qwen_video(const float* pixels, int32_t grid_t, int32_t grid_h, int32_t grid_w,
                         float* out, float* deepstack = nullptr);
  // The most patches encode_qwen_image takes (0: the model has no Qwen-VL tower).
  int32_t qwen_max_patches() const;

  void set_dump(DumpFn fn) { dump_ = std::move(fn); }
  // Records every op of every graph run into `p` (null: stop); the caller owns it.
  void set_profiler(Profiler* p) { profiler_ = p; }
  // The HTP backend when the engine runs on one (EngineOptions::backend), else null.
  const HtpBackend* htp() const { return htp_.get(); }

 private:
  // Throws unless every sequence is a distinct session of this engine with room for a token.
  void check_batch(std::span<Session* const> seqs) const;

  const Model& model_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<HtpBackend> htp_;  // declared before the runners holding its graphs
  std::vector<std::unique_ptr<GraphRunner>> bound_;
  const GraphRunner* prefill_ = nullptr;
  const GraphRunner* decode_ = nullptr;
  const GraphRunner* head_ = nullptr;
  const GraphRunner* vision_ = nullptr;
  const GraphRunner* qwen_vision_ = nullptr;
  const GraphRunner* decode_batch_ = nullptr;  // both or neither (compile --batch)
  const GraphRunner* head_batch_ = nullptr;
  // Freed with std::free (aligned_alloc): owned here so that a constructor that throws after
  // allocating it (a graph or config it refuses) leaks nothing.
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], FreeDeleter> arena_;
  std::vector<float> hidden_row_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> rope_thw_;  // rows' (t, h, w) when the rotary positions are not the rows'
  std::vector<float*> deepstack_;  // the prefill graph's DeepStack input values
  // Batched decode: token embeddings, final hidden rows (taken out of the arena before the
  // head graph runs in it), and each row's cache.
  std::vector<float> batch_rows_, batch_hidden_;
  std::vector<const KvCaches*> batch_kv_;
  // Verification through the prefill graph: embedding rows and final hidden rows (grown to the
  // largest pass seen, then reused).
  std::vector<float> verify_rows_, verify_hidden_;
  DumpFn dump_;
  Profiler* profiler_ = nullptr;
};

// 64-byte aligned, zeroed bytes for std::free (the arena, KV caches); throws when out of memory.
uint8_t* aligned_zeroed_bytes(size_t n);

}  // namespace edgevl
