#pragma once
// The server's one engine thread: requests wait in a bounded queue, each runs in a slot (a
// session and its conversation, so a follow-up request lands where its prefix is already in
// the KV cache), and the slots' decode steps run together: one batched step over the weights
// for every slot that is generating (Engine::decode_batch). A new prompt is evaluated one
// prefill chunk per step, between the others' decode steps, so a long prompt delays a running
// stream's tokens by one chunk at a time, not by the whole prompt. Request threads
// only parse, decode images and tokenize; they then read the job's text as it grows.
//
// A beam search job (num_beams > 1) runs alone: runtime/beam_search advances its beams as one
// batched decode step of num_beams rows over sessions of its own, a search that cannot yet be
// interleaved step by step with the slots' generators. So it waits at the head of the queue
// (what comes after it waits too, so it is not starved) until every slot's generation has
// ended, then runs to its end while new requests queue (a client gone or --timeout ends it
// at its next step).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/server/metrics.h"
#include "runtime/chat/conversation.h"
#include "runtime/decoding/beam_search.h"

namespace edgevl::server {

using Clock = std::chrono::steady_clock;

struct Job {
  // Set by the request thread before submit().
  Prompt prompt;
  GenerateOptions options;
  Clock::time_point arrived = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();
  bool stream = false;  // the client reads text as it comes (else only the end wakes it)
  // Set: a beam search instead of options' generation (context set by the scheduler). Its text
  // comes whole at the end, also to a stream.
  std::optional<BeamOptions> beams;

  // Set by the client side at any time: the generation stops at the next step.
  std::atomic<bool> cancelled{false};
  // Tokens generated so far (set by the scheduler after each step).
  std::atomic<int64_t> generated{0};

  // Waits up to `timeout` for new text; appends it to `piece` (and the log-probabilities of the
  // tokens generated since the last call to `logprobs`, when asked for). Returns true once the
  // job has finished and everything was taken.
  bool wait(std::string* piece, std::chrono::milliseconds timeout,
            std::vector<TokenLogprob>* logprobs = nullptr);
  // Waits up to `timeout` for the end only (a non-streamed answer: no wake-up per token).
  bool wait_done(std::chrono::milliseconds timeout);
  // After the end: the error (status, message) or the result.
  std::optional<std::pair<int, std::string>> error() const;
  GenerateResult result() const;
  TurnStats stats() const;
  double ttft_ms() const;

  // The scheduler's side.
  void emit(const std::string& text, std::span<const TokenLogprob> logprobs = {});
  void fail(int status, const std::string& message);
  void finish(GenerateResult r, const TurnStats& s);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;  // of tokens emitted and not yet taken
  bool done_ = false;
  bool first_ = true;
  double ttft_ms_ = 0;
  std::optional<std::pair<int, std::string>> error_;
  GenerateResult result_;
  TurnStats stats_;
};

struct SchedulerOptions {
  int parallel = 1;     // slots: conversations generating together
  int queue = 16;       // requests waiting beyond the slots
  int32_t context = 0;  // per slot; 0 = as compiled
};

class Scheduler {
 public:
  Scheduler(Engine& engine, VisionEncoder* vision, const SchedulerOptions& o, Metrics& metrics);
  ~Scheduler();  // cancels what runs, fails what waits, joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // False when the queue is full (the caller answers 429).
  bool submit(const std::shared_ptr<Job>& job);
  int32_t context() const { return context_; }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::unique_ptr<Conversation> conv;
    std::shared_ptr<Job> job;
    std::unique_ptr<Generator> gen;
    TurnStats stats;
    Clock::time_point last_token;
    uint64_t last_used = 0;
    size_t logprobs_sent = 0;  // of the generation's logprobs, handed to the job
  };

  void loop();
  Slot* pick_slot(const Prompt& p);
  void start(Slot& s, std::shared_ptr<Job> job);
  void end(Slot& s);
  void decode(std::vector<Slot*>& slots);
  // A beam search job, on the engine alone (no slot is generating).
  void run_beams(Job& job);
  // A job left its slot (finished, failed) or was dropped before starting.
  void release();

  Engine& engine_;
  VisionEncoder* vision_;
  Metrics& metrics_;
  SchedulerOptions opts_;
  int32_t context_ = 0;
  std::vector<Slot> slots_;
  std::vector<float> logits_;  // [parallel][vocab]
  // One step's sequences and tokens (reserved once: nothing is allocated per token).
  std::vector<Session*> step_seqs_;
  std::vector<int32_t> step_tokens_;
  uint64_t tick_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int running_ = 0;  // jobs taken from the queue and not yet released (the slots' view is
                     // the engine thread's; this one is the submitters')
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace edgevl::server
