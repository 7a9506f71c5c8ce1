#pragma once
// The tokenizer's lookup tables as they are stored in the .evb tokenizer section: built once
// by the compiler, then probed straight from the mapped file at run time, so loading a model
// does no per-piece or per-merge work. Both tables use linear probing in a power-of-two array;
// the hash functions below are therefore part of the file format.
//
// The bytes are untrusted: lookups index only with `& mask`, never follow an id before it was
// range-checked at load (validate_*), and stop after `max_probe` steps, so a corrupted table
// can give wrong answers but never reads outside its arrays or loops.
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace edgevl::text {

inline constexpr uint32_t kMaxProbe = 256;  // builders grow the table rather than exceed it

// FNV-1a followed by murmur3's finalizer (FNV alone leaves the low bits, which index the
// table, poorly mixed for short strings).
inline uint32_t piece_hash(std::string_view s) {
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ uint8_t(c)) * 16777619u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

inline uint32_t merge_hash(int32_t left, int32_t right) {
  const uint64_t k = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  return uint32_t((k * 0x9E3779B97F4A7C15ull) >> 32);
}

struct PieceSlot {
  uint32_t hash;
  int32_t id;  // -1: empty
};

struct MergeSlot {
  int32_t left;  // -1: empty
  int32_t right;
  int32_t rank;
  int32_t result;  // id of the piece spelled left + right
};

struct PieceTable {
  std::span<const PieceSlot> slots;  // empty, or a power of two long
  uint32_t max_probe = 0;            // longest displacement of any entry from its home slot

  // `piece_of(id)` spells a candidate; ids come from the table and were validated < n.
  template <class PieceOf>
  int32_t find(std::string_view s, PieceOf&& piece_of) const {
    if (slots.empty()) return -1;
    const uint32_t h = piece_hash(s);
    const size_t mask = slots.size() - 1;
    for (size_t k = 0, i = h & mask; k <= max_probe; ++k, i = (i + 1) & mask) {
      const PieceSlot& e = slots[i];
      if (e.id < 0) return -1;
      if (e.hash == h && piece_of(e.id) == s) return e.id;
    }
    return -1;
  }
};

struct MergeTable {
  std::span<const MergeSlot> slots;
  uint32_t max_probe = 0;

  const MergeSlot* find(int32_t left, int32_t right) const {
    if (slots.empty()) return nullptr;
    const size_t mask = slots.size() - 1;
    for (size_t k = 0, i = merge_hash(left, right) & mask; k <= max_probe;
         ++k, i = (i + 1) & mask) {
      const MergeSlot& e = slots[i];
      if (e.left < 0) return nullptr;
      if (e.left == left && e.right == right) return &e;
    }
    return nullptr;
  }
};

// --- building (compiler side) ---
// `entries` are (spelling, id) with distinct spellings; the spans must outlive the call only.
std::vector<PieceSlot> build_piece_table(
    const std::vector<std::pair<std::string_view, int32_t>>& entries, uint32_t& max_probe);
// `rules` are distinct (left, right) pairs with their rank and result.
std::vector<MergeSlot> build_merge_table(const std::vector<MergeSlot>& rules, uint32_t& max_probe);

// --- validation of tables read from a file (throws edgevl::Error prefixed with `what`) ---
void validate_piece_table(const PieceTable& t, uint32_t n_pieces, const std::string& what,
                          const char* name);
void validate_merge_table(const MergeTable& t, uint32_t n_pieces, const std::string& what);

}  // namespace edgevl::text
