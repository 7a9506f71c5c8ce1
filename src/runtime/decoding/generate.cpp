#include "runtime/decoding/generate.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/error.h"

namespace edgevl {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Length: return "length";
    case StopReason::StopToken: return "stop_token";
    case StopReason::StopString: return "stop_string";
    case StopReason::Cancelled: return "cancelled";
  }
  return "unknown";
}

void check_fits_context(const Session& s, int64_t prompt_tokens, int64_t n_predict,
                        const std::string& model_path) {
  const int64_t free = s.context() - s.n_past();
  if (prompt_tokens + n_predict > free)
    throw ContextFullError(fmt::format(
        "prompt ({} tokens) + generation ({} tokens) = {} exceeds the {} tokens of context "
        "available in {} (context {}, {} used); shorten the prompt, lower -n, or recompile with "
        "a larger --context",
        prompt_tokens, n_predict, prompt_tokens + n_predict, free, model_path, s.context(),
        s.n_past()));
}

// A named namespace, not an anonymous one: Generator::Text (external linkage) holds one.
namespace detail {

// Holds back the tail of the text that could still become a stop string, so a stop string
// is never shown to the user, even when it spans several tokens.
class StopStringFilter {
 public:
  explicit StopStringFilter(const std::vector<std::string>& stops) : stops_(stops) {
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size());
  }
  // Appends text; returns true when a stop string appeared (text is cut before it).
  bool push(std::string_view piece, std::string* emit) {
    pending_ += piece;
    for (const auto& s : stops_) {
      const size_t at = s.empty() ? std::string::npos : pending_.find(s);
      if (at != std::string::npos) {
        *emit = pending_.substr(0, at);
        pending_.clear();
        return true;
      }
    }
    size_t keep = hold_ > 0 ? hold_ - 1 : 0;
    if (pending_.size() > keep) {
      size_t cut = pending_.size() - keep;
      // Never split a UTF-8 sequence: move the cut back to a character boundary.
      while (cut > 0 && cut < pending_.size() && (uint8_t(pending_[cut]) & 0xC0) == 0x80) --cut;
      *emit = pending_.substr(0, cut);
      pending_.erase(0, cut);
    } else {
      emit->clear();
    }
    return false;
  }
  std::string flush() { return std::exchange(pending_, {}); }

 private:
  const std::vector<std::string>& stops_;
  size_t hold_ = 0;
  std::string pending_;
};

}  // namespace detail

struct Generator::Text {
  Text(const text::Tokenizer& t, const std::vector<std::string>& stops)
      : decoder(t), filter(stops) {}
  text::StreamDecoder decoder;
  detail::StopStringFilter filter;
};

namespace {
// Stop strings could cut a constrained document short (a string value may spell one), so
// with a constraint the document's own end is the only stop besides the stop tokens.
GenerateOptions effective_options(const GenerateOptions& o) {
  GenerateOptions r = o;
  if (r.constraint) r.stop_strings.clear();
  return r;
}
}  // namespace

Generator::Generator(Session& s, const GenerateOptions& o)
    : s_(s),
      o_(effective_options(o)),
      text_(std::make_unique<Text>(s.model().tokenizer(), o_.stop_strings)),
      sampler_(o.sampling) {
  check(o.n_predict >= 0, "-n must be >= 0");
  validate_sampler_params(o.sampling, s.model().config().vocab_size);
  if (const auto& c = o_.constraint) {
    check(!o_.speculative.enabled(),
          "constrained output (a JSON schema or a grammar) cannot be combined with speculative "
          "decoding "
          "(--lookup / --draft)");
    check(c->vocabulary().size() == s.model().tokenizer().vocab_size(),
          "internal: the constraint was built over a vocabulary of {} tokens, the model has {}",
          c->vocabulary().size(), s.model().tokenizer().vocab_size());
    const int32_t need = c->min_tokens(c->start());
    check(need != TokenConstraint::kUnreachable,
          "the model's vocabulary cannot spell any document the output constraint (JSON schema or "
          "grammar) allows");
    check(need <= o_.n_predict,
          "the shortest document the output constraint (JSON schema or grammar) allows takes {} "
          "tokens of this model; -n / "
          "max_tokens {} is too small",
          need, o_.n_predict);
    cstate_ = c->start();
  }
}

Generator::~Generator() = default;

void Generator::prefill(std::span<const int32_t> prompt, const float* prompt_embeds,
                        int32_t reused) {
  prefill_begin(prompt, {}, reused);
  embeds_ptr_ = prompt_embeds;  // borrowed for this call only
  prefill_continue(pending_);
  embeds_ptr_ = nullptr;
}

void Generator::prefill_begin(std::span<const int32_t> prompt, std::vector<float> prompt_embeds,
                              int32_t reused, PromptMultimodal mm) {
  const Model& m = s_.model();
  check(!prompt.empty(), "empty prompt: nothing to condition on (a model without BOS needs text)");
  check(reused >= 0 && reused < int32_t(prompt.size()) && s_.n_past() == reused,
        "internal: {} reused prompt tokens of {} with {} in the session", reused, prompt.size(),
        s_.n_past());
  const auto fresh = prompt.subspan(size_t(reused));
  check_fits_context(s_, int64_t(fresh.size()), o_.n_predict, m.file().path());
  r_.prompt_tokens = int32_t(prompt.size());
  r_.reused_tokens = reused;
  history_.assign(prompt.begin(), prompt.end());
  history_.reserve(prompt.size() + size_t(o_.n_predict));
  prompt_fresh_.assign(fresh.begin(), fresh.end());
  embeds_ = std::move(prompt_embeds);
  embeds_ptr_ = embeds_.empty() ? nullptr : embeds_.data();
  const size_t cols = size_t(m.config().hidden);
  check(mm.rope_thw.empty() || (!embeds_.empty() && mm.rope_thw.size() == 3 * fresh.size() &&
                                mm.deepstack.size() == size_t(mm.layers) * fresh.size() * cols),
        "internal: multimodal prompt rows do not match its {} fresh positions", fresh.size());
  mm_ = std::move(mm);
  evaluated_ = 0;
  pending_ = fresh_ = int64_t(fresh.size());
  r_.prefill_ms = 0;
}

bool Generator::prefill_continue(int64_t max_tokens) {
  if (pending_ == 0) return true;
  check(max_tokens > 0, "internal: prefill_continue of {} tokens", max_tokens);
  const int64_t n = std::min(max_tokens, pending_);
  const auto t0 = Clock::now();
  const int64_t cols = s_.model().config().hidden;
  if (embeds_ptr_ && !mm_.rope_thw.empty()) {
    // Image rows: their 3D positions, and the DeepStack rows of these n positions
    // ([layers][n][hidden], cut out of the whole prompt's when it runs in pieces).
    const float* ds = nullptr;
    if (mm_.layers > 0 && n == fresh_) {
      ds = mm_.deepstack.data();
    } else if (mm_.layers > 0) {
      deepstack_chunk_.resize(size_t(mm_.layers) * size_t(n) * size_t(cols));
      for (int64_t k = 0; k < mm_.layers; ++k)
        std::copy_n(mm_.deepstack.begin() + (k * fresh_ + evaluated_) * cols, n * cols,
                    deepstack_chunk_.begin() + k * n * cols);
      ds = deepstack_chunk_.data();
    }
    logits_ = s_.eval_multimodal(embeds_ptr_ + evaluated_ * cols, n,
                                 mm_.rope_thw.data() + 3 * evaluated_, ds);
  } else {
    logits_ =
        embeds_ptr_
            ? s_.eval_embeddings(embeds_ptr_ + evaluated_ * cols, n)
            : s_.eval_tokens(
                  std::span<const int32_t>(prompt_fresh_).subspan(size_t(evaluated_), size_t(n)));
  }
  r_.prefill_ms += ms_since(t0);
  evaluated_ += n;
  pending_ -= n;
  if (pending_ > 0) {
    logits_ = {};  // not the prompt's last position: nothing to sample from yet
    return false;
  }
  prompt_fresh_ = {};
  embeds_ = {};
  mm_ = {};
  deepstack_chunk_ = {};
  t_decode_ = Clock::now();
  if (o_.n_predict == 0) done_ = true;
  return true;
}

bool Generator::step(std::string* emit) {
  emit->clear();
  if (done_) return false;
  check(pending_ == 0, "internal: Generator::step during a prefill ({} tokens left)", pending_);
  check(!logits_.empty(), "internal: Generator::step without logits (prefill or set_logits)");
  std::span<const float> logits = logits_;
  if (const auto& c = o_.constraint) {
    const auto t0 = Clock::now();
    c->mask(cstate_, o_.n_predict - steps_, logits_, &masked_);
    if (!o_.ignore_eos && c->accepting(cstate_))
      for (const int32_t id : s_.model().stop_ids())
        if (size_t(id) < masked_.size()) masked_[size_t(id)] = logits_[size_t(id)];
    logits = masked_;
    r_.constraint_ms += ms_since(t0);
    ++r_.constraint_steps;
  }
  const auto spelled = spelled_logits(s_.model(), logits);
  const int32_t tok = sampler_.sample(spelled, history_);
  if (o_.logprobs >= 0) {
    sampler_.adjust(spelled, history_, &adjusted_);
    sampled_ = token_logprob(adjusted_, tok, o_.logprobs);
  }
  logits_ = {};
  return accept(tok, emit);
}

bool Generator::accept(int32_t tok, std::string* emit) {
  emit->clear();
  if (done_) return false;
  const auto& stops = s_.model().stop_ids();
  if (!o_.ignore_eos && std::find(stops.begin(), stops.end(), tok) != stops.end()) {
    check(!o_.constraint || o_.constraint->accepting(cstate_),
          "internal: stop token {} before the constrained document is complete", tok);
    r_.stop = StopReason::StopToken;
    finish(emit);
    return false;
  }
  if (const auto& c = o_.constraint) {
    const int32_t next = c->advance(cstate_, tok);
    // The mask never offers such a token: a caller choosing tokens itself, or a logit bias
    // that banned every allowed one (the sampler then falls back to a masked token).
    check(next != 0 && c->min_tokens(next) <= o_.n_predict - steps_ - 1,
          "token {} is not allowed by the output constraint here (does a logit bias ban every "
          "token the constraint allows?)",
          tok);
    cstate_ = next;
  }
  r_.tokens.push_back(tok);
  history_.push_back(tok);
  if (sampled_ && sampled_->id == tok) r_.logprobs.push_back(std::move(*sampled_));
  sampled_.reset();
  if (text_->filter.push(text_->decoder.push(tok), emit)) {
    r_.text += *emit;
    r_.stop = StopReason::StopString;
    done_ = true;
    r_.decode_ms = ms_since(t_decode_);
    return false;
  }
  r_.text += *emit;
  ++steps_;
  if (o_.constraint && o_.constraint->complete(cstate_)) {
    r_.stop = StopReason::StopToken;  // nothing may follow the document: end as a stop token
    finish(emit);
    return false;
  }
  if (steps_ >= o_.n_predict) {
    r_.stop = StopReason::Length;
    finish(emit);
    return false;
  }
  next_ = tok;
  return true;
}

void Generator::finish(std::string* emit) {
  // The decoder's held-back bytes, then whatever the stop filter still holds.
  std::string piece;
  text_->filter.push(text_->decoder.flush(), &piece);
  piece += text_->filter.flush();
  *emit += piece;
  r_.text += piece;
  done_ = true;
  r_.decode_ms = ms_since(t_decode_);
}

void Generator::cancel(StopReason why) {
  if (done_) return;
  r_.stop = why;
  done_ = true;
  if (pending_ > 0) {  // stopped during the prompt: part of it is in the session, no decode
    pending_ = 0;
    prompt_fresh_ = {};
    embeds_ = {};
    mm_ = {};
    return;
  }
  r_.decode_ms = ms_since(t_decode_);
}

}  // namespace edgevl
