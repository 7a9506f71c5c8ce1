#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace edgevl {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Length: return "length";
    case StopReason::StopToken: return "stop_token";
    case StopReason::StopString: return "stop_string";
  }
  return "unknown";
}

void check_fits_context(const Session& s, int64_t prompt_tokens, int64_t n_predict,
                        const std::string& model_path) {
  const int64_t free = s.context() - s.n_past();
  check(prompt_tokens + n_predict <= free,
        "prompt ({} tokens) + generation ({} tokens) = {} exceeds the {} tokens of context "
        "available in {} (context {}, {} used); shorten the prompt, lower -n, or recompile with "
        "a larger --context",
        prompt_tokens, n_predict, prompt_tokens + n_predict, free, model_path, s.context(),
        s.n_past());
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

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

}  // namespace

GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                        const std::function<void(std::string_view)>& on_text,
                        const float* prompt_embeds, int32_t reused) {
  const Model& m = s.model();
  check(!prompt.empty(), "empty prompt: nothing to condition on (a model without BOS needs text)");
  check(o.n_predict >= 0, "-n must be >= 0");
  check(reused >= 0 && reused < int32_t(prompt.size()) && s.n_past() == reused,
        "internal: {} reused prompt tokens of {} with {} in the session", reused, prompt.size(),
        s.n_past());
  const auto fresh = prompt.subspan(size_t(reused));
  check_fits_context(s, int64_t(fresh.size()), o.n_predict, m.file().path());

  GenerateResult r;
  r.prompt_tokens = int32_t(prompt.size());
  r.reused_tokens = reused;
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  history.reserve(prompt.size() + size_t(o.n_predict));
  Sampler sampler(o.sampling);
  text::StreamDecoder decoder(m.tokenizer());
  StopStringFilter filter(o.stop_strings);
  auto emit = [&](const std::string& t) {
    if (t.empty()) return;
    r.text += t;
    if (on_text) on_text(t);
  };

  auto t0 = Clock::now();
  std::span<const float> logits = prompt_embeds
                                      ? s.eval_embeddings(prompt_embeds, int64_t(fresh.size()))
                                      : s.eval_tokens(fresh);
  r.prefill_ms = ms_since(t0);
  auto t1 = Clock::now();
  const auto& stops = m.stop_ids();
  std::string piece;
  bool stopped_by_string = false;
  for (int32_t i = 0; i < o.n_predict; ++i) {
    const int32_t tok = sampler.sample(logits, history);
    if (!o.ignore_eos && std::find(stops.begin(), stops.end(), tok) != stops.end()) {
      r.stop = StopReason::StopToken;
      break;
    }
    r.tokens.push_back(tok);
    history.push_back(tok);
    if (filter.push(decoder.push(tok), &piece)) {
      emit(piece);
      r.stop = StopReason::StopString;
      stopped_by_string = true;
      break;
    }
    emit(piece);
    if (i + 1 < o.n_predict) logits = s.eval_tokens(std::span<const int32_t>(&tok, 1));
  }
  if (!stopped_by_string) {
    filter.push(decoder.flush(), &piece);
    emit(piece);
    emit(filter.flush());
  }
  r.decode_ms = ms_since(t1);
  return r;
}

}  // namespace edgevl
