#include "app/server/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace edgevl::server {

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

bool Job::wait(std::string* piece, std::chrono::milliseconds timeout,
               std::vector<TokenLogprob>* logprobs) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !text_.empty() || !logprobs_.empty(); });
  *piece += text_;
  text_.clear();
  if (logprobs)
    for (auto& t : logprobs_) logprobs->push_back(std::move(t));
  logprobs_.clear();
  return done_;
}

bool Job::wait_done(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

std::optional<std::pair<int, std::string>> Job::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

GenerateResult Job::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

TurnStats Job::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

double Job::ttft_ms() const {
  std::lock_guard lock(mu_);
  return ttft_ms_;
}

void Job::emit(const std::string& text, std::span<const TokenLogprob> logprobs) {
  {
    std::lock_guard lock(mu_);
    if (first_) {
      first_ = false;
      ttft_ms_ = ms_between(arrived, Clock::now());
    }
    text_ += text;
    if (stream) logprobs_.insert(logprobs_.end(), logprobs.begin(), logprobs.end());
  }
  // A waiter per token only for streams: on 2 cores every wake-up takes time from a compute
  // thread.
  if (stream) cv_.notify_all();
}

void Job::fail(int status, const std::string& message) {
  {
    std::lock_guard lock(mu_);
    error_ = {status, message};
    done_ = true;
  }
  cv_.notify_all();
}

void Job::finish(GenerateResult r, const TurnStats& s) {
  {
    std::lock_guard lock(mu_);
    if (first_) ttft_ms_ = ms_between(arrived, Clock::now());
    result_ = std::move(r);
    stats_ = s;
    done_ = true;
  }
  cv_.notify_all();
}

Scheduler::Scheduler(Engine& engine, VisionEncoder* vision, const SchedulerOptions& o,
                     Metrics& metrics)
    : engine_(engine), vision_(vision), metrics_(metrics), opts_(o) {
  check(o.parallel >= 1 && o.parallel <= 64, "--parallel must be between 1 and 64 (got {})",
        o.parallel);
  check(o.queue >= 0, "--queue must be >= 0 (got {})", o.queue);
  slots_.resize(size_t(o.parallel));
  for (Slot& s : slots_) {
    s.session = std::make_unique<Session>(engine, SessionOptions{0, o.context});
    s.conv = std::make_unique<Conversation>(*s.session, vision);
  }
  context_ = slots_[0].session->context();
  // The batched step's logits: generators read their rows until their next step.
  logits_.resize(size_t(o.parallel) * size_t(engine.model().config().vocab_size));
  step_seqs_.reserve(size_t(o.parallel));
  step_tokens_.reserve(size_t(o.parallel));
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mu_);
    // Room: a free slot, or a place in the queue.
    if (int(queue_.size()) >= opts_.queue + (int(slots_.size()) - running_)) return false;
    queue_.push_back(job);
    metrics_.set_queue(int64_t(queue_.size()), running_);
  }
  cv_.notify_all();
  return true;
}

Scheduler::Slot* Scheduler::pick_slot(const Prompt& p) {
  // The free slot that already holds the longest prefix of this prompt; else the one unused
  // longest (its cached conversation is the least likely to come back).
  Slot* best = nullptr;
  int32_t best_shared = -1;
  for (Slot& s : slots_) {
    if (s.job) continue;
    const int32_t shared = s.conv->shared_prefix(p);
    if (shared > best_shared || (shared == best_shared && s.last_used < best->last_used)) {
      best = &s;
      best_shared = shared;
    }
  }
  return best;
}

void Scheduler::start(Slot& s, std::shared_ptr<Job> job) {
  s.last_used = ++tick_;
  try {
    s.gen = s.conv->start(job->prompt, job->options, &s.stats, /*defer_prefill=*/true);
    s.job = std::move(job);
    s.logprobs_sent = 0;
    s.last_token = Clock::now();
  } catch (const ContextFullError& e) {
    job->fail(400, e.what());
  } catch (const Error& e) {
    job->fail(400, e.what());
  } catch (const std::exception& e) {
    s.conv->reset();
    job->fail(500, e.what());
  }
}

void Scheduler::end(Slot& s) {
  s.conv->finish(*s.gen);
  const TurnStats ts = s.stats;
  GenerateResult& r = s.gen->result();
  metrics_.tokens(r.prompt_tokens, r.reused_tokens, int64_t(r.tokens.size()));
  if (r.stop == StopReason::Cancelled) metrics_.cancelled();
  s.job->finish(std::move(r), ts);
  s.job.reset();
  s.gen.reset();
  release();
}

void Scheduler::release() {
  std::lock_guard lock(mu_);
  --running_;
  metrics_.set_queue(int64_t(queue_.size()), running_);
}

void Scheduler::decode(std::vector<Slot*>& slots) {
  if (slots.empty()) return;
  // One batched step: every slot's next token in one pass over the weights (bit-identical to
  // each alone for quantized LLMs: Engine::decode_batch).
  metrics_.decode_step(int64_t(slots.size()));
  step_seqs_.clear();
  step_tokens_.clear();
  for (Slot* s : slots) {
    step_seqs_.push_back(s->session.get());
    step_tokens_.push_back(s->gen->next_token());
  }
  const size_t vocab = size_t(engine_.model().config().vocab_size);
  engine_.decode_batch(step_seqs_, step_tokens_, logits_.data());
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i]->gen->set_logits({logits_.data() + i * vocab, vocab});
}

void Scheduler::run_beams(Job& job) {
  if (job.cancelled || Clock::now() > job.deadline) {
    metrics_.cancelled();
    GenerateResult r;
    r.stop = StopReason::Cancelled;
    job.finish(std::move(r), {});
    return;
  }
  BeamOptions b = *job.beams;
  // Each beam has a session of its own, allocated (and zeroed) per request: only the positions
  // this search can reach, not the slots' whole context.
  b.context = std::min<int32_t>(context_, int32_t(job.prompt.ids.size()) + b.max_new_tokens);
  b.cancelled = [&job] { return job.cancelled || Clock::now() > job.deadline; };
  // An image or video prompt: its rows as a slot's conversation evaluates them, into the first
  // beam's session (the other beams copy them).
  if (!job.prompt.images.empty())
    b.prefill = [&](Session& s) { return eval_prompt(s, vision_, job.prompt); };
  const Model& m = engine_.model();
  try {
    const BeamResult br = beam_search(engine_, job.prompt.ids, b);
    // The best hypothesis, as `edgevl run --beams` shows it: its EOS left out of the text and
    // the count (a GenerateResult's tokens never hold the stop token), ids past the
    // tokenizer (padding rows of the LM head) without text. Cancelled, the best one finished
    // so far, if any.
    GenerateResult r;
    const BeamHypothesis& best = br.hypotheses.front();
    const std::vector<int32_t>& stops = b.eos_ids.empty() ? m.stop_ids() : b.eos_ids;
    const BeamReply reply = best.finished ? beam_reply(m, best, stops) : BeamReply{};
    r.tokens = reply.tokens;
    r.text = reply.text;
    r.stop = reply.stopped ? StopReason::StopToken : StopReason::Length;
    if (br.cancelled) {
      r.stop = StopReason::Cancelled;
      metrics_.cancelled();
    }
    r.prompt_tokens = int32_t(job.prompt.ids.size());
    r.prefill_ms = br.prefill_ms;
    // Everything after the prompt: the decode steps and the beams' selection and reordering.
    r.decode_ms = br.decode_ms + br.select_ms + br.reorder_ms;
    job.generated = int64_t(r.tokens.size());
    metrics_.decode_step(b.num_beams, std::max(0, br.steps - 1));
    metrics_.tokens(r.prompt_tokens, 0, int64_t(r.tokens.size()));
    if (!r.text.empty()) job.emit(r.text);
    job.finish(std::move(r), {});
  } catch (const Error& e) {
    job.fail(400, e.what());
  } catch (const std::exception& e) {
    job.fail(500, e.what());
  }
}

void Scheduler::loop() {
  std::vector<Slot*> stepping;
  std::string piece;
  const int64_t prefill_chunk = engine_.model().runtime_config().prefill_chunk;
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    {
      std::unique_lock lock(mu_);
      const auto busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.job; });
      };
      const auto free_slots = [&] {
        return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.job; });
      };
      cv_.wait(lock, [&] { return stop_ || busy() || (!queue_.empty() && free_slots() > 0); });
      if (stop_) break;
      for (auto n = free_slots(); n > 0 && !queue_.empty(); --n) {
        // A beam search needs the engine alone: taken only when nothing else runs.
        if (queue_.front()->beams && (busy() || !admitted.empty())) break;
        admitted.push_back(queue_.front());
        queue_.pop_front();
        ++running_;
        if (admitted.back()->beams) break;
      }
      metrics_.set_queue(int64_t(queue_.size()), running_);
    }
    if (admitted.size() == 1 && admitted[0]->beams) {
      run_beams(*admitted[0]);
      release();
      continue;
    }
    for (auto& job : admitted) {
      if (job->cancelled) {
        job->finish({}, {});
        release();
        continue;
      }
      Slot& slot = *pick_slot(job->prompt);
      start(slot, job);          // the prompt is evaluated below, a chunk per step
      if (!slot.job) release();  // it failed
    }
    stepping.clear();
    const auto now = Clock::now();
    for (Slot& s : slots_) {
      if (!s.job) continue;
      if (s.job->cancelled || now > s.job->deadline) s.gen->cancel(StopReason::Cancelled);
      bool more = false;
      try {
        // One chunk of a prompt in progress; the step below runs once it is all in.
        if (s.gen->prefilling() && !s.gen->prefill_continue(prefill_chunk)) continue;
        more = s.gen->step(&piece);
        s.job->generated = int64_t(s.gen->result().tokens.size());
      } catch (const std::exception& e) {
        s.conv->reset();
        s.job->fail(500, e.what());
        s.job.reset();
        s.gen.reset();
        release();
        continue;
      }
      const auto& lp = s.gen->result().logprobs;
      if (!piece.empty() || lp.size() > s.logprobs_sent) {
        s.job->emit(piece, std::span(lp).subspan(s.logprobs_sent));
        s.logprobs_sent = lp.size();
      }
      if (!more) {
        end(s);
        continue;
      }
      metrics_.decode_token(std::chrono::duration<double>(now - s.last_token).count());
      s.last_token = now;
      stepping.push_back(&s);
    }
    try {
      decode(stepping);
    } catch (const std::exception& e) {
      for (Slot* s : stepping) {
        s->conv->reset();
        s->job->fail(500, e.what());
        s->job.reset();
        s->gen.reset();
        release();
      }
    }
  }
  // Shutting down: stop what runs, fail what waits.
  for (Slot& s : slots_)
    if (s.job) {
      s.gen->cancel(StopReason::Cancelled);
      end(s);
    }
  std::lock_guard lock(mu_);
  for (auto& job : queue_) job->fail(503, "the server is shutting down");
  queue_.clear();
}

}  // namespace edgevl::server
