// Byte-level BPE (GPT-2 / Qwen2): split the text with the pre-tokenizer pattern, spell each
// word's bytes as byte pieces, then apply merges lowest rank first (leftmost on ties), as HF
// tokenizers does. A heap over a linked list keeps long words O(n log n).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <queue>

#include "text/tokenizer_impl.h"
#include "text/unicode_nfc.h"

namespace edgevl::text {

SplitRegex::SplitRegex(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MATCH_INVALID_UTF: invalid bytes in user text never match instead of failing the call;
  // they then end up in a gap and are still encoded byte by byte.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("tokenizer: pre-tokenizer pattern does not compile at offset {}: {}", err_off,
         reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
  code_ = code;
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void SplitRegex::split_spans(std::string_view text,
                             std::vector<std::pair<size_t, size_t>>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  // Match data is per call: the compiled pattern is shared between threads, this is not.
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  check(md != nullptr, "tokenizer: out of memory creating regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, done = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    check(rc >= 0, "tokenizer: pre-tokenizer regex failed with code {}", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: step over one character
      pos = b + 1;
      while (pos < text.size() && (uint8_t(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (b > done) out.emplace_back(done, b);
    out.emplace_back(b, e);
    done = pos = e;
  }
  if (done < text.size()) out.emplace_back(done, text.size());
}

void Tokenizer::Impl::encode_bytelevel(std::string_view text, std::vector<int32_t>& out) const {
  std::string normalized;
  if (flag(section::kNfc) && !nfc_trivially_stable(text)) {
    normalized = nfc_normalize(text);
    text = normalized;
  }
  if (!regex) {
    bpe_word(text, out);
    return;
  }
  std::vector<std::pair<size_t, size_t>> spans;
  regex->split_spans(text, spans);
  for (auto [b, e] : spans) bpe_word(text.substr(b, e - b), out);
}

void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  const size_t n = word.size();
  if (n == 0) return;
  if (n == 1) {
    out.push_back(byte_id[uint8_t(word[0])]);
    return;
  }
  if (flag(section::kIgnoreMerges)) {
    std::string spelled;
    for (char c : word) spelled += byte_to_unicode(uint8_t(c));
    const int32_t id = find_piece(spelled);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Sym {
    int32_t id, prev, next;
  };
  std::vector<Sym> sym(n);
  for (size_t i = 0; i < n; ++i)
    sym[i] = {byte_id[uint8_t(word[i])], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};

  struct Cand {
    int32_t rank, left, left_id, right_id, result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = sym[l].next;
    if (r < 0) return;
    if (const MergeSlot* m = merge_table.find(sym[l].id, sym[r].id))
      heap.push({m->rank, l, sym[l].id, sym[r].id, m->result});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(int32_t(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const Sym& l = sym[c.left];
    // Stale entries: the left symbol was absorbed or either side changed since the push.
    if (l.id != c.left_id || l.next < 0 || sym[l.next].id != c.right_id) continue;
    const int32_t r = l.next;
    sym[c.left].id = c.result;
    sym[c.left].next = sym[r].next;
    if (sym[r].next >= 0) sym[sym[r].next].prev = c.left;
    sym[r].id = -1;
    consider(sym[c.left].prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace edgevl::text
