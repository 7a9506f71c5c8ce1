// The CLI as a person types it: Ctrl-C in `run` (the summary and the --json object still come,
// stop reason "interrupted") and in `chat` through a real pseudo-terminal (the reply stops, the
// conversation goes on, Ctrl-C at the prompt leaves), `run` without a prompt, mistyped
// subcommands, flags and chat commands named with the closest valid one.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/temp_dir.h"
#include "support/model_fixture.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

using test::run_cli;
using Clock = std::chrono::steady_clock;

// A random-weight Qwen2-0.5B cut to 2 layers: its f32 LM head makes each token take a few ms,
// so a long reply is still running when the test presses Ctrl-C.
class CliInteractive : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string ckpt = test::shell_quote(dir_->path() / "q");
    auto r = run_cli("synth --arch qwen2-0.5b --layers 2 --out " + ckpt);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_cli("compile " + ckpt + " -o " + test::shell_quote(model()) + " --quant f32 -q");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path model() { return dir_->path() / "q.evb"; }
  static TempDir* dir_;
};
TempDir* CliInteractive::dir_ = nullptr;

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> v;
  for (auto& a : args) v.push_back(a.data());
  v.push_back(nullptr);
  return v;
}

// Reads what is ready on `fd` into *out for up to `ms`; false at end of file.
bool read_for(int fd, std::string* out, int ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;  // EOF (a pty master reads EIO once the child is gone)
    out->append(buf, size_t(n));
  }
}

// Reads until `text` appears after `from` (true) or `ms` pass / the stream ends (false).
bool read_until(int fd, std::string* out, const std::string& text, size_t from, int ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (out->find(text, from) == std::string::npos) {
    if (Clock::now() > end) return false;
    if (!read_for(fd, out, 50) && out->find(text, from) == std::string::npos) return false;
  }
  return true;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `edgevl run` with stdout and stderr on pipes; Ctrl-C (SIGINT) once `ready` says so.
struct RunResult {
  int exit_code;
  std::string out, err;
};
RunResult run_and_interrupt(std::vector<std::string> args, bool wait_for_text) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  args.insert(args.begin(), EDGEVL_CLI);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    execv(EDGEVL_CLI, argv_of(args).data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  RunResult r;
  if (wait_for_text)
    read_until(out[0], &r.out, " ", 0, 60000);  // generated text is streaming
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGINT);
  while (read_for(out[0], &r.out, 100)) {
  }
  while (read_for(err[0], &r.err, 100)) {
  }
  close(out[0]);
  close(err[0]);
  r.exit_code = wait_exit(pid);
  return r;
}

TEST_F(CliInteractive, CtrlCStopsRunWithItsSummary) {
  const RunResult text = run_and_interrupt(
      {"run", "-m", model().string(), "-p", "hello", "-n", "2000", "--ignore-eos", "--temp", "0"},
      true);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find("stop: interrupted"), std::string::npos) << text.err;

  const RunResult js = run_and_interrupt({"run", "-m", model().string(), "-p", "hello", "-n",
                                          "2000", "--ignore-eos", "--temp", "0", "--json"},
                                         false);
  EXPECT_EQ(js.exit_code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["stop_reason"], "interrupted");
  EXPECT_GE(j["tokens"].size(), 1u);
  EXPECT_LT(j["tokens"].size(), 2000u);
}

// A person at a terminal: the chat's reply stops at Ctrl-C and the chat goes on (an unknown
// /command is refused with the list), then Ctrl-C at the prompt ends it with status 0.
TEST_F(CliInteractive, CtrlCInChatThroughAPseudoTerminal) {
  int master = -1;
  std::vector<std::string> args = {
      EDGEVL_CLI, "chat", "-m", model().string(), "-n", "2000", "--temp", "0", "-t", "2"};
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execv(EDGEVL_CLI, argv_of(args).data());
    _exit(127);
  }
  std::string screen;
  ASSERT_TRUE(read_until(master, &screen, "> ", 0, 60000)) << screen;
  const auto type = [&](const std::string& s) {
    ASSERT_EQ(write(master, s.data(), s.size()), ssize_t(s.size()));
  };
  size_t mark = screen.size();
  type("tell me a long story\n");
  read_for(master, &screen, 1500);  // the reply streams
  type("\x03");                     // Ctrl-C, as the terminal sends it
  EXPECT_TRUE(read_until(master, &screen, "(stopped", mark, 30000)) << screen;
  mark = screen.find("(stopped", mark);
  ASSERT_TRUE(read_until(master, &screen, "> ", mark, 30000)) << screen;
  mark = screen.size();
  type("/bogus\n");
  EXPECT_TRUE(read_until(master, &screen, "unknown command /bogus", mark, 30000)) << screen;
  EXPECT_TRUE(read_until(master, &screen, "/image PATH", mark, 30000)) << screen;
  ASSERT_TRUE(read_until(master, &screen, "> ", mark, 30000)) << screen;
  mark = screen.size();
  // The conversation went on: a second turn is answered and shows its reuse line.
  type("and then?\n");
  read_for(master, &screen, 500);
  type("\x03");
  EXPECT_TRUE(read_until(master, &screen, "(stopped", mark, 30000)) << screen;
  ASSERT_TRUE(read_until(master, &screen, "> ", screen.find("(stopped", mark), 30000)) << screen;
  type("\x03");  // at the prompt: the chat ends
  while (read_for(master, &screen, 200)) {
  }
  close(master);
  EXPECT_EQ(wait_exit(pid), 0) << screen;
}

TEST_F(CliInteractive, RunWithoutAPromptIsAnError) {
  auto r = run_cli("run -m " + test::shell_quote(model()) + " -n 4");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("run needs a prompt: -p TEXT or -f FILE"), std::string::npos) << r.err;
  r = run_cli("run -m " + test::shell_quote(model()) + " -p '' -n 2 --temp 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;  // an explicit empty prompt is a prompt
}

TEST(CliNames, UnknownSubcommandAndOptionNameTheClosest) {
  auto r = run_cli("runn -m x.evb");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown command 'runn'; did you mean 'run'?"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("commands: compile"), std::string::npos) << r.err;
  r = run_cli("run -m x.evb -p hi --tmep 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("run: unknown option '--tmep'; did you mean '--temp'?"), std::string::npos)
      << r.err;
  r = run_cli("serve -m x.evb --paralel 2");
  EXPECT_NE(r.err.find("did you mean '--parallel'?"), std::string::npos) << r.err;
  r = run_cli("frobnicate");
  EXPECT_NE(r.err.find("unknown command 'frobnicate' (commands:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace edgevl
