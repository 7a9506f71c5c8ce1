#pragma once
// The Python module `edgevl._edgevl`: a binding over the runtime's entry point
// (runtime/assistant.h), as the C API is. The pure-Python package (python/edgevl/) shapes the
// OpenAI-style API on top of these pieces:
//   PyModel  an Assistant behind a lock (one forward pass at a time), its drafts, its images;
//   PyChat   a Chat on it (a session whose KV cache keeps the shared prefix between calls);
//   Request  one generation asked for (chat messages or a raw prompt, and its options);
//   Stream   a generation running on a worker thread, read piece by piece from Python.
// Generation always runs with the GIL released; the token callback takes it back only to look
// for a pending signal (Ctrl-C), so a KeyboardInterrupt ends a generation between two tokens.
#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/assistant.h"
#include "runtime/decoding/speculative.h"

namespace edgevl::python {

namespace py = pybind11;

struct PyModel {
  std::unique_ptr<Assistant> assistant;
  std::string path;
  std::mutex mu;                   // held by whoever drives the engine (Assistant: one caller)
  std::atomic<int> generating{0};  // generations running now (tests and progress displays)
  // Draft models for speculative decoding, loaded at their first use (guarded by mu).
  std::map<std::string, std::pair<std::unique_ptr<Model>, std::unique_ptr<DraftModel>>> drafts;
};

struct PyImage {
  ImageRef ref;
};

struct PyChat {
  std::shared_ptr<PyModel> model;
  std::unique_ptr<Chat> chat;
};

// One generation: a chat turn (messages through the template) or a raw prompt, with options.
struct Request {
  bool raw = false;
  std::vector<Message> messages;  // !raw
  bool thinking = true;
  Prompt prompt;  // raw: the ids to continue
  std::optional<int32_t> max_tokens;
  GenerateOptions options;
  std::string draft;  // a draft model's path (speculative decoding)
  int32_t beams = 1;
  BeamOptions beam;
};

// What a generation gave, and what it cost.
struct Outcome {
  GenerateResult result;
  ReplyStats stats;
  bool beams = false;
  float beam_score = 0;
  std::shared_ptr<const TokenConstraint> constraint;  // the request's, for its statistics
};

// How a running generation reports: text pieces (false: stop), and a poll where no text comes
// (beam search steps; false: stop).
struct Sink {
  std::function<bool(std::string_view)> text;
  std::function<bool()> keep_going;
};

// Options from keyword arguments (the names of the Python API); unknown names raise TypeError.
Request make_request(PyModel& m, const py::dict& options);
// Runs `r` on `c`: the caller holds the model's lock and has released the GIL.
Outcome execute(PyChat& c, Request& r, const Sink& sink);
py::dict outcome_dict(const Outcome& o);

// A generation on a worker thread; next() hands its text pieces over one by one.
class Stream {
 public:
  Stream(std::shared_ptr<PyChat> chat, Request r);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // The next piece, or nullopt once the generation ended (then result() is ready). Waits with
  // the GIL released; a pending signal (Ctrl-C) cancels the generation and raises.
  std::optional<std::string> next();
  py::dict result();
  // Stops the generation (the session stays usable) and waits for the worker.
  void cancel();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> pieces;
    bool done = false;
    std::exception_ptr error;
    Outcome outcome;
    std::atomic<bool> cancel{false};
  };
  void join();

  std::shared_ptr<PyChat> chat_;
  std::shared_ptr<State> st_;
  std::thread worker_;
  bool finished_ = false;
};

// Text from the runtime as a Python str; bytes that are not UTF-8 (a detokenized id run can
// end inside a character) become U+FFFD instead of failing.
inline py::str to_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

void bind_model(py::module_& m);
void bind_generation(py::module_& m);
void bind_tools(py::module_& m);

}  // namespace edgevl::python
