// Generation from Python: the options (the CLI's sampling, stop, speculative, constraint and
// beam settings under the Python API's names), a turn or a raw prompt run on a Chat, blocking or
// streamed from a worker thread, and Ctrl-C between two tokens.
#include <pybind11/stl.h>

#include <chrono>

#include "bindings.h"
#include "core/error.h"
#include "runtime/constraints/grammar_constraint.h"
#include "runtime/constraints/json_schema_reader.h"

namespace edgevl::python {
namespace {

// Counts a running generation for PyModel::generating.
struct Busy {
  explicit Busy(std::atomic<int>& n) : n_(n) { ++n_; }
  ~Busy() { --n_; }
  std::atomic<int>& n_;
};

template <class T>
T option(const std::string& key, const py::handle& v, const char* what) {
  try {
    return v.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(fmt::format("{} must be {} (got {})", key, what,
                                     std::string(py::str(py::type::handle_of(v)))));
  }
}

std::vector<std::string> strings(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::str>(v)) return {v.cast<std::string>()};
  return option<std::vector<std::string>>(key, v, "a string or a list of strings");
}

DraftModel* draft_for(PyModel& m, const std::string& path) {
  auto& slot = m.drafts[path];
  if (!slot.second) {
    slot.first = std::make_unique<Model>(path);
    slot.second = std::make_unique<DraftModel>(*slot.first, m.assistant->model(),
                                               SessionOptions{m.assistant->engine().threads(), 0});
  }
  return slot.second.get();
}

std::vector<Message> to_messages(const py::list& messages) {
  std::vector<Message> out;
  for (const py::handle& h : messages) {
    const auto t = option<py::tuple>("a message", h, "a (role, content, images) tuple");
    check(t.size() == 3, "a message is a (role, content, images) tuple");
    Message msg{t[0].cast<std::string>(), t[1].cast<std::string>(), {}};
    for (const py::handle& img : t[2]) msg.images.push_back(img.cast<PyImage&>().ref);
    out.push_back(std::move(msg));
  }
  check(!out.empty(), "messages must not be empty");
  return out;
}

Prompt raw_prompt(const PyModel& m, const py::object& prompt, bool add_bos) {
  if (py::isinstance<py::str>(prompt))
    return m.assistant->raw_prompt(prompt.cast<std::string>(), add_bos);
  Prompt p;
  p.ids = option<std::vector<int32_t>>("prompt", prompt, "a string or a list of token ids");
  const int32_t vocab = m.assistant->model().tokenizer().vocab_size();
  for (int32_t id : p.ids)
    check(id >= 0 && id < vocab, "prompt: token id {} is outside the vocabulary (0..{})", id,
          vocab - 1);
  return p;
}

// Runs `r` in the calling thread with the GIL released. Between tokens the callback takes the
// GIL back only to run Python's pending signal handlers: Ctrl-C ends the generation there (the
// session keeps what was evaluated, as after any stop) and raises KeyboardInterrupt.
py::dict run_blocking(PyChat& c, Request& r) {
  bool interrupted = false;
  Outcome out;
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(c.model->mu);
    Busy busy(c.model->generating);
    const auto keep_going = [&] {
      py::gil_scoped_acquire gil;
      if (!interrupted && PyErr_CheckSignals() != 0) interrupted = true;
      return !interrupted;
    };
    try {
      out = execute(c, r, Sink{[&](std::string_view) { return keep_going(); }, keep_going});
    } catch (...) {
      if (!interrupted) throw;
    }
  }
  if (interrupted) throw py::error_already_set();
  return outcome_dict(out);
}

py::object start(const std::shared_ptr<PyChat>& c, Request r, bool stream) {
  if (stream) return py::cast(std::make_unique<Stream>(c, std::move(r)));
  return run_blocking(*c, r);
}

}  // namespace

Request make_request(PyModel& m, const py::dict& options) {
  Request r;
  SamplerParams& sp = r.options.sampling;
  std::string schema, grammar;
  bool json_object = false;
  for (const auto& [k, v] : options) {
    const std::string key = py::str(k);
    if (v.is_none()) continue;  // None: the default
    if (key == "max_tokens") {
      r.max_tokens = option<int32_t>(key, v, "an int");
      check(*r.max_tokens >= 1, "max_tokens must be >= 1 (got {})", *r.max_tokens);
    } else if (key == "temperature") {
      sp.temperature = option<float>(key, v, "a number");
    } else if (key == "top_k") {
      sp.top_k = option<int32_t>(key, v, "an int");
    } else if (key == "top_p") {
      sp.top_p = option<float>(key, v, "a number");
    } else if (key == "min_p") {
      sp.min_p = option<float>(key, v, "a number");
    } else if (key == "repeat_penalty") {
      sp.repeat_penalty = option<float>(key, v, "a number");
    } else if (key == "presence_penalty") {
      sp.presence_penalty = option<float>(key, v, "a number");
    } else if (key == "frequency_penalty") {
      sp.frequency_penalty = option<float>(key, v, "a number");
    } else if (key == "repeat_last_n") {
      sp.repeat_last_n = option<int32_t>(key, v, "an int");
    } else if (key == "logit_bias") {
      // Keys as ints or as the decimal strings of OpenAI's JSON.
      for (const auto& [id, b] : option<py::dict>(key, v, "a dict {token id: bias}"))
        sp.logit_bias.emplace_back(py::int_(py::reinterpret_borrow<py::object>(id)).cast<int32_t>(),
                                   option<float>(key, b, "a dict of numbers"));
    } else if (key == "seed") {
      sp.seed = option<uint64_t>(key, v, "a non-negative int");
    } else if (key == "stop") {
      for (std::string& s : strings(key, v))
        if (!s.empty()) r.options.stop_strings.push_back(std::move(s));
    } else if (key == "ignore_eos") {
      r.options.ignore_eos = option<bool>(key, v, "a bool");
    } else if (key == "lookup") {
      r.options.speculative.lookup = option<int32_t>(key, v, "an int");
    } else if (key == "draft") {
      r.draft = py::str(v);  // a str or a path
    } else if (key == "draft_k") {
      r.options.speculative.draft_k = option<int32_t>(key, v, "an int");
    } else if (key == "json_schema") {
      schema = option<std::string>(key, v, "a JSON Schema (text)");
    } else if (key == "json_object") {
      json_object = option<bool>(key, v, "a bool");
    } else if (key == "grammar") {
      grammar = option<std::string>(key, v, "GBNF text");
    } else if (key == "beams") {
      r.beams = option<int32_t>(key, v, "an int");
    } else if (key == "length_penalty") {
      r.beam.length_penalty = option<float>(key, v, "a number");
    } else if (key == "early_stopping") {
      r.beam.early_stopping =
          parse_early_stopping(py::isinstance<py::bool_>(v) ? (v.cast<bool>() ? "true" : "false")
                                                            : std::string(py::str(v)));
    } else {
      throw py::type_error(fmt::format("unexpected generation option '{}'", key));
    }
  }
  const Model& model = m.assistant->model();
  validate_sampler_params(sp, model.config().vocab_size);
  const SpeculativeOptions& spec = r.options.speculative;
  check(spec.lookup >= 0, "lookup must be >= 0 (got {})", spec.lookup);
  check(spec.draft_k >= 1, "draft_k must be at least 1 (got {})", spec.draft_k);
  check(spec.lookup == 0 || r.draft.empty(), "lookup and draft are alternatives: choose one");
  const bool speculative = spec.lookup > 0 || !r.draft.empty();
  const int constraints = int(!schema.empty()) + int(json_object) + int(!grammar.empty());
  check(constraints <= 1, "json_schema, json_object and grammar are alternatives: choose one");
  check(constraints == 0 || !speculative,
        "constrained output (json_schema / json_object / grammar) cannot be combined with "
        "speculative decoding (lookup / draft)");
  check(r.beams >= 1 && r.beams <= 64, "beams must be in 1..64 (got {})", r.beams);
  check(r.beams == 1 || (!speculative && constraints == 0),
        "beam search cannot be combined with speculative decoding or constrained output");
  if (constraints > 0) {
    ByteDfa dfa = !grammar.empty() ? compile_grammar(grammar)
                  : json_object    ? compile_json_schema(any_json_object())
                                   : compile_json_schema(parse_json_schema_text(schema));
    r.options.constraint =
        std::make_shared<const TokenConstraint>(std::move(dfa), m.assistant->vocabulary());
  }
  return r;
}

Outcome execute(PyChat& c, Request& r, const Sink& sink) {
  Assistant& a = *c.model->assistant;
  Turn t;
  if (r.raw) {
    t.prompt = r.prompt;
  } else {
    t.messages = r.messages;
    for (const ImageRef& img : t.messages.back().images) t.preprocess_ms += img->preprocess_ms;
    t.prompt = a.chat_prompt(t.messages, r.thinking);
  }
  const int32_t size = int32_t(t.prompt.ids.size()), context = c.chat->context();
  const int32_t room = context - size;
  if (room < 1)
    throw ContextFullError(
        fmt::format("the prompt ({} tokens) leaves no room in the context ({} "
                    "tokens) of {}: shorten it, or compile with a larger "
                    "context",
                    size, context, c.model->path));
  const int32_t n = r.max_tokens.value_or(room);
  if (n > room)
    throw ContextFullError(fmt::format(
        "prompt ({} tokens) + max_tokens ({}) = {} exceeds the context ({} tokens) of {}: "
        "shorten the prompt, lower max_tokens, or compile with a larger context",
        size, n, size + n, context, c.model->path));
  Outcome out;
  out.constraint = r.options.constraint;
  if (r.beams > 1) {
    BeamOptions b = r.beam;
    b.num_beams = r.beams;
    b.max_new_tokens = n;
    if (r.options.ignore_eos) b.eos_ids = {-1};  // no id matches: every beam runs to n
    b.cancelled = [&] { return !sink.keep_going(); };
    BeamResult search;
    const BeamReply reply = c.chat->beam_reply(t, b, &search);
    out.beams = true;
    out.beam_score = search.hypotheses.empty() ? 0.f : search.hypotheses.front().score;
    out.stats = c.chat->last_stats();
    out.result.tokens = reply.tokens;
    out.result.text = reply.text;
    out.result.prompt_tokens = size;
    out.result.stop = out.stats.stop;
    if (!reply.text.empty()) sink.text(reply.text);  // the search's answer comes whole
    return out;
  }
  GenerateOptions g = r.options;
  g.n_predict = n;
  if (!r.draft.empty()) g.speculative.draft = draft_for(*c.model, r.draft);
  out.result = r.raw ? c.chat->complete(t.prompt, g, sink.text) : c.chat->reply(t, g, sink.text);
  out.stats = c.chat->last_stats();
  return out;
}

py::dict outcome_dict(const Outcome& o) {
  const GenerateResult& r = o.result;
  const ReplyStats& s = o.stats;
  py::dict d;
  d["text"] = to_str(r.text);
  d["tokens"] = r.tokens;
  d["stop_reason"] = stop_reason_name(r.stop);
  d["prompt_tokens"] = s.prompt_tokens;
  d["reused_tokens"] = s.reused_tokens;
  d["generated_tokens"] = int32_t(r.tokens.size());
  d["images"] = s.images;
  d["tiles"] = s.tiles;
  d["image_tokens"] = s.image_tokens;
  d["preprocess_ms"] = s.preprocess_ms;
  d["vision_ms"] = s.vision_ms;
  d["prefill_ms"] = s.prefill_ms;
  d["decode_ms"] = s.decode_ms;
  d["ttft_ms"] = s.ttft_ms;
  d["prefill_tok_s"] = s.prefill_tokens_per_s();
  d["decode_tok_s"] = s.decode_tokens_per_s();
  if (o.beams) d["beam_score"] = o.beam_score;
  if (r.spec_passes > 0) {
    d["spec_passes"] = r.spec_passes;
    d["spec_drafted"] = r.spec_drafted;
    d["spec_accepted"] = r.spec_accepted;
    d["spec_replays"] = r.spec_replays;
  }
  if (o.constraint) {
    const auto st = o.constraint->stats();
    d["constraint_ms"] = r.constraint_ms;
    d["constraint_steps"] = r.constraint_steps;
    d["constraint_dfa_states"] = st.dfa_states;
  }
  return d;
}

Stream::Stream(std::shared_ptr<PyChat> chat, Request r)
    : chat_(std::move(chat)), st_(std::make_shared<State>()) {
  // The worker touches no Python object: the request holds C++ values only.
  worker_ = std::thread([st = st_, c = chat_, r = std::move(r)]() mutable {
    try {
      std::lock_guard lock(c->model->mu);
      Busy busy(c->model->generating);
      const auto keep_going = [&] { return !st->cancel.load(std::memory_order_relaxed); };
      const auto text = [&](std::string_view piece) {
        {
          std::lock_guard l(st->mu);
          st->pieces.emplace_back(piece);
        }
        st->cv.notify_one();
        return keep_going();
      };
      // Cancelled while waiting for the model (another generation held it): nothing to run.
      Outcome o;
      o.result.stop = StopReason::Cancelled;
      if (keep_going()) o = execute(*c, r, Sink{text, keep_going});
      std::lock_guard l(st->mu);
      st->outcome = std::move(o);
    } catch (...) {
      std::lock_guard l(st->mu);
      st->error = std::current_exception();
    }
    {
      std::lock_guard l(st->mu);
      st->done = true;
    }
    st->cv.notify_one();
  });
}

Stream::~Stream() {
  if (!worker_.joinable()) return;
  st_->cancel = true;
  if (PyGILState_Check()) {
    py::gil_scoped_release nogil;
    worker_.join();
  } else {
    worker_.join();
  }
}

void Stream::join() {
  if (worker_.joinable()) worker_.join();
}

void Stream::cancel() {
  st_->cancel = true;
  join();
  finished_ = true;
}

std::optional<std::string> Stream::next() {
  if (finished_) return std::nullopt;
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release nogil;
      std::unique_lock l(st_->mu);
      // Woken by every piece; the timeout only bounds how long a Ctrl-C waits to be seen.
      st_->cv.wait_for(l, std::chrono::milliseconds(100),
                       [&] { return !st_->pieces.empty() || st_->done; });
      if (!st_->pieces.empty()) {
        std::string s = std::move(st_->pieces.front());
        st_->pieces.pop_front();
        return s;
      }
      done = st_->done;
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) {
      {
        py::gil_scoped_release nogil;
        cancel();
      }
      throw py::error_already_set();
    }
  }
  {
    py::gil_scoped_release nogil;
    join();
  }
  finished_ = true;
  if (st_->error) std::rethrow_exception(st_->error);
  return std::nullopt;
}

py::dict Stream::result() {
  check(finished_, "the stream has not ended: read it to the end (or cancel() it) first");
  if (st_->error) std::rethrow_exception(st_->error);
  return outcome_dict(st_->outcome);
}

void bind_generation(py::module_& m) {
  py::class_<Stream>(m, "Stream", "A generation running on a worker thread: its text pieces.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__",
           [](Stream& s) {
             std::optional<std::string> piece = s.next();
             if (!piece) throw py::stop_iteration();
             return to_str(*piece);
           })
      .def("result", &Stream::result, "The outcome, once the stream has ended.")
      .def(
          "cancel",
          [](Stream& s) {
            py::gil_scoped_release nogil;
            s.cancel();
          },
          "Stops the generation; the session stays usable.");

  py::class_<PyChat, std::shared_ptr<PyChat>>(
      m, "Chat", "A session on a model: its KV cache keeps what calls share.")
      .def_property_readonly("context", [](const PyChat& c) { return c.chat->context(); })
      .def(
          "reset",
          [](PyChat& c) {
            py::gil_scoped_release nogil;
            std::lock_guard lock(c.model->mu);
            c.chat->reset();
          },
          "Forgets what the session holds.")
      .def(
          "prompt_ids",
          [](PyChat& c, const py::list& messages, bool thinking) {
            return c.model->assistant->chat_prompt(to_messages(messages), thinking).ids;
          },
          py::arg("messages"), py::arg("thinking") = true,
          "The token ids of messages through the chat template (no graph runs).")
      .def(
          "respond",
          [](const std::shared_ptr<PyChat>& c, const py::list& messages, bool thinking,
             const py::dict& options, bool stream) {
            Request r = make_request(*c->model, options);
            r.messages = to_messages(messages);
            check(r.messages.back().role == "user", "the last message must be the user's");
            r.thinking = thinking;
            return start(c, std::move(r), stream);
          },
          py::arg("messages"), py::arg("thinking") = true, py::arg("options") = py::dict(),
          py::arg("stream") = false,
          "The assistant's reply to (role, content, images) messages: a dict, or a Stream.")
      .def(
          "complete",
          [](const std::shared_ptr<PyChat>& c, const py::object& prompt, bool add_bos,
             const py::dict& options, bool stream) {
            Request r = make_request(*c->model, options);
            r.raw = true;
            r.prompt = raw_prompt(*c->model, prompt, add_bos);
            check(!r.prompt.ids.empty(), "the prompt is empty");
            return start(c, std::move(r), stream);
          },
          py::arg("prompt"), py::arg("add_bos") = true, py::arg("options") = py::dict(),
          py::arg("stream") = false,
          "A continuation of raw text or token ids (no template): a dict, or a Stream.");
}

}  // namespace edgevl::python
