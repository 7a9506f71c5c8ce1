#pragma once
// The one image path of every caller (CLI, server, C API, calibration): an image file, encoded
// bytes or an RGB buffer in; prepared the way the model family's processor makes it
// (runtime/execution/image_processor.h: InternVL's tiles, Qwen-VL's resized patches); the
// vision graph's features out, computed once per distinct image (a bounded LRU cache keyed by
// the image's content) and only when a prompt needs them.
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/execution/engine.h"
#include "runtime/execution/image_processor.h"
#include "vision/image.h"
#include "vision/preprocess.h"

namespace edgevl {

struct ImageOptions {
  int64_t max_pixels = 50'000'000;  // decoded width x height, checked before pixels are allocated
  int max_tiles = 0;                // InternVL: 0 = the model's max_dynamic_patch
  size_t cache_bytes = 0;           // features kept for images seen again (0 = none)
  bool keep_pixels = false;         // keep the normalised tiles after encoding (--dump)
};

using ImageRef = std::shared_ptr<PreparedImage>;

struct VisionStats {
  int64_t images = 0, tiles_encoded = 0, cache_hits = 0;
  double vision_ms = 0;  // time in the vision graph, all tiles
};

// prepare_*() are thread-safe; features() must be called by the engine's one caller.
class VisionEncoder {
 public:
  // Throws when the engine's model has no vision tower, naming the binary.
  explicit VisionEncoder(Engine& engine, ImageOptions opts = {});
  // Whether `m` takes images (ImageProcessor::for_model finds a processor for it).
  static bool takes_images(const Model& m);

  const ImageOptions& options() const { return opts_; }
  const ImageProcessor& processor() const { return *proc_; }

  // Decodes (JPEG, PNG, BMP) and preprocesses. `name` names the image in error messages.
  ImageRef prepare_file(const std::filesystem::path& path);
  ImageRef prepare_bytes(std::span<const uint8_t> encoded, const std::string& name);
  // 8-bit RGB, row-major, no padding: width * height * 3 bytes.
  ImageRef prepare_rgb(int width, int height, std::span<const uint8_t> rgb);
  // A video file (or its bytes): decoded, frames sampled and preprocessed by the family's
  // video processor (Qwen-VL); throws for a model without one or a build without FFmpeg.
  ImageRef prepare_video_file(const std::filesystem::path& path);
  ImageRef prepare_video_bytes(std::span<const uint8_t> encoded, const std::string& name);
  // InternVL tiles already normalised (benchmarks, tests).
  ImageRef prepare_tiles(vision::Tiles tiles);

  // The features of `img` (and its DeepStack rows in img.deepstack): from the cache when an
  // image with the same key was encoded before, else through the vision graph.
  std::shared_ptr<const std::vector<float>> features(PreparedImage& img);

  VisionStats stats() const;

 private:
  // From the cache when `key` is there (null otherwise).
  ImageRef cached(uint64_t key, double t0_ms);
  ImageRef finish(uint64_t key, const vision::Image& decoded, double t0_ms);
  void remember(const PreparedImage& img);

  Engine& engine_;
  ImageOptions opts_;
  // prepare_*() may run on any thread (a server decodes images in its request threads);
  // features() runs on the engine's thread. The cache and the counters are shared.
  mutable std::mutex mu_;
  std::unique_ptr<ImageProcessor> proc_;
  VisionStats stats_;
  // LRU: most recent first; the map points into the list.
  struct Entry {
    uint64_t key;
    int32_t tiles, tokens;
    MergedGrid grid;
    std::shared_ptr<const std::vector<float>> features, deepstack;
    int32_t groups = 0;  // a video's (PreparedImage::groups)
    std::vector<double> timestamps;
  };
  std::list<Entry> lru_;
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
  size_t cached_bytes_ = 0;
};

// A 64-bit content hash (not cryptographic: a cache key).
uint64_t content_hash(std::span<const uint8_t> bytes, uint64_t seed = 0);

}  // namespace edgevl
