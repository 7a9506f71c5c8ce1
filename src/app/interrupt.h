#pragma once
// Ctrl-C in the interactive commands. While an InterruptScope lives, the first SIGINT only sets
// a flag: `run` stops generating at the next token and still prints its summary (and its
// --json object, stop_reason "interrupted"); `chat` ends the reply and keeps the conversation.
// A second SIGINT before the flag is cleared ends the process as Ctrl-C normally does, so a
// command stuck in a long prefill or image encode can still be left at once. Blocking reads
// (chat's prompt) fail with EINTR instead of restarting, so Ctrl-C at the prompt is seen too.
namespace edgevl::app {

class InterruptScope {
 public:
  InterruptScope();  // installs the handler (the previous one comes back on destruction)
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  static bool interrupted();  // a SIGINT arrived since the last clear()
  static void clear();
};

}  // namespace edgevl::app
