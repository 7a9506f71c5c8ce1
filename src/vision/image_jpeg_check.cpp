#include "vision/image_jpeg_check.h"

#include <fmt/format.h>
#include <array>

namespace edgevl::vision::detail {

std::string jpeg_structure_problem(std::span<const uint8_t> b, bool require_tables) {
  const size_t n = b.size();
  std::array<bool, 4> dqt{}, dc{}, ac{};
  std::array<int, 256> comp_tq;  // frame component id -> quantisation table, -1 if absent
  comp_tq.fill(-1);
  bool have_frame = false, progressive = false, in_scan = false;
  size_t i = 2;  // after SOI
  while (i < n) {
    if (in_scan) {
      // Entropy-coded data: FF00 is a stuffed byte, FFD0-D7 restart markers, FFFF fill.
      if (b[i] != 0xFF) {
        ++i;
        continue;
      }
      if (i + 1 >= n) break;
      const uint8_t m = b[i + 1];
      if (m == 0x00 || (m >= 0xD0 && m <= 0xD7)) {
        i += 2;
        continue;
      }
      if (m == 0xFF) {
        ++i;
        continue;
      }
      in_scan = false;
    }
    if (b[i] != 0xFF) return fmt::format("has stray bytes at offset {} between segments", i);
    while (i < n && b[i] == 0xFF) ++i;
    if (i >= n) break;
    const uint8_t m = b[i++];
    if (m == 0xD9) return {};  // EOI: anything after it is ignored, as by libjpeg
    if ((m >= 0xD0 && m <= 0xD7) || m == 0x01) continue;  // markers without a length
    if (i + 2 > n) break;
    const size_t len = (size_t{b[i]} << 8) | b[i + 1];
    if (len < 2) return fmt::format("segment FF{:02X} at offset {} has length {}", m, i, len);
    if (i + len > n) break;
    const uint8_t* p = &b[i + 2];
    const size_t plen = len - 2;
    if (m == 0xDB) {  // DQT: [Pq|Tq] then 64 or 128 bytes, repeated
      for (size_t k = 0; k < plen;) {
        dqt[p[k] & 3] = true;
        k += 1 + ((p[k] >> 4) ? 128 : 64);
      }
    } else if (m == 0xC4) {  // DHT: [Tc|Th] 16 counts, then that many symbols, repeated
      for (size_t k = 0; k + 17 <= plen;) {
        (p[k] >> 4 ? ac : dc)[p[k] & 3] = true;
        size_t count = 0;
        for (int c = 1; c <= 16; ++c) count += p[k + c];
        k += 17 + count;
      }
    } else if (m == 0xC0 || m == 0xC1 || m == 0xC2) {  // SOF baseline/extended/progressive
      if (plen < 6) return "frame header is too short";
      have_frame = true;
      progressive = m == 0xC2;
      comp_tq.fill(-1);
      const size_t nf = p[5];
      if (plen < 6 + 3 * nf) return "frame header is shorter than its component list";
      for (size_t c = 0; c < nf; ++c) comp_tq[p[6 + 3 * c]] = p[8 + 3 * c] & 3;
    } else if (m == 0xDA) {  // SOS: Ns, [Cs, Td|Ta] x Ns, Ss, Se, Ah|Al
      if (!have_frame) return "has a scan before the frame header";
      if (plen < 1 || plen < 1 + 2 * size_t{p[0]} + 3) return "scan header is too short";
      const size_t ns = p[0];
      const uint8_t ss = p[1 + 2 * ns], ah = p[3 + 2 * ns] >> 4;
      const uint8_t se = p[2 + 2 * ns];
      const bool needs_dc = progressive ? (ss == 0 && ah == 0) : true;
      const bool needs_ac = progressive ? ss > 0 : true;
      for (size_t c = 0; c < ns; ++c) {
        const int tq = comp_tq[p[1 + 2 * c]];
        if (tq < 0) return fmt::format("scan uses component {} not in the frame", p[1 + 2 * c]);
        if (!dqt[tq]) return fmt::format("uses quantisation table {} before defining it", tq);
        const int td = p[2 + 2 * c] >> 4 & 3, ta = p[2 + 2 * c] & 3;
        // libjpeg falls back to the standard tables for Motion-JPEG frames without DHT;
        // stb cannot, so such files are refused rather than decoded from garbage.
        if (require_tables && needs_dc && !dc[td])
          return fmt::format("uses Huffman table DC{} which it never defines", td);
        if (require_tables && needs_ac && se > 0 && !ac[ta])
          return fmt::format("uses Huffman table AC{} which it never defines", ta);
      }
      in_scan = true;
    }
    i += len;
  }
  return "data is truncated (no end-of-image marker)";
}

}  // namespace edgevl::vision::detail
