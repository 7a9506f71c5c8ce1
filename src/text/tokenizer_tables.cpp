#include "text/tokenizer_tables.h"

#include <bit>

#include "core/error.h"

namespace edgevl::text {
namespace {

constexpr size_t kMaxSlots = size_t(1) << 26;

// Smallest power of two that keeps the load factor at or under 0.7: linear probing stays
// short there (a few probes per lookup) and the table is at most ~2.9x the entries.
size_t initial_capacity(size_t n) {
  if (n == 0) return 0;
  return std::bit_ceil(std::max<size_t>(16, (n * 10 + 6) / 7));
}

bool is_empty(const PieceSlot& s) {
  return s.id < 0;
}
bool is_empty(const MergeSlot& s) {
  return s.left < 0;
}

// Inserts entries in the given order (so the table is deterministic); doubles the capacity
// when some entry would land further than kMaxProbe from its home slot.
template <class Slot, class Hash, class Empty>
std::vector<Slot> build(const std::vector<Slot>& items, Hash&& hash, Empty&& empty,
                        uint32_t& max_probe) {
  for (size_t cap = initial_capacity(items.size());; cap *= 2) {
    check(cap <= kMaxSlots, "tokenizer: lookup table would need more than {} slots", kMaxSlots);
    std::vector<Slot> slots(cap, empty);
    const size_t mask = cap - 1;
    max_probe = 0;
    bool fits = true;
    for (const Slot& it : items) {
      size_t i = hash(it) & mask, k = 0;
      while (!is_empty(slots[i])) {
        i = (i + 1) & mask;
        ++k;
      }
      if (k > kMaxProbe) {
        fits = false;
        break;
      }
      slots[i] = it;
      max_probe = std::max<uint32_t>(max_probe, uint32_t(k));
    }
    if (fits) return slots;
  }
}

void check_shape(size_t slots, uint32_t max_probe, const std::string& what, const char* name) {
  check(slots == 0 || (std::has_single_bit(slots) && slots <= kMaxSlots),
        "{}: {} table has {} slots, not a power of two up to {} (corrupted file?)", what, name,
        slots, kMaxSlots);
  check(max_probe <= kMaxProbe && (slots == 0 || max_probe < slots),
        "{}: {} table probe length {} is out of range (corrupted file?)", what, name, max_probe);
}

}  // namespace

std::vector<PieceSlot> build_piece_table(
    const std::vector<std::pair<std::string_view, int32_t>>& entries, uint32_t& max_probe) {
  std::vector<PieceSlot> items;
  items.reserve(entries.size());
  for (const auto& [s, id] : entries) items.push_back({piece_hash(s), id});
  return build(
      items, [](const PieceSlot& s) { return s.hash; }, PieceSlot{0, -1}, max_probe);
}

std::vector<MergeSlot> build_merge_table(const std::vector<MergeSlot>& rules, uint32_t& max_probe) {
  return build(
      rules, [](const MergeSlot& s) { return merge_hash(s.left, s.right); },
      MergeSlot{-1, -1, 0, -1}, max_probe);
}

void validate_piece_table(const PieceTable& t, uint32_t n_pieces, const std::string& what,
                          const char* name) {
  check_shape(t.slots.size(), t.max_probe, what, name);
  // Branch-free first pass (vectorizes); the slow pass only runs to name the bad slot.
  // An id in [-1, n) is exactly uint32(id + 1) <= n.
  bool bad = false;
  for (const PieceSlot& s : t.slots) bad |= uint32_t(s.id) + 1u > n_pieces;
  if (bad)
    for (size_t i = 0; i < t.slots.size(); ++i) {
      const int32_t id = t.slots[i].id;
      if (id < -1 || id >= int64_t(n_pieces))
        fail("{}: {} table slot {} holds id {} outside the vocabulary (size {}) (corrupted file?)",
             what, name, i, id, n_pieces);
    }
}

void validate_merge_table(const MergeTable& t, uint32_t n_pieces, const std::string& what) {
  check_shape(t.slots.size(), t.max_probe, what, "merge");
  const int64_t n = n_pieces;
  bool bad = false;
  for (const MergeSlot& s : t.slots)
    bad |= (s.left != -1) & ((uint32_t(s.left) >= n_pieces) | (uint32_t(s.right) >= n_pieces) |
                             (uint32_t(s.result) >= n_pieces));
  if (bad)
    for (size_t i = 0; i < t.slots.size(); ++i) {
      const MergeSlot& s = t.slots[i];
      if (s.left == -1) continue;
      if (s.left < 0 || s.left >= n || s.right < 0 || s.right >= n || s.result < 0 || s.result >= n)
        fail(
            "{}: merge table slot {} ({} + {} -> {}) refers to ids outside the vocabulary (size "
            "{}) (corrupted file?)",
            what, i, s.left, s.right, s.result, n_pieces);
    }
}

}  // namespace edgevl::text
