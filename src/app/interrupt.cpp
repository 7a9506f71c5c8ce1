#include "app/interrupt.h"

#include <csignal>

namespace edgevl::app {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
struct sigaction g_previous {};

// Async-signal-safe: a flag store, or, on the second Ctrl-C, the default action.
void on_sigint(int) {
  if (g_interrupted) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_interrupted = 1;
}

}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read waiting for a line returns EINTR
  sigaction(SIGINT, &sa, &g_previous);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &g_previous, nullptr);
}

bool InterruptScope::interrupted() {
  return g_interrupted != 0;
}

void InterruptScope::clear() {
  g_interrupted = 0;
}

}  // namespace edgevl::app
