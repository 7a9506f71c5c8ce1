#include "compiler/tokenizer_import.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "compiler/sentencepiece_proto.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "format/json_fields.h"

namespace edgevl::compiler {

const char* const kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5's (Qwen3_5Tokenizer): Qwen2's with combining marks (\p{M}) kept with the letters.
const char* const kQwen35SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using text::AddedToken;
using text::TokenizerData;
using text::TokenType;

json read_json(const fs::path& p) {
  return read_json_file(p);
}

// bos_token / eos_token are either a string, an AddedToken-like object, or null.
std::optional<std::string> token_name(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

// Puts `t` at its id, growing the vocabulary with empty Unused holes when needed.
void place_added(TokenizerData& d, AddedToken t) {
  if (size_t(t.id) >= d.pieces.size()) {
    d.pieces.resize(t.id + 1);
    d.types.resize(t.id + 1, TokenType::Unused);
    if (!d.scores.empty()) d.scores.resize(t.id + 1, 0.0f);
  }
  // A token already spelled this way keeps a meaningful type (sentencepiece's <unk> stays
  // Unknown); otherwise the added token takes the slot (InternLM2's [UNUSED_TOKEN_*]).
  const TokenType old = d.types[t.id];
  const bool keep = d.pieces[t.id] == t.content && old != TokenType::Normal &&
                    old != TokenType::Unused && old != TokenType::UserDefined;
  d.pieces[t.id] = t.content;
  if (!keep) d.types[t.id] = t.special ? TokenType::Control : TokenType::UserDefined;
  auto same = [&](const AddedToken& a) { return a.id == t.id; };
  d.added.erase(std::remove_if(d.added.begin(), d.added.end(), same), d.added.end());
  d.added.push_back(std::move(t));
}

AddedToken added_from_json(const json& j, int64_t id, const std::string& where) {
  check(id >= 0 && id < (1 << 24), "{}: added token id {} is out of range", where, id);
  check(j.is_object() && j.contains("content") && j["content"].is_string(),
        "{}: added token {} has no string 'content'", where, id);
  AddedToken t;
  t.id = int32_t(id);
  t.content = j["content"].get<std::string>();
  check(!t.content.empty(), "{}: added token {} is empty", where, id);
  t.special = j.value("special", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  return t;
}

// tokenizer_config.json: added_tokens_decoder, bos/eos, add_bos_token / add_eos_token.
void apply_config(TokenizerData& d, const fs::path& dir) {
  const fs::path p = dir / "tokenizer_config.json";
  if (!fs::exists(p)) return;
  const json cfg = read_json(p);
  check(cfg.is_object(), "{}: expected a JSON object", p.string());
  if (auto it = cfg.find("added_tokens_decoder"); it != cfg.end() && it->is_object()) {
    for (const auto& [key, val] : it->items()) {
      int64_t id = -1;
      try {
        id = std::stoll(key);
      } catch (...) {
        fail("{}: added_tokens_decoder key '{}' is not a token id", p.string(), key);
      }
      place_added(d, added_from_json(val, id, p.string() + " added_tokens_decoder"));
    }
  }
  auto lookup = [&](const std::string& name) -> int32_t {
    for (const auto& t : d.added)
      if (t.content == name) return t.id;
    for (size_t i = 0; i < d.pieces.size(); ++i)
      if (d.pieces[i] == name) return int32_t(i);
    fail("{}: token '{}' is not in the vocabulary", p.string(), name);
  };
  if (cfg.contains("bos_token")) {
    auto b = token_name(cfg, "bos_token");
    d.bos_id = b ? lookup(*b) : -1;
  }
  if (cfg.contains("eos_token")) {
    auto e = token_name(cfg, "eos_token");
    if (e) d.eos_id = lookup(*e);
  }
  if (auto pad = token_name(cfg, "pad_token")) d.pad_id = lookup(*pad);
  if (auto it = cfg.find("add_bos_token"); it != cfg.end() && it->is_boolean())
    d.add_bos = it->get<bool>();
  if (auto it = cfg.find("add_eos_token"); it != cfg.end() && it->is_boolean())
    d.add_eos = it->get<bool>();
  if (d.bos_id < 0) d.add_bos = false;
}

TokenizerData from_sentencepiece(const fs::path& dir) {
  const fs::path p = dir / "tokenizer.model";
  MappedFile f(p);
  TokenizerData d =
      tokenizer_from_sentencepiece(parse_sentencepiece_model(f.bytes(), p.string()), p.string());
  apply_config(d, dir);
  return d;
}

// Byte-level vocabulary + rank-ordered merges given as piece strings.
TokenizerData bytelevel(const std::vector<std::pair<std::string, int64_t>>& vocab,
                        const std::vector<std::pair<std::string, std::string>>& merges,
                        const std::string& where) {
  TokenizerData d;
  d.kind = text::TokenizerKind::ByteLevelBpe;
  int64_t max_id = -1;
  for (const auto& [s, id] : vocab) {
    check(id >= 0 && id < (1 << 24), "{}: token '{}' has id {} out of range", where, s, id);
    max_id = std::max(max_id, id);
  }
  check(max_id >= 0, "{}: the vocabulary is empty", where);
  d.pieces.resize(max_id + 1);
  d.types.assign(max_id + 1, TokenType::Unused);
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [s, id] : vocab) {
    check(d.types[id] == TokenType::Unused, "{}: id {} is used twice ('{}' and '{}')", where, id,
          d.pieces[id], s);
    d.pieces[id] = s;
    d.types[id] = TokenType::Normal;
    ids.emplace(s, int32_t(id));
  }
  d.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = ids.find(a), ib = ids.find(b);
    check(ia != ids.end() && ib != ids.end(), "{}: merge {} '{} {}' uses a piece not in the vocab",
          where, r + 1, a, b);
    check(ids.count(a + b), "{}: merge {} '{} {}' makes '{}', which is not in the vocab", where,
          r + 1, a, b, a + b);
    d.merges.emplace_back(ia->second, ib->second);
  }
  return d;
}

TokenizerData from_tokenizer_json(const fs::path& dir) {
  const fs::path p = dir / "tokenizer.json";
  const std::string where = p.string();
  const json j = read_json(p);
  check(j.is_object() && j.contains("model") && j["model"].is_object(), "{}: no 'model' object",
        where);
  const json& model = j["model"];
  const std::string type = model.value("type", "BPE");
  check(type == "BPE", "{}: model type '{}' is not supported (byte-level BPE only)", where, type);
  const std::string dump_pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "";
  const std::string dump_dec = j.contains("decoder") ? j["decoder"].dump() : "";
  check(dump_pre.find("ByteLevel") != std::string::npos ||
            dump_dec.find("ByteLevel") != std::string::npos,
        "{}: not a byte-level BPE tokenizer (sentencepiece-style tokenizer.json needs the "
        "tokenizer.model next to it)",
        where);
  check(model.contains("vocab") && model["vocab"].is_object(), "{}: model.vocab missing", where);
  std::vector<std::pair<std::string, int64_t>> vocab;
  for (const auto& [k, v] : model["vocab"].items()) {
    check(v.is_number_integer(), "{}: model.vocab['{}'] is not an integer", where, k);
    vocab.emplace_back(k, v.get<int64_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    for (const auto& m : model["merges"]) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        check(sp != std::string::npos, "{}: merge '{}' is not 'a b'", where, s);
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
              "{}: merge {} is neither 'a b' nor [a, b]", where, m.dump());
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      }
    }
  }
  TokenizerData d = bytelevel(vocab, merges, where);
  d.ignore_merges = model.value("ignore_merges", false);
  // Only NFC (Qwen2) is implemented; any other normalizer would silently change results.
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json& n = j["normalizer"];
    const std::string nt = n.value("type", "");
    const bool seq_nfc = nt == "Sequence" && n.contains("normalizers") &&
                         n["normalizers"].is_array() && n["normalizers"].size() == 1 &&
                         n["normalizers"][0].value("type", "") == "NFC";
    check(nt == "NFC" || seq_nfc || (nt == "Sequence" && n["normalizers"].empty()),
          "{}: normalizer {} is not supported (only NFC is implemented)", where, n.dump());
    d.nfc = nt == "NFC" || seq_nfc;
  }
  // The split pattern: the first Split pre-tokenizer's regex; otherwise GPT-2's, which
  // ByteLevel(use_regex=true) applies.
  d.pretokenizer_regex = kGpt2SplitPattern;
  std::function<bool(const json&)> find_split = [&](const json& n) -> bool {
    if (n.is_object()) {
      if (n.value("type", "") == "Split" && n.contains("pattern")) {
        const json& pat = n["pattern"];
        if (pat.contains("Regex")) {
          d.pretokenizer_regex = pat["Regex"].get<std::string>();
        } else {
          // A literal string: quote it for PCRE2.
          d.pretokenizer_regex = "\\Q" + pat.value("String", std::string()) + "\\E";
        }
        return true;
      }
      for (const auto& [k, v] : n.items())
        if (find_split(v)) return true;
    } else if (n.is_array()) {
      for (const auto& v : n)
        if (find_split(v)) return true;
    }
    return false;
  };
  if (j.contains("pre_tokenizer")) find_split(j["pre_tokenizer"]);
  if (auto it = j.find("added_tokens"); it != j.end() && it->is_array()) {
    for (const auto& a : *it) {
      check(a.contains("id") && a["id"].is_number_integer(), "{}: added token without id", where);
      place_added(d, added_from_json(a, a["id"].get<int64_t>(), where + " added_tokens"));
    }
  }
  apply_config(d, dir);
  return d;
}

TokenizerData from_vocab_merges(const fs::path& dir) {
  const fs::path pv = dir / "vocab.json", pm = dir / "merges.txt";
  const json v = read_json(pv);
  check(v.is_object(), "{}: expected an object of token -> id", pv.string());
  std::vector<std::pair<std::string, int64_t>> vocab;
  vocab.reserve(v.size());
  for (const auto& [k, id] : v.items()) {
    check(id.is_number_integer(), "{}: '{}' has a non-integer id", pv.string(), k);
    vocab.emplace_back(k, id.get<int64_t>());
  }
  const std::string mt = read_text_file(pm);
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_no = 0;
  for (size_t pos = 0; pos < mt.size();) {
    size_t e = mt.find('\n', pos);
    if (e == std::string::npos) e = mt.size();
    std::string line = mt.substr(pos, e - pos);
    pos = e + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    check(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
              line.find(' ', sp + 1) == std::string::npos,
          "{}:{}: expected two pieces separated by one space, got '{}'", pm.string(), line_no,
          line);
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  TokenizerData d = bytelevel(vocab, merges, pv.string() + " + merges.txt");
  d.pretokenizer_regex = kGpt2SplitPattern;
  const fs::path pc = dir / "tokenizer_config.json";
  if (fs::exists(pc)) {
    const json cfg = read_json(pc);
    const std::string cls = cfg.is_object() ? cfg.value("tokenizer_class", "") : "";
    if (cls == "Qwen2Tokenizer" || cls == "Qwen3_5Tokenizer") {
      d.pretokenizer_regex = cls == "Qwen2Tokenizer" ? kQwen2SplitPattern : kQwen35SplitPattern;
      d.nfc = true;  // both NFC-normalize their input, as their tokenizer.json does
    }
  }
  apply_config(d, dir);
  return d;
}

}  // namespace

text::TokenizerData load_tokenizer_dir(const std::filesystem::path& dir) {
  check(fs::is_directory(dir), "{}: not a directory (expected tokenizer files)", dir.string());
  TokenizerData d;
  if (fs::exists(dir / "tokenizer.model")) {
    d = from_sentencepiece(dir);
  } else if (fs::exists(dir / "tokenizer.json")) {
    d = from_tokenizer_json(dir);
  } else if (fs::exists(dir / "vocab.json") || fs::exists(dir / "merges.txt")) {
    check(fs::exists(dir / "vocab.json"), "{}: merges.txt is there but vocab.json is missing",
          dir.string());
    check(fs::exists(dir / "merges.txt"), "{}: vocab.json is there but merges.txt is missing",
          dir.string());
    d = from_vocab_merges(dir);
  } else {
    fail(
        "{}: no tokenizer found (looked for tokenizer.model, tokenizer.json, "
        "vocab.json + merges.txt)",
        dir.string());
  }
  // Builds the lookup tables once so a broken vocabulary fails at compile time, not on device.
  text::Tokenizer check_it(d);
  return d;
}

std::optional<std::string> load_chat_template_string(const std::filesystem::path& dir) {
  const fs::path p = dir / "tokenizer_config.json";
  if (fs::exists(p)) {
    const json cfg = read_json(p);
    if (cfg.is_object() && cfg.contains("chat_template")) {
      const json& t = cfg["chat_template"];
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {  // [{name, template}, ...]: the default one
        for (const auto& e : t)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template"))
            return e["template"].get<std::string>();
      }
    }
  }
  if (fs::exists(dir / "chat_template.jinja")) return read_text_file(dir / "chat_template.jinja");
  return std::nullopt;
}

}  // namespace edgevl::compiler
