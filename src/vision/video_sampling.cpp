// Reading a video file, and the frame sampling of transformers' Qwen3VLVideoProcessor.sample_frames
// (fps given, num_frames not), in the reference's float64 arithmetic, so the same frames are
// picked.
#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "vision/video.h"

namespace edgevl::vision {

namespace {

// numpy's round (and Python's): to the nearest integer, ties to the even one.
double linspace_round(double x) {
  if (std::fabs(x - std::trunc(x)) == 0.5) return 2.0 * std::round(x / 2.0);
  return std::round(x);
}

}  // namespace

std::vector<uint8_t> read_video_file(const std::filesystem::path& p) {
  const std::string name = p.string();
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  check(!ec && std::filesystem::exists(st), "{}: video file not found", name);
  check(std::filesystem::is_regular_file(st), "{}: not a regular file", name);
  const uintmax_t size = std::filesystem::file_size(p, ec);
  check(!ec && size > 0, "{}: video file is empty (0 bytes)", name);
  check(size <= (uintmax_t(1) << 31), "{}: video file has {} bytes, more than the limit of 2 GiB",
        name, size);
  std::ifstream f(p, std::ios::binary);
  check(f.good(), "{}: cannot open the video file", name);
  std::vector<uint8_t> bytes(size_t(size), 0);
  f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  check(f.gcount() == std::streamsize(size), "{}: read {} of {} bytes", name, f.gcount(), size);
  return bytes;
}

std::vector<int64_t> sample_frame_indices(int64_t total, double video_fps, const VideoSampling& s) {
  check(total > 0, "a video with no frames");
  check(s.fps > 0 && s.min_frames > 0 && s.max_frames >= s.min_frames,
        "video sampling: fps {} and frames [{}, {}] are not valid", s.fps, s.min_frames,
        s.max_frames);
  // metadata.fps None: the reference samples as if the video ran at 24 frames a second.
  const double vfps = video_fps > 0 ? video_fps : 24.0;
  // int(total_num_frames / metadata.fps * fps): truncation toward zero.
  const double want = std::trunc(double(total) / vfps * s.fps);
  int64_t n = int64_t(std::min(want, double(INT64_MAX / 2)));
  n = std::min<int64_t>({std::max<int64_t>(n, s.min_frames), s.max_frames, total});
  // np.linspace(0, total - 1, n): i * step, the last one exactly total - 1.
  std::vector<int64_t> out(size_t(n), 0);
  if (n > 1) {
    const double step = double(total - 1) / double(n - 1);
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = int64_t(linspace_round(double(i) * step));
    out.back() = total - 1;
  }
  return out;
}

}  // namespace edgevl::vision
