#pragma once
// Structural checks on JPEG data done before stb_image sees it (internal to src/vision).
#include <cstdint>
#include <span>
#include <string>

namespace edgevl::vision::detail {

// Empty when the marker structure is sound, else what is wrong (for an error message).
// Checks: segments fit in the file; every scan's components were declared by the frame
// header; every Huffman and quantisation table a scan needs was defined before it; the
// data reaches the end-of-image marker. stb_image (2.27) reads uninitialised memory for
// tables a file never defines - it crashed under the fuzzer - and silently decodes
// truncated files, where Pillow raises; both are refused here.
// require_tables: also demand the Huffman tables (needed for stb, not for libjpeg).
std::string jpeg_structure_problem(std::span<const uint8_t> bytes, bool require_tables);

}  // namespace edgevl::vision::detail
