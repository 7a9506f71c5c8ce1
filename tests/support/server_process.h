#pragma once
// `edgevl serve` as a child process on a free loopback port, and the client-side helpers the
// server tests share (request bodies, server-sent event parsing, /metrics readings).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/mapped_file.h"
#include "core/temp_dir.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl::test {

using nlohmann::json;

class ServerProcess {
 public:
  ServerProcess(const std::string& model, std::vector<std::string> args,
                const std::string& env = {}) {
    const std::string port_file = (dir_.path() / "port").string();
    std::vector<std::string> argv = {EDGEVL_CLI, "serve",       "-m",      model, "--port",
                                     "0",        "--port-file", port_file, "-t",  "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    log_ = (dir_.path() / "log").string();
    pid_ = fork();
    if (pid_ == 0) {
      if (!env.empty()) putenv(const_cast<char*>(env.c_str()));
      freopen(log_.c_str(), "w", stderr);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    for (int i = 0; i < 500 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::ifstream f(port_file);
      f >> port_;
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60);
    return c;
  }
  bool wait_ready() const {
    auto c = client();
    for (int i = 0; i < 500; ++i) {
      if (auto r = c.Get("/health"); r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // SIGTERM, then the exit code.
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const { return read_text_file(log_); }

 private:
  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

inline std::string base64(const std::vector<uint8_t>& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t v = uint32_t(in[i]) << 16 | (i + 1 < in.size() ? uint32_t(in[i + 1]) << 8 : 0) |
                       (i + 2 < in.size() ? in[i + 2] : 0);
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[v & 63] : '=';
  }
  return out;
}

// Batched decode is bit-identical to decoding alone for quantized LLMs (Engine::decode_batch):
// the parallel test runs on w8a8.
inline std::string vlm_w8a8() {
  return test::compiled_path(fixtures_dir() / "golden" / "internvl_qwen2", "w8a8").string();
}

inline std::string vlm() {
  return test::compiled_path(fixtures_dir() / "golden" / "internvl_qwen2", "f32").string();
}

inline json chat_body(const std::string& text, int max_tokens, bool stream = false) {
  return {{"messages", json::array({{{"role", "user"}, {"content", text}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},  // random weights may sample a stop token at any point
          {"stream", stream}};
}

inline json post(httplib::Client& c, const std::string& path, const json& body,
                 int* status = nullptr) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response from " << path;
  if (!r) return {};
  if (status) *status = r->status;
  return json::parse(r->body);
}

struct Streamed {
  std::string text, finish;
  json usage;
  // The chunks' logprobs in order: chat's content entries, or completions' token_logprobs.
  json logprobs = json::array();
  bool done = false;
  int chunks = 0;
};

inline Streamed parse_sse(const std::string& body) {
  Streamed s;
  size_t at = 0;
  for (size_t end; (end = body.find("\n\n", at)) != std::string::npos; at = end + 2) {
    const std::string line = body.substr(at, end - at);
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    EXPECT_FALSE(s.done) << "data after [DONE]";
    const json j = json::parse(data);
    ++s.chunks;
    if (j.contains("usage")) s.usage = j["usage"];
    if (j["choices"].empty()) continue;
    const json& ch = j["choices"][0];
    if (ch.contains("delta") && ch["delta"].contains("content"))
      s.text += ch["delta"]["content"].get<std::string>();
    if (ch.contains("text")) s.text += ch["text"].get<std::string>();
    if (ch.contains("logprobs") && !ch["logprobs"].is_null()) {
      const json& lp = ch["logprobs"];
      for (const json& e : lp.contains("content") ? lp["content"] : lp["token_logprobs"])
        s.logprobs.push_back(e);
    }
    if (!ch["finish_reason"].is_null()) s.finish = ch["finish_reason"];
  }
  return s;
}

inline int64_t metric(httplib::Client& c, const std::string& name) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const std::string& b = r->body;
  const size_t at = b.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(b.substr(at + name.size() + 2));
}

// Streams a chat request on a thread; the future is ready at its first chunk, *out at its end.
inline std::thread stream_in_background(const ServerProcess& srv, const json& body,
                                        std::promise<void>* first_chunk, Streamed* out) {
  return std::thread([&srv, body, first_chunk, out] {
    auto c = srv.client();
    bool signalled = false;
    std::string text;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      text.append(d, n);
      if (!signalled) first_chunk->set_value();
      signalled = true;
      return true;
    };
    c.send(req);
    *out = parse_sse(text);
  });
}

}  // namespace edgevl::test
