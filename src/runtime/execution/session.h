#pragma once
// One conversation's state: its KV cache, how much of it is filled, and its logits. The
// graphs run on an Engine (runtime/execution/engine.h), which many sessions may share one step at a
// time; a session made from a Model owns an engine of its own (the simple single-stream
// case). KV buffers are sized at construction: nothing is allocated per token.
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/execution/engine.h"

namespace edgevl {

struct SessionOptions {
  int threads = 0;              // 0 = physical cores (only when the session owns its engine)
  int32_t context = 0;          // 0 = as compiled; may only lower it
  std::string backend = "cpu";  // EngineOptions::backend (only when the session owns its engine)
};

// Where a session was, to come back to (Session::mark / rewind): its position and, for a model
// with recurrent state, that state's copy (the KV rows before the position stay in the caches).
struct SessionMark {
  int32_t n_past = -1;  // -1: never marked
  std::vector<float> state;
};

class Session {
 public:
  // With an engine of its own.
  explicit Session(const Model& model, SessionOptions opts = {});
  // On a shared engine (opts.threads is the engine's business and ignored here).
  explicit Session(Engine& engine, SessionOptions opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return engine_.model(); }
  Engine& engine() { return engine_; }
  int32_t context() const { return context_; }
  int32_t n_past() const { return n_past_; }
  int threads() const { return engine_.threads(); }
  void reset();
  // Forgets every position from `n` on (a shared prefix is kept; what follows is recomputed).
  // A model with recurrent state (has_recurrent_state) cannot go back to a position in the
  // middle: only n == n_past() (nothing to do) and n == 0 (a reset) are accepted, anything
  // else throws rather than continue from a state that holds the forgotten tokens.
  void truncate(int32_t n);
  // Whether the model keeps a fixed-size recurrent state per sequence (Gated DeltaNet layers)
  // besides its KV caches.
  bool has_recurrent_state() const { return !state_floats_.empty(); }
  // Records the current position (and the recurrent state: its size per sequence, e.g. 20 MB
  // for Qwen3.5-0.8B, copied into m's buffer, reused across calls).
  void mark(SessionMark* m) const;
  // Back to a mark of this session: the positions after it are forgotten and the recurrent
  // state is the mark's. Valid while the rows before the mark are unchanged since it was made
  // (no truncate or rewind below it, no reset): what speculative decoding needs to roll a
  // hybrid model back to the accepted position. Throws for a mark past n_past().
  void rewind(const SessionMark& m);
  // Marks *m (as mark()) when an evaluation of rows ends exactly at position `pos`: a prompt's
  // end, so that a later prompt continuing it can rewind there. One request at a time; dropped
  // when evaluation passes `pos` without ending there, by reset() and by a null `m`.
  void mark_when_at(int32_t pos, SessionMark* m) { pending_mark_ = {pos, m}; }

  // Makes this session hold `src`'s first n positions (n <= src.n_past()), copying only the KV
  // rows [keep, n): the caller vouches that the rows before `keep` (keep <= n_past(), <= n)
  // already hold the same tokens, e.g. a shared prompt. How beam search gives a beam's history
  // to another beam's session without copying whole caches. Both sessions must come from the
  // same model (their contexts may differ); `src` is not changed. logits() are not copied.
  // With recurrent state only the whole of src (n == src.n_past()) can be copied: its state
  // is copied with the KV rows; a shorter prefix throws.
  void copy_prefix_from(const Session& src, int32_t n, int32_t keep = 0);

  // Appends tokens to the context; returns the logits after the last one.
  std::span<const float> eval_tokens(std::span<const int32_t> ids);
  // Appends embedding rows ([n, hidden]); returns the logits after the last one.
  std::span<const float> eval_embeddings(const float* rows, int64_t n);
  // Appends rows with their rotary positions given (rope_thw [n][3]: t, h, w; an image's 2D
  // positions in Qwen3-VL's MRoPE) and, for a DeepStack model, the features added to the
  // hidden states after its first layers ([engine().deepstack_layers()][n][hidden], zero rows
  // on text; null: none). Later rows continue at the largest position + 1 (rope_delta()).
  std::span<const float> eval_multimodal(const float* rows, int64_t n, const int32_t* rope_thw,
                                         const float* deepstack);
  // Rotary position minus cache position of the next row: 0 for text, negative after an image.
  int32_t rope_delta() const { return rope_shifts_.empty() ? 0 : rope_shifts_.back().delta; }
  // When set, eval_* also computes the logits of every position into all_logits().
  void set_all_logits(bool on) { all_logits_on_ = on; }
  const std::vector<float>& all_logits() const { return all_logits_; }

  // The per-layer caches as the executor addresses them.
  const KvCaches& kv() const { return kv_; }

 private:
  void init(SessionOptions opts);
  // Engine::decode_batch advances n_past_ of the sessions it ran.
  friend class Engine;

  std::unique_ptr<Engine> owned_;
  Engine& engine_;
  int32_t context_ = 0;
  int32_t n_past_ = 0;
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<uint8_t*> k_cache_, v_cache_;
  std::unique_ptr<uint8_t[], FreeDeleter> kv_block_;
  KvCaches kv_;
  // Recurrent state (KvCaches::conv / delta): one zeroed block, per layer pointers into it.
  std::vector<float> state_floats_;
  std::vector<float*> conv_state_, delta_state_;
  std::vector<float> embed_rows_, logits_, all_logits_, hidden_rows_;
  // Where multimodal rows changed rope_delta(): `delta` holds after the rows, and `start` is
  // the first row whose positions left the text's (an image's first token); kept in order,
  // cut by truncate().
  struct RopeShift {
    int32_t start = 0, delta = 0;
  };
  std::vector<RopeShift> rope_shifts_;
  struct PendingMark {
    int32_t pos = -1;
    SessionMark* mark = nullptr;
  } pending_mark_;
  bool all_logits_on_ = false;
};

}  // namespace edgevl
