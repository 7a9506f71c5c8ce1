#pragma once
// Video decoding for the vision front end, through FFmpeg's libraries (libavformat demuxes,
// libavcodec decodes, libswscale converts to RGB). The reference is transformers' default
// video loader (video_utils.read_video_pyav, PyAV on the same libraries): the frame count is
// the stream's nb_frames, the frame rate its average rate, frames are numbered in decode
// output order, the sampled ones converted to rgb24 at their size. Which frames are sampled is
// the processor's choice (sample_frame_indices: Qwen3-VL's sample_frames).
//
// The libraries are optional at build time: without them (video_supported() false) every
// decode throws a message saying so, and the rest of edgevl is unchanged.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "vision/image.h"

namespace edgevl::vision {

// Qwen3VLVideoProcessor's sampling settings (video_preprocessor_config.json; these are the
// class defaults): `fps` frames per second of video, at least min_frames, at most max_frames.
struct VideoSampling {
  double fps = 2.0;
  int32_t min_frames = 4;
  int32_t max_frames = 768;
};

// Qwen3VLVideoProcessor.sample_frames with fps given: n = int(total / video_fps * fps), clamped
// to [min_frames, max_frames] then to total; indices = numpy linspace(0, total - 1, n) rounded
// half to even. video_fps <= 0 (unknown) counts as 24, as the reference does.
std::vector<int64_t> sample_frame_indices(int64_t total_frames, double video_fps,
                                          const VideoSampling& s);

struct VideoLimits {
  int64_t max_pixels = 50'000'000;  // per frame, as DecodeLimits for an image
  int64_t max_frames = 100'000;     // frames in the stream (its nb_frames or counted)
};

// The sampled frames of one video.
struct Video {
  int width = 0, height = 0;
  int64_t total_frames = 0;
  double fps = 0;                // the stream's average frame rate; 0: unknown
  std::vector<int64_t> indices;  // sampled frame numbers, ascending
  std::vector<Image> frames;     // one RGB image per index
};

// Whether this build can decode video (FFmpeg's libraries were found).
bool video_supported();

// The bytes of a video file (missing, not a regular file, empty, over 2 GiB: an error naming
// it).
std::vector<uint8_t> read_video_file(const std::filesystem::path& p);

// Throws edgevl::Error naming the file for: a missing or unreadable file, no video stream, a
// codec libavcodec cannot decode, corrupt or truncated data (a sampled frame that never
// decodes), zero frames or dimensions, frames or pixels above the limits.
Video decode_video_file(const std::filesystem::path& p, const VideoSampling& s,
                        const VideoLimits& lim = {});
// The same from bytes in memory (a data: URL, the fuzzer); `name` is used in messages.
Video decode_video_memory(std::span<const uint8_t> bytes, const std::string& name,
                          const VideoSampling& s, const VideoLimits& lim = {});

}  // namespace edgevl::vision
