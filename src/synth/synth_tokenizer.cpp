#include "synth/synth_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/sentencepiece_proto.h"
#include "core/error.h"
#include "synth/text_file.h"
#include "text/tokenizer.h"

namespace edgevl::synth {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// Written for this project; its only job is to give the learned merges English statistics.
constexpr const char* kCorpus =
    "The little robot woke up early in the morning and looked out of the window. The sun was "
    "shining over the hills, and the birds were singing in the trees. It wanted to go outside "
    "and play with the other machines in the garden. First it had to finish its work: there "
    "were books to sort, letters to answer and a small engine to repair. The robot worked "
    "carefully, because it knew that good work takes time. When everything was done, it "
    "opened the door and walked into the warm light. Its friends were waiting near the river. "
    "They talked about the weather, the stars and the strange sounds they had heard during "
    "the night. Then they decided to build a boat and travel to the other side of the water, "
    "where nobody had been before. They found wood, rope and an old sail, and they worked "
    "together until the evening. The boat was not beautiful, but it was strong, and it "
    "floated. The next day they started their journey. The wind was gentle and the water was "
    "calm. After many hours they reached a quiet island with tall green grass and a house "
    "made of stone. An old woman lived there. She smiled and asked them what they were "
    "looking for. The robot answered that they were only looking for something new, and she "
    "laughed and said that this is what everyone is looking for. Please describe this image "
    "in detail. What is in the picture? How many people are there, and what are they doing? "
    "This is a question about the system, the user and the assistant.";

struct Word {
  std::vector<std::string> syms;
  int count;
};

// Classic BPE training: repeatedly merge the most frequent adjacent pair (ties broken by
// the pair's spelling so the result is deterministic).
std::vector<std::pair<std::string, std::string>> learn_merges(std::vector<Word> words,
                                                              size_t max_merges) {
  std::vector<std::pair<std::string, std::string>> merges;
  while (merges.size() < max_merges) {
    std::map<std::pair<std::string, std::string>, int> freq;
    for (const auto& w : words)
      for (size_t i = 0; i + 1 < w.syms.size(); ++i) freq[{w.syms[i], w.syms[i + 1]}] += w.count;
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;  // a pair seen once teaches nothing
    for (const auto& [p, n] : freq)
      if (n > best_n) best = &p, best_n = n;
    if (!best) break;
    const auto m = *best;
    merges.push_back(m);
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.syms.size(); ++i) {
        if (i + 1 < w.syms.size() && w.syms[i] == m.first && w.syms[i + 1] == m.second) {
          out.push_back(m.first + m.second);
          ++i;
        } else {
          out.push_back(w.syms[i]);
        }
      }
      w.syms = std::move(out);
    }
  }
  return merges;
}

// Corpus words with their leading space spelled `space`; characters spelled by `spell`.
template <class Spell>
std::vector<Word> corpus_words(const std::string& space, Spell spell) {
  std::map<std::string, int> counts;
  std::string text = kCorpus, cur;
  for (char c : text + " ") {
    const bool letter = std::isalpha(uint8_t(c));
    if (letter) {
      cur.push_back(c);
      continue;
    }
    if (!cur.empty()) counts[cur]++;
    cur.clear();
  }
  std::vector<Word> words;
  for (const auto& [w, n] : counts) {
    Word wd{{space}, n};
    for (char c : w) wd.syms.push_back(spell(c));
    words.push_back(wd);
    Word bare{{}, 1};  // also sentence-initial spelling without the space
    for (char c : w) bare.syms.push_back(spell(c));
    words.push_back(bare);
  }
  return words;
}

// Appends merges (existing piece, letter) until `want` pieces exist; deterministic, and every
// result is new, so longer and longer words appear as the vocabulary grows.
void fill_merges(std::vector<std::pair<std::string, std::string>>& merges,
                 std::unordered_set<std::string>& vocab, std::vector<std::string>& order,
                 size_t want, const std::vector<std::string>& letters) {
  for (size_t i = 0; order.size() < want && i < order.size(); ++i) {
    const std::string left = order[i];
    if (left.size() > 24) continue;
    for (const auto& l : letters) {
      if (order.size() >= want) break;
      const std::string m = left + l;
      if (vocab.insert(m).second) {
        merges.emplace_back(left, l);
        order.push_back(m);
      }
    }
  }
}

const char* const kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

void write_bytelevel_bpe_tokenizer(const fs::path& dir, int32_t model_vocab_size) {
  check(model_vocab_size >= 259 + 3,
        "synth tokenizer: vocab size {} is too small for a byte-level BPE (need at least 262)",
        model_vocab_size);
  fs::create_directories(dir);
  const int32_t special0 = model_vocab_size >= 151646 ? 151643 : model_vocab_size - 3;
  const size_t n_regular = size_t(special0);

  std::vector<std::string> order;  // id -> piece
  std::unordered_set<std::string> vocab;
  for (int b = 0; b < 256; ++b) {
    order.push_back(text::byte_to_unicode(uint8_t(b)));
    vocab.insert(order.back());
  }
  const std::string space = text::byte_to_unicode(' ');
  auto spell = [](char c) { return text::byte_to_unicode(uint8_t(c)); };
  auto merges = learn_merges(corpus_words(space, spell), n_regular - 256);
  for (const auto& [a, b] : merges) {
    if (vocab.insert(a + b).second) order.push_back(a + b);
  }
  std::vector<std::string> letters;
  for (char c = 'a'; c <= 'z'; ++c) letters.push_back(std::string(1, c));
  // Space+letter pieces first so the filler grows whole words, not letter soup.
  for (const auto& l : letters)
    if (order.size() < n_regular && vocab.insert(space + l).second) {
      merges.emplace_back(space, l);
      order.push_back(space + l);
    }
  fill_merges(merges, vocab, order, n_regular, letters);
  check(order.size() == n_regular, "synth tokenizer: built {} pieces, wanted {}", order.size(),
        n_regular);

  // Written by hand: ordered_json's object insert is linear, quadratic over 150k pieces.
  std::string vj = "{";
  for (size_t i = 0; i < order.size(); ++i)
    vj += (i ? ", " : "") + nlohmann::json(order[i]).dump() + ": " + std::to_string(i);
  write_text_file(dir / "vocab.json", vj + "}");
  std::string mt = "#version: 0.2\n";
  for (const auto& [a, b] : merges) mt += a + " " + b + "\n";
  write_text_file(dir / "merges.txt", mt);

  ojson added = ojson::object();
  const char* names[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int k = 0; k < 3; ++k)
    added[std::to_string(special0 + k)] = {{"content", names[k]},  {"lstrip", false},
                                           {"normalized", false},  {"rstrip", false},
                                           {"single_word", false}, {"special", true}};
  ojson cfg = {{"add_prefix_space", false},
               {"added_tokens_decoder", added},
               {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
               {"bos_token", nullptr},
               {"chat_template", kChatMl},
               {"clean_up_tokenization_spaces", false},
               {"eos_token", "<|im_end|>"},
               {"errors", "replace"},
               {"model_max_length", 32768},
               {"pad_token", "<|endoftext|>"},
               {"split_special_tokens", false},
               {"tokenizer_class", "Qwen2Tokenizer"},
               {"unk_token", nullptr}};
  write_text_file(dir / "tokenizer_config.json", cfg.dump(2));
}

void write_sentencepiece_tokenizer(const fs::path& dir, int32_t model_vocab_size,
                                   bool internlm2_chat) {
  const int32_t n_chat = internlm2_chat ? 6 : 0;
  check(model_vocab_size >= 259 + 100 + n_chat,
        "synth tokenizer: vocab size {} is too small for a sentencepiece BPE (need at least {})",
        model_vocab_size, 259 + 100 + n_chat);
  fs::create_directories(dir);
  compiler::SpModel m;
  m.model_type = 2;
  m.byte_fallback = true;
  m.normalizer_name = "identity";
  m.add_dummy_prefix = !internlm2_chat;  // Llama prepends a space; InternLM2 does not
  m.remove_extra_whitespaces = false;
  m.escape_whitespaces = true;
  m.pieces.push_back({"<unk>", 0.0f, 2});
  m.pieces.push_back({"<s>", 0.0f, 3});
  m.pieces.push_back({"</s>", 0.0f, 3});
  for (int b = 0; b < 256; ++b) m.pieces.push_back({fmt::format("<0x{:02X}>", b), 0.0f, 6});

  // Chat placeholders at InternLM2's real ids when they fit, else at the top.
  const int32_t chat0 = internlm2_chat ? (model_vocab_size >= 92544 ? 92538 : model_vocab_size - 6)
                                       : model_vocab_size;
  const size_t n_normal = size_t(model_vocab_size) - 259 - size_t(n_chat);

  const std::string space = "\xE2\x96\x81";
  std::vector<std::string> order;
  std::unordered_set<std::string> vocab;
  auto add_char = [&](const std::string& c) {
    if (vocab.insert(c).second) order.push_back(c);
  };
  add_char(space);
  for (char c = 'a'; c <= 'z'; ++c) add_char(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) add_char(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) add_char(std::string(1, c));
  for (char c : std::string(".,!?'\"-:;()")) add_char(std::string(1, c));
  const size_t n_chars = order.size();
  auto merges = learn_merges(corpus_words(space, [](char c) { return std::string(1, c); }),
                             n_normal - n_chars);
  for (const auto& [a, b] : merges)
    if (vocab.insert(a + b).second) order.push_back(a + b);
  std::vector<std::string> letters;
  for (char c = 'a'; c <= 'z'; ++c) letters.push_back(std::string(1, c));
  for (const auto& l : letters)
    if (order.size() < n_normal && vocab.insert(space + l).second) {
      merges.emplace_back(space, l);
      order.push_back(space + l);
    }
  fill_merges(merges, vocab, order, n_normal, letters);
  check(order.size() == n_normal, "synth tokenizer: built {} pieces, wanted {}", order.size(),
        n_normal);
  // sentencepiece BPE merges by score: single characters outrank nothing, and each merge
  // outranks the ones learned after it.
  for (size_t i = 0; i < order.size(); ++i) {
    const float score = i < n_chars ? 0.0f : -float(i - n_chars);
    m.pieces.push_back({order[i], score, 1});
  }
  if (internlm2_chat) {
    std::vector<compiler::SpPiece> chat;
    for (int k = 0; k < 6; ++k)
      chat.push_back({fmt::format("[UNUSED_TOKEN_{}]", 141 + k), 0.0f, 4});
    m.pieces.insert(m.pieces.begin() + chat0, chat.begin(), chat.end());
  }
  check(m.pieces.size() == size_t(model_vocab_size), "synth tokenizer: {} pieces, wanted {}",
        m.pieces.size(), model_vocab_size);
  const auto bytes = compiler::serialize_sentencepiece_model(m);
  write_text_file(dir / "tokenizer.model", std::string(bytes.begin(), bytes.end()));

  ojson added = ojson::object();
  added["0"] = {{"content", "<unk>"}, {"special", true}};
  added["1"] = {{"content", "<s>"}, {"special", true}};
  added["2"] = {{"content", "</s>"}, {"special", true}};
  ojson cfg = {{"bos_token", "<s>"},
               {"eos_token", "</s>"},
               {"unk_token", "<unk>"},
               {"add_bos_token", true},
               {"add_eos_token", false}};
  if (internlm2_chat) {
    const char* names[6] = {"<|plugin|>",       "<|interpreter|>", "<|action_end|>",
                            "<|action_start|>", "<|im_end|>",      "<|im_start|>"};
    for (int k = 0; k < 6; ++k)
      added[std::to_string(chat0 + k)] = {{"content", names[k]}, {"special", true}};
    cfg["chat_template"] = kChatMl;
    cfg["tokenizer_class"] = "InternLM2Tokenizer";
  } else {
    cfg["tokenizer_class"] = "LlamaTokenizer";
  }
  cfg["added_tokens_decoder"] = added;
  write_text_file(dir / "tokenizer_config.json", cfg.dump(2));
}

}  // namespace edgevl::synth
