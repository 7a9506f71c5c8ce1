#include "app/server/openai_request.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/constraints/json_schema_reader.h"

namespace edgevl::server {

namespace {

// Ordered: a response_format schema keeps its properties in the declared order.
using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, "invalid_request_error", msg, param);
}

const ojson& field(const ojson& j, const char* name, ojson::value_t type, const char* type_name) {
  const ojson& v = j.at(name);
  const bool ok = v.type() == type || (type == ojson::value_t::number_float &&
                                       (v.is_number_integer() || v.is_number_unsigned()));
  if (!ok) bad(name, fmt::format("'{}' must be {}", name, type_name));
  return v;
}

std::optional<double> number(const ojson& j, const char* name) {
  if (!j.contains(name) || j[name].is_null()) return std::nullopt;
  return field(j, name, ojson::value_t::number_float, "a number").get<double>();
}

std::optional<int64_t> integer(const ojson& j, const char* name) {
  if (!j.contains(name) || j[name].is_null()) return std::nullopt;
  const ojson& v = j[name];
  if (!v.is_number_integer() && !v.is_number_unsigned())
    bad(name, fmt::format("'{}' must be an integer", name));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad(name, fmt::format("'{}' is out of range", name));
  return v.get<int64_t>();
}

// A number field within [lo, hi] ((lo, hi] when lo_open), stored in *out when present.
void bounded(const ojson& j, const char* name, double lo, double hi, bool lo_open, float* out) {
  const std::optional<double> v = number(j, name);
  if (!v) return;
  if (!((lo_open ? *v > lo : *v >= lo) && *v <= hi))
    bad(name, fmt::format("'{}' must be in {}{}, {}]", name, lo_open ? "(" : "[", lo, hi));
  *out = float(*v);
}

ojson parse_object(std::string_view body) {
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ApiError(400, "invalid_request_error", "the request body is not valid JSON");
  if (!j.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
  return j;
}

// num_beams and its two companions. Beam search is transformers' generate(do_sample=False):
// anything that samples, reshapes the logits or cuts the text would be silently ignored by it,
// so such a field along with num_beams > 1 is refused rather than dropped. An explicit
// temperature 0 is accepted (it means greedy); the default (1, OpenAI's) is not a request to
// sample.
void parse_beams(const ojson& j, const RequestLimits& lim, SamplingRequest& s) {
  if (auto n = integer(j, "num_beams")) {
    if (*n < 1) bad("num_beams", "'num_beams' must be at least 1 (1: no beam search)");
    if (*n > lim.max_beams)
      bad("num_beams",
          fmt::format("'num_beams' {} exceeds this server's limit of {}: the beams of a step run "
                      "as one batched decode pass, and this model's is {} row(s) wide (edgevl "
                      "compile --batch N)",
                      *n, lim.max_beams, lim.max_beams));
    s.num_beams = int32_t(*n);
  }
  bounded(j, "length_penalty", -10, 10, false, &s.length_penalty);
  if (j.contains("early_stopping") && !j["early_stopping"].is_null()) {
    const ojson& es = j["early_stopping"];
    if (es.is_boolean())
      s.early_stopping = es.get<bool>() ? "true" : "false";
    else if (es.is_string() && es.get<std::string>() == "never")
      s.early_stopping = "never";
    else
      bad("early_stopping", "'early_stopping' must be true, false or \"never\"");
  }
  if (s.num_beams == 1) return;
  const auto conflict = [](const char* name, const char* why) {
    bad(name, fmt::format("'{}' cannot be combined with num_beams > 1: {}", name, why));
  };
  constexpr const char* kGreedy = "beam search is deterministic (no sampling)";
  if (auto t = number(j, "temperature"); t && *t > 0)
    conflict("temperature", "beam search is deterministic (temperature 0 or leave it out)");
  if (s.top_p < 1) conflict("top_p", kGreedy);
  if (s.top_k > 0) conflict("top_k", kGreedy);
  if (s.min_p > 0) conflict("min_p", kGreedy);
  if (s.repeat_penalty != 1)
    conflict(j.contains("repeat_penalty") ? "repeat_penalty" : "repetition_penalty",
             "beam scores are the model's log-probabilities");
  if (s.presence_penalty != 0)
    conflict("presence_penalty", "beam scores are the model's log-probabilities");
  if (s.frequency_penalty != 0)
    conflict("frequency_penalty", "beam scores are the model's log-probabilities");
  if (!s.logit_bias.empty())
    conflict("logit_bias", "beam scores are the model's log-probabilities");
  if (!s.stop.empty()) conflict("stop", "beam search ends at the model's stop tokens only");
  if (s.response_schema) conflict("response_format", "beam search does not run constrained output");
}

// Fields of OpenAI's API that would change the answer and that this server does not implement:
// refused by name, never dropped (a client would take the answer for what it asked).
void refuse_unsupported(const ojson& j, bool chat) {
  const auto present = [&](const char* k) {
    return j.contains(k) && !j[k].is_null() && !(j[k].is_array() && j[k].empty());
  };
  for (const char* k : {"tools", "functions"})
    if (present(k))
      bad(k, fmt::format("'{}' is not supported by this server: no tool calls are made (leave "
                         "it out, or describe the tool in the prompt and ask for JSON with "
                         "response_format)",
                         k));
  for (const char* k : {"tool_choice", "function_call"})
    if (present(k) && !(j[k].is_string() && (j[k] == "none" || j[k] == "auto")))
      bad(k, fmt::format("'{}' is not supported by this server: it makes no tool calls", k));
  for (const char* k : {"audio", "prediction", "web_search_options"})
    if (present(k)) bad(k, fmt::format("'{}' is not supported by this server", k));
  if (present("modalities")) {
    const ojson& m = j["modalities"];
    if (!m.is_array() || m.size() != 1 || m[0] != "text")
      bad("modalities", "'modalities' can only be [\"text\"]: this server answers in text");
  }
  if (chat) return;
  if (j.contains("suffix") && j["suffix"].is_string() && !j["suffix"].get<std::string>().empty())
    bad("suffix", "'suffix' (fill-in-the-middle) is not supported by this server");
  if (j.contains("echo") && j["echo"].is_boolean() && j["echo"].get<bool>())
    bad("echo", "'echo' is not supported by this server");
  if (auto b = integer(j, "best_of"); b && *b != 1) bad("best_of", "only best_of = 1 is supported");
}

// Chat: logprobs (a boolean) and top_logprobs (0..20, which needs logprobs); completions:
// logprobs is the number of alternatives itself (0..20). -1: none.
int32_t parse_logprobs(const ojson& j, bool chat, const SamplingRequest& s) {
  int32_t n = -1;
  if (chat) {
    const bool on = j.contains("logprobs") && !j["logprobs"].is_null() &&
                    field(j, "logprobs", ojson::value_t::boolean, "a boolean").get<bool>();
    const std::optional<int64_t> top = integer(j, "top_logprobs");
    if (top && (*top < 0 || *top > 20)) bad("top_logprobs", "'top_logprobs' must be 0..20");
    if (top && !on) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (on) n = int32_t(top.value_or(0));
  } else if (const std::optional<int64_t> k = integer(j, "logprobs")) {
    if (*k < 0 || *k > 20) bad("logprobs", "'logprobs' must be 0..20");
    n = int32_t(*k);
  }
  if (n >= 0 && s.num_beams > 1)
    bad("logprobs",
        "'logprobs' cannot be combined with num_beams > 1: beam search reports "
        "sequence scores, not per-token log-probabilities");
  return n;
}

SamplingRequest parse_sampling(const ojson& j, const RequestLimits& lim) {
  SamplingRequest s;
  std::optional<int64_t> mt = integer(j, "max_completion_tokens");
  if (!mt) mt = integer(j, "max_tokens");
  if (mt) {
    if (*mt < 1) bad("max_tokens", "'max_tokens' must be at least 1");
    if (lim.max_tokens_cap > 0 && *mt > lim.max_tokens_cap)
      bad("max_tokens", fmt::format("'max_tokens' {} exceeds this server's limit of {}", *mt,
                                    lim.max_tokens_cap));
    s.max_tokens = int32_t(std::min<int64_t>(*mt, INT32_MAX));
  }
  bounded(j, "temperature", 0, 2, false, &s.temperature);
  bounded(j, "top_p", 0, 1, true, &s.top_p);
  if (auto k = integer(j, "top_k")) {
    if (*k < 0 || *k > 1'000'000) bad("top_k", "'top_k' must be between 0 and 1000000");
    s.top_k = int32_t(*k);
  }
  bounded(j, "min_p", 0, 1, false, &s.min_p);
  bounded(j, "repetition_penalty", 0, 10, true, &s.repeat_penalty);
  bounded(j, "repeat_penalty", 0, 10, true, &s.repeat_penalty);  // llama.cpp's name
  if (auto n = integer(j, "repeat_last_n")) {
    if (*n < -1 || *n > 1'000'000) bad("repeat_last_n", "'repeat_last_n' must be -1 or more");
    s.repeat_last_n = int32_t(*n);
  }
  bounded(j, "presence_penalty", -2, 2, false, &s.presence_penalty);
  bounded(j, "frequency_penalty", -2, 2, false, &s.frequency_penalty);
  if (j.contains("logit_bias") && !j["logit_bias"].is_null()) {
    // OpenAI: an object mapping token ids (as strings) to a bias in [-100, 100]; -100
    // effectively bans the token. Ids are checked against the vocabulary when the job starts.
    const ojson& lb = j["logit_bias"];
    if (!lb.is_object()) bad("logit_bias", "'logit_bias' must be an object of token id: bias");
    if (lb.size() > 1024) bad("logit_bias", "'logit_bias' has more than 1024 entries");
    for (const auto& [key, val] : lb.items()) {
      int64_t id = -1;
      size_t used = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size() || id < 0 || id > INT32_MAX)
        bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id", key));
      if (!val.is_number())
        bad("logit_bias", fmt::format("'logit_bias' of token {} must be a number", key));
      const double b = val.get<double>();
      if (!(b >= -100 && b <= 100))
        bad("logit_bias", fmt::format("'logit_bias' of token {} must be in [-100, 100]", key));
      s.logit_bias.emplace_back(int32_t(id), float(b));
    }
  }
  if (auto seed = integer(j, "seed")) s.seed = uint64_t(*seed);
  if (auto n = integer(j, "n"); n && *n != 1) bad("n", "only n = 1 is supported");
  if (j.contains("stop") && !j["stop"].is_null()) {
    const ojson& st = j["stop"];
    if (st.is_string()) {
      s.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const ojson& e : st) {
        if (!e.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        s.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    if (int(s.stop.size()) > lim.max_stop)
      bad("stop", fmt::format("at most {} stop strings", lim.max_stop));
    for (const auto& x : s.stop)
      if (x.empty()) bad("stop", "stop strings must not be empty");
  }
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_null())
    s.ignore_eos = field(j, "ignore_eos", ojson::value_t::boolean, "a boolean").get<bool>();
  if (j.contains("stream") && !j["stream"].is_null())
    s.stream = field(j, "stream", ojson::value_t::boolean, "a boolean").get<bool>();
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const ojson& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (so.contains("include_usage") && !so["include_usage"].is_null())
      s.include_usage =
          field(so, "include_usage", ojson::value_t::boolean, "a boolean").get<bool>();
  }
  if (j.contains("response_format") && !j["response_format"].is_null()) {
    const ojson& rf = j["response_format"];
    if (!rf.is_object()) bad("response_format", "'response_format' must be an object");
    if (!rf.contains("type")) bad("response_format", "'response_format.type' is required");
    const ojson& type = rf["type"];
    if (!type.is_string())
      bad("response_format",
          "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    const std::string t = type.get<std::string>();
    if (t == "json_object") {
      s.response_schema = std::make_shared<const JsonSchema>(any_json_object());
      s.response_any_object = true;
    } else if (t == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
        bad("response_format", "'response_format.json_schema' must be an object");
      const ojson& js = rf["json_schema"];
      if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
        bad("response_format", "'response_format.json_schema.strict' must be a boolean");
      try {
        // Without a schema any object is a valid answer.
        s.response_any_object = !js.contains("schema");
        s.response_schema = std::make_shared<const JsonSchema>(
            js.contains("schema") ? parse_json_schema(js["schema"]) : any_json_object());
      } catch (const Error& e) {
        bad("response_format", e.what());
      }
    } else if (t != "text") {
      bad("response_format",
          fmt::format("'response_format.type' {} is not one of \"text\", \"json_object\", "
                      "\"json_schema\"",
                      type.dump()));
    }
  }
  parse_beams(j, lim, s);
  return s;
}

std::string model_name(const ojson& j) {
  if (!j.contains("model") || j["model"].is_null()) return {};
  return field(j, "model", ojson::value_t::string, "a string").get<std::string>();
}

ImagePart parse_image(const ojson& part, const RequestLimits& lim, size_t index, bool video) {
  const std::string param = fmt::format("messages[{}].content", index);
  const std::string key = video ? "video_url" : "image_url", what = video ? "video" : "image";
  if (!part.contains(key)) bad(param, fmt::format("an {} part needs '{}'", key, key));
  const ojson& iu = part[key];
  std::string url;
  if (iu.is_string()) {
    url = iu.get<std::string>();
  } else if (iu.is_object() && iu.contains("url") && iu["url"].is_string()) {
    url = iu["url"].get<std::string>();
  } else {
    bad(param, fmt::format("'{}' must be {{\"url\": \"...\"}}", key));
  }
  ImagePart img;
  img.video = video;
  if (url.rfind("data:", 0) == 0) {
    img.bytes = decode_data_uri(url, lim.max_image_bytes, video);
  } else if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    if (!lim.allow_remote_images)
      bad(param, fmt::format("remote {} URLs are refused (start the server with "
                             "--allow-remote-images); send the {} as a data: URI",
                             what, what));
    img.url = url;
  } else {
    bad(param, fmt::format("an {} URL must be a data: URI (data:{}/...;base64,...)", what, what));
  }
  return img;
}

}  // namespace

std::optional<std::vector<uint8_t>> base64_decode(std::string_view s, size_t max_bytes) {
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  if (s.size() % 4 == 1) return std::nullopt;
  if (s.size() / 4 * 3 > max_bytes + 2) return std::nullopt;  // before allocating
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(s.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

std::vector<uint8_t> decode_data_uri(std::string_view uri, size_t max_bytes, bool video) {
  const size_t comma = uri.find(',');
  const char* key = video ? "video_url" : "image_url";
  const std::string kind = video ? "video" : "image";
  if (uri.rfind("data:", 0) != 0 || comma == std::string_view::npos)
    bad(key, fmt::format("malformed data: URI (expected data:{}/...;base64,...)", kind));
  const std::string_view meta = uri.substr(5, comma - 5);
  if (meta.size() < 7 || meta.substr(meta.size() - 7) != ";base64")
    bad(key, fmt::format("data: URIs must be base64-encoded (data:{}/...;base64,...)", kind));
  if (meta.rfind(kind + "/", 0) != 0 && meta != ";base64")
    bad(key, fmt::format("data: URI of type '{}' is not {}", meta.substr(0, meta.size() - 7),
                         video ? "a video" : "an image"));
  auto bytes = base64_decode(uri.substr(comma + 1), max_bytes);
  if (!bytes) {
    if ((uri.size() - comma) / 4 * 3 > max_bytes)
      throw ApiError(
          413, "invalid_request_error",
          fmt::format("an {} is larger than this server's limit of {} bytes", kind, max_bytes),
          key);
    bad(key, "the data: URI's base64 payload is malformed");
  }
  if (bytes->empty()) bad(key, "the data: URI holds no bytes");
  return std::move(*bytes);
}

ChatRequest parse_chat_request(std::string_view body, const RequestLimits& lim) {
  const ojson j = parse_object(body);
  ChatRequest r;
  r.model = model_name(j);
  if (!j.contains("messages")) bad("messages", "'messages' is required");
  const ojson& msgs = j["messages"];
  if (!msgs.is_array() || msgs.empty()) bad("messages", "'messages' must be a non-empty array");
  int images = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& m = msgs[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(param, "each message must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(param + ".role", "'role' is required");
    ChatTurn t;
    t.role = m["role"].get<std::string>();
    if (t.role == "developer") t.role = "system";
    if (t.role != "system" && t.role != "user" && t.role != "assistant")
      bad(param + ".role", fmt::format("unsupported role '{}' (system, user, assistant)", t.role));
    if (!m.contains("content") || m["content"].is_null()) {
      if (t.role != "assistant") bad(param + ".content", "'content' is required");
    } else if (m["content"].is_string()) {
      t.text = m["content"].get<std::string>();
    } else if (m["content"].is_array()) {
      for (const ojson& part : m["content"]) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          bad(param + ".content", "each content part needs a 'type'");
        const std::string type = part["type"].get<std::string>();
        if (type == "text") {
          if (!part.contains("text") || !part["text"].is_string())
            bad(param + ".content", "a text part needs 'text'");
          if (!t.text.empty()) t.text += "\n";
          t.text += part["text"].get<std::string>();
        } else if (type == "image_url" || type == "video_url") {
          if (++images > lim.max_images)
            bad(param + ".content",
                fmt::format("at most {} images (videos) per request", lim.max_images));
          t.images.push_back(parse_image(part, lim, i, type == "video_url"));
        } else {
          bad(param + ".content", fmt::format("unsupported content part type '{}'", type));
        }
      }
    } else {
      bad(param + ".content", "'content' must be a string or an array of parts");
    }
    if (!t.images.empty() && t.role != "user")
      bad(param + ".content", "only user messages can carry images");
    r.messages.push_back(std::move(t));
  }
  if (r.messages.back().role != "user") bad("messages", "the last message must be the user's");
  if (j.contains("chat_template_kwargs") && !j["chat_template_kwargs"].is_null()) {
    const ojson& k = j["chat_template_kwargs"];
    if (!k.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (k.contains("enable_thinking")) {
      if (!k["enable_thinking"].is_boolean())
        bad("chat_template_kwargs.enable_thinking", "'enable_thinking' must be a boolean");
      r.thinking = k["enable_thinking"].get<bool>();
    }
  }
  refuse_unsupported(j, true);
  r.sampling = parse_sampling(j, lim);
  r.sampling.logprobs = parse_logprobs(j, true, r.sampling);
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& lim) {
  const ojson j = parse_object(body);
  CompletionRequest r;
  r.model = model_name(j);
  if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
  const ojson& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else {
    bad("prompt", "'prompt' must be a string (one prompt per request)");
  }
  refuse_unsupported(j, false);
  r.sampling = parse_sampling(j, lim);
  r.sampling.logprobs = parse_logprobs(j, false, r.sampling);
  return r;
}

}  // namespace edgevl::server
