#include "runtime/decoding/token_loop.h"

#include <string>

#include "runtime/decoding/speculative.h"
#include "runtime/execution/session.h"

namespace edgevl {

GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                        const std::function<void(std::string_view)>& on_text,
                        const float* prompt_embeds, int32_t reused) {
  Generator g(s, o);
  g.prefill(prompt, prompt_embeds, reused);
  run_to_end(g, [&](std::string_view t) {
    if (on_text) on_text(t);
    return true;
  });
  return std::move(g.result());
}

void run_to_end(Generator& g, const std::function<bool(std::string_view)>& on_text) {
  // A false from the caller cancels; the generator's next accept() then ends either loop.
  auto emit = [&](std::string_view t) {
    if (!t.empty() && on_text && !on_text(t)) g.cancel(StopReason::Cancelled);
  };
  if (g.options().speculative.enabled()) return run_speculative(g, g.options().speculative, emit);
  std::string piece;
  for (;;) {
    const bool more = g.step(&piece);
    emit(piece);
    if (!more || g.done()) break;
    const int32_t tok = g.next_token();
    g.set_logits(g.session().eval_tokens(std::span<const int32_t>(&tok, 1)));
  }
}

}  // namespace edgevl
