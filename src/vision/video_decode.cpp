// Decoding a video with FFmpeg's libraries the way transformers' read_video_pyav does through
// PyAV: total = the stream's nb_frames (counted from the packets when the container does not
// store it), fps = its avg_frame_rate, the frames numbered in decode output order (the
// decoder drained at the end, as PyAV's container.decode does), each sampled frame converted
// to rgb24 by libswscale at its own size with PyAV's defaults (bilinear; the frame's colour
// matrix and range).
#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "vision/video.h"

#ifdef EDGEVL_HAVE_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}
#endif

namespace edgevl::vision {

#ifndef EDGEVL_HAVE_FFMPEG

bool video_supported() {
  return false;
}

namespace {
[[noreturn]] void refuse(const std::string& name) {
  fail(
      "{}: this edgevl was built without FFmpeg's libraries (libavformat, libavcodec, "
      "libswscale): it cannot decode video (install them, e.g. scripts/setup.sh, and rebuild)",
      name);
}
}  // namespace

Video decode_video_file(const std::filesystem::path& p, const VideoSampling&, const VideoLimits&) {
  refuse(p.string());
}
Video decode_video_memory(std::span<const uint8_t>, const std::string& name, const VideoSampling&,
                          const VideoLimits&) {
  refuse(name);
}

#else

bool video_supported() {
  return true;
}

namespace {

std::string av_error(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

struct FormatCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};
// The custom I/O of a video in memory: the context and the buffer libavformat reads through.
struct IoFree {
  void operator()(AVIOContext* io) const {
    av_freep(&io->buffer);
    avio_context_free(&io);
  }
};

struct MemoryReader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
};

int read_packet(void* opaque, uint8_t* buf, int size) {
  auto* r = static_cast<MemoryReader*>(opaque);
  const size_t n = std::min(size_t(size), r->bytes.size() - r->pos);
  if (n == 0) return AVERROR_EOF;
  std::memcpy(buf, r->bytes.data() + r->pos, n);
  r->pos += n;
  return int(n);
}

int64_t seek_memory(void* opaque, int64_t offset, int whence) {
  auto* r = static_cast<MemoryReader*>(opaque);
  const int64_t size = int64_t(r->bytes.size());
  if ((whence & ~AVSEEK_FORCE) == AVSEEK_SIZE) return size;
  int64_t base = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = int64_t(r->pos); break;
    case SEEK_END: base = size; break;
    default: return AVERROR(EINVAL);
  }
  const int64_t to = base + offset;
  if (to < 0 || to > size) return AVERROR(EINVAL);
  r->pos = size_t(to);
  return to;
}

// One opened container: a file path, or bytes through custom I/O.
struct Container {
  std::unique_ptr<AVIOContext, IoFree> io;
  std::unique_ptr<AVFormatContext, FormatCloser> fmt;
  MemoryReader reader;
};

void open_container(Container& c, const std::string& name, const std::filesystem::path* path,
                    std::span<const uint8_t> bytes) {
  check(path || !bytes.empty(), "{}: video file is empty (0 bytes)", name);
  AVFormatContext* f = avformat_alloc_context();
  check(f != nullptr, "{}: out of memory opening the video", name);
  if (!path) {
    c.reader = {bytes, 0};
    constexpr int kBuf = 1 << 16;
    auto* buf = static_cast<uint8_t*>(av_malloc(kBuf));
    AVIOContext* io =
        buf ? avio_alloc_context(buf, kBuf, 0, &c.reader, read_packet, nullptr, seek_memory)
            : nullptr;
    if (!io) {
      av_free(buf);
      avformat_free_context(f);
      fail("{}: out of memory opening the video", name);
    }
    c.io.reset(io);
    f->pb = io;
    f->flags |= AVFMT_FLAG_CUSTOM_IO;
  }
  // avformat_open_input frees the context on failure.
  const int err = avformat_open_input(&f, path ? path->c_str() : nullptr, nullptr, nullptr);
  check(err >= 0, "{}: cannot open the video: {}", name, av_error(err));
  c.fmt.reset(f);
  const int info = avformat_find_stream_info(f, nullptr);
  check(info >= 0, "{}: cannot read the video's streams: {}", name, av_error(info));
}

// Rewinds to the start for a second pass (PyAV's container.seek(0)).
void rewind(Container& c, int stream, const std::string& name) {
  const int err = av_seek_frame(c.fmt.get(), stream, 0, AVSEEK_FLAG_BACKWARD);
  check(err >= 0, "{}: cannot seek back to the start of the video: {}", name, av_error(err));
}

Video decode(Container& c, const std::string& name, const VideoSampling& s,
             const VideoLimits& lim) {
  AVFormatContext* fmt = c.fmt.get();
  const int stream = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  check(stream >= 0, "{}: no video stream in the file", name);
  AVStream* st = fmt->streams[stream];
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  check(codec != nullptr, "{}: video codec '{}' is not supported by this libavcodec", name,
        avcodec_get_name(st->codecpar->codec_id));
  Video v;
  v.width = st->codecpar->width;
  v.height = st->codecpar->height;
  check(v.width > 0 && v.height > 0, "{}: the video has zero dimensions ({}x{})", name, v.width,
        v.height);
  check(int64_t(v.width) * v.height <= lim.max_pixels,
        "{}: {}x{} = {} pixels per frame exceeds the limit of {} pixels", name, v.width, v.height,
        int64_t(v.width) * v.height, lim.max_pixels);
  if (st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0) v.fps = av_q2d(st->avg_frame_rate);

  std::unique_ptr<AVPacket, PacketFree> pkt(av_packet_alloc());
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  check(pkt && frame, "{}: out of memory decoding the video", name);
  v.total_frames = st->nb_frames;
  if (v.total_frames <= 0) {
    // The container does not store the count (e.g. Matroska): one frame per packet.
    int64_t n = 0;
    while (av_read_frame(fmt, pkt.get()) >= 0) {
      n += pkt->stream_index == stream;
      av_packet_unref(pkt.get());
    }
    v.total_frames = n;
    rewind(c, stream, name);
  }
  check(v.total_frames > 0, "{}: the video has no frames", name);
  check(v.total_frames <= lim.max_frames, "{}: {} frames exceeds the limit of {} frames", name,
        v.total_frames, lim.max_frames);
  v.indices = sample_frame_indices(v.total_frames, v.fps, s);

  std::unique_ptr<AVCodecContext, CodecCloser> dec(avcodec_alloc_context3(codec));
  check(dec != nullptr, "{}: out of memory decoding the video", name);
  int err = avcodec_parameters_to_context(dec.get(), st->codecpar);
  check(err >= 0, "{}: bad codec parameters: {}", name, av_error(err));
  dec->thread_count = 1;  // the engine's threads are busy elsewhere; frames come in order anyway
  err = avcodec_open2(dec.get(), codec, nullptr);
  check(err >= 0, "{}: cannot open the {} decoder: {}", name, codec->name, av_error(err));

  std::unique_ptr<SwsContext, SwsFree> sws;
  std::vector<uint8_t> rgb;  // swscale's output rows
  int64_t index = 0;
  size_t next = 0;  // the next sampled index to keep
  const int64_t last = v.indices.back();
  // Takes every frame the decoder has ready; false once the last sampled one is kept.
  auto drain = [&]() -> bool {
    for (;;) {
      const int r = avcodec_receive_frame(dec.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return true;
      check(r >= 0, "{}: corrupt video data at frame {}: {}", name, index, av_error(r));
      if (next < v.indices.size() && v.indices[next] == index) {
        const AVFrame* f = frame.get();
        check(f->width > 0 && f->height > 0 && int64_t(f->width) * f->height <= lim.max_pixels,
              "{}: frame {} is {}x{} (limit {} pixels)", name, index, f->width, f->height,
              lim.max_pixels);
        sws.reset(sws_getCachedContext(sws.release(), f->width, f->height, AVPixelFormat(f->format),
                                       f->width, f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr,
                                       nullptr, nullptr));
        check(sws != nullptr, "{}: cannot convert frame {} (pixel format {}) to RGB", name, index,
              av_get_pix_fmt_name(AVPixelFormat(f->format)));
        // PyAV passes the frame's colour matrix and range (unspecified: BT.601, limited).
        const int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : int(f->colorspace);
        const int full = f->color_range == AVCOL_RANGE_JPEG;
        sws_setColorspaceDetails(sws.get(), sws_getCoefficients(cs), full,
                                 sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
        // swscale's SIMD writes whole vectors past a row's end: rows of an aligned stride, one
        // spare row, then copied out tight.
        const size_t row = size_t(f->width) * 3, stride = (row + 63) / 64 * 64;
        rgb.resize(stride * size_t(f->height + 1));
        uint8_t* dst[4] = {rgb.data(), nullptr, nullptr, nullptr};
        const int dst_stride[4] = {int(stride), 0, 0, 0};
        sws_scale(sws.get(), f->data, f->linesize, 0, f->height, dst, dst_stride);
        Image img;
        img.width = f->width;
        img.height = f->height;
        img.rgb.resize(row * size_t(img.height));
        for (int y = 0; y < img.height; ++y)
          std::memcpy(img.rgb.data() + size_t(y) * row, rgb.data() + size_t(y) * stride, row);
        v.frames.push_back(std::move(img));
        while (next < v.indices.size() && v.indices[next] == index) ++next;
      }
      av_frame_unref(frame.get());
      if (index++ >= last) return false;
    }
  };
  bool more = true;
  while (more) {
    const int r = av_read_frame(fmt, pkt.get());
    if (r == AVERROR_EOF) break;
    check(r >= 0, "{}: cannot read the video: {}", name, av_error(r));
    if (pkt->stream_index == stream) {
      const int sent = avcodec_send_packet(dec.get(), pkt.get());
      av_packet_unref(pkt.get());
      check(sent >= 0 || sent == AVERROR(EAGAIN), "{}: corrupt video data at frame {}: {}", name,
            index, av_error(sent));
      more = drain();
    } else {
      av_packet_unref(pkt.get());
    }
  }
  if (more) {  // end of file: the frames the decoder still holds
    avcodec_send_packet(dec.get(), nullptr);
    drain();
  }
  check(v.frames.size() == v.indices.size(),
        "{}: truncated or corrupt video: {} frames decoded, the stream declares {} (frame {} "
        "was to be sampled)",
        name, index, v.total_frames, next < v.indices.size() ? v.indices[next] : last);
  // Repeated indices (a video shorter than min_frames cannot have them: n <= total) would
  // share a frame; linspace over total >= n gives distinct ones, so one image per index.
  return v;
}

}  // namespace

Video decode_video_file(const std::filesystem::path& p, const VideoSampling& s,
                        const VideoLimits& lim) {
  const std::string name = p.string();
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  check(!ec && std::filesystem::exists(st), "{}: video file not found", name);
  check(std::filesystem::is_regular_file(st), "{}: not a regular file", name);
  check(std::filesystem::file_size(p, ec) > 0 && !ec, "{}: video file is empty (0 bytes)", name);
  av_log_set_level(AV_LOG_QUIET);  // errors reach the user through the messages above
  Container c;
  open_container(c, name, &p, {});
  return decode(c, name, s, lim);
}

Video decode_video_memory(std::span<const uint8_t> bytes, const std::string& name,
                          const VideoSampling& s, const VideoLimits& lim) {
  av_log_set_level(AV_LOG_QUIET);
  Container c;
  open_container(c, name, nullptr, bytes);
  return decode(c, name, s, lim);
}

#endif

}  // namespace edgevl::vision
