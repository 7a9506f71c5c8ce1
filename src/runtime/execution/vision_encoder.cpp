#include "runtime/execution/vision_encoder.h"

#include <chrono>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"
#include "vision/video.h"

namespace edgevl {

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

}  // namespace

uint64_t content_hash(std::span<const uint8_t> bytes, uint64_t seed) {
  // Two independent multiply-xor lanes over 8-byte words, then a finalizer: GB/s, and a
  // collision between two different images of a cache is ~2^-64.
  uint64_t a = mix(seed ^ 0x9e3779b97f4a7c15ULL ^ bytes.size()), b = mix(a + 1);
  size_t i = 0;
  for (; i + 16 <= bytes.size(); i += 16) {
    uint64_t x, y;
    std::memcpy(&x, bytes.data() + i, 8);
    std::memcpy(&y, bytes.data() + i + 8, 8);
    a = (a ^ x) * 0x100000001b3ULL + (a >> 29);
    b = (b ^ y) * 0xd6e8feb86659fd93ULL + (b >> 31);
  }
  if (i + 8 <= bytes.size()) {
    uint64_t x;
    std::memcpy(&x, bytes.data() + i, 8);
    a = (a ^ x) * 0x100000001b3ULL + (a >> 29);
    i += 8;
  }
  uint64_t tail = 0;  // the last 0..7 bytes
  for (unsigned k = 0; i < bytes.size(); ++i, k += 8) tail |= uint64_t(bytes[i]) << k;
  return mix(a ^ mix(b ^ tail));
}

VisionEncoder::VisionEncoder(Engine& engine, ImageOptions opts)
    : engine_(engine),
      opts_(opts),
      proc_(ImageProcessor::for_model(engine.model(), opts.max_tiles)) {
  check(proc_ != nullptr, "{} is a text-only model: it cannot take images",
        engine.model().file().path());
  check(opts.max_pixels > 0, "the image pixel limit must be positive (got {})", opts.max_pixels);
}

bool VisionEncoder::takes_images(const Model& m) {
  return ImageProcessor::for_model(m) != nullptr;
}

ImageRef VisionEncoder::prepare_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = vision::read_image_file(path);
  return prepare_bytes(bytes, path.string());
}

ImageRef VisionEncoder::prepare_bytes(std::span<const uint8_t> encoded, const std::string& name) {
  const double t0 = now_ms();
  const uint64_t key = content_hash(encoded, proc_->settings_key());
  if (ImageRef hit = cached(key, t0)) return hit;
  vision::DecodeLimits lim;
  lim.max_pixels = opts_.max_pixels;
  const vision::Image img = vision::decode_image_memory(encoded, name, lim);
  return finish(key, img, t0);
}

ImageRef VisionEncoder::prepare_video_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = vision::read_video_file(path);
  return prepare_video_bytes(bytes, path.string());
}

ImageRef VisionEncoder::prepare_video_bytes(std::span<const uint8_t> encoded,
                                            const std::string& name) {
  const double t0 = now_ms();
  check(proc_->takes_video(), "{}: {} takes images but not videos", name,
        engine_.model().file().path());
  const uint64_t key = content_hash(encoded, proc_->settings_key() ^ 0x766964656fULL);
  if (ImageRef hit = cached(key, t0)) return hit;
  auto img = std::make_shared<PreparedImage>();
  img->key = key;
  proc_->preprocess_video(nullptr, encoded, name, opts_.max_pixels, *img);
  img->preprocess_ms = now_ms() - t0;
  std::lock_guard lock(mu_);
  ++stats_.images;
  return img;
}

ImageRef VisionEncoder::prepare_rgb(int width, int height, std::span<const uint8_t> rgb) {
  const double t0 = now_ms();
  check(width > 0 && height > 0, "RGB image of {}x{} pixels: both sides must be positive", width,
        height);
  check(int64_t(width) * height <= opts_.max_pixels,
        "RGB image of {}x{} = {} pixels exceeds the limit of {} pixels", width, height,
        int64_t(width) * height, opts_.max_pixels);
  check(rgb.size() == size_t(width) * size_t(height) * 3,
        "RGB image of {}x{} needs {} bytes (3 per pixel, no padding), got {}", width, height,
        size_t(width) * size_t(height) * 3, rgb.size());
  const uint64_t key = content_hash(rgb, (uint64_t(width) << 40) ^ (uint64_t(height) << 16) ^
                                             proc_->settings_key() ^ 0x5247422dULL);
  if (ImageRef hit = cached(key, t0)) return hit;
  vision::Image img;
  img.width = width;
  img.height = height;
  img.rgb.assign(rgb.begin(), rgb.end());
  return finish(key, img, t0);
}

ImageRef VisionEncoder::prepare_tiles(vision::Tiles tiles) {
  const VisionConfig* v = engine_.model().vision();
  check(v != nullptr && !proc_->positions_3d(), "{}: prepared tiles are InternVL's input",
        engine_.model().file().path());
  const int64_t tile_floats = 3 * int64_t(v->image_size) * v->image_size;
  check(tiles.count > 0 && int64_t(tiles.pixels.size()) == tiles.count * tile_floats,
        "prepared tiles: {} floats for {} tiles of {} floats", tiles.pixels.size(), tiles.count,
        tile_floats);
  auto img = std::make_shared<PreparedImage>();
  img->key = content_hash(
      {reinterpret_cast<const uint8_t*>(tiles.pixels.data()), tiles.pixels.size() * sizeof(float)},
      0x74696c6573ULL);
  img->tiles = tiles.count;
  img->tokens = tiles.count * int32_t(v->tokens_per_tile());
  img->pixels.pixels = std::move(tiles.pixels);
  img->pixels.shape = {tiles.count, 3, v->image_size, v->image_size};
  std::lock_guard lock(mu_);
  ++stats_.images;
  return img;
}

ImageRef VisionEncoder::cached(uint64_t key, double t0_ms) {
  std::lock_guard lock(mu_);
  const auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  // Seen before: the tile count and the features come from the cache, nothing is decoded.
  lru_.splice(lru_.begin(), lru_, found->second);
  auto img = std::make_shared<PreparedImage>();
  img->key = key;
  img->tiles = found->second->tiles;
  img->tokens = found->second->tokens;
  img->grid = found->second->grid;
  img->features = found->second->features;
  img->deepstack = found->second->deepstack;
  img->groups = found->second->groups;
  img->timestamps = found->second->timestamps;
  ++stats_.images;
  ++stats_.cache_hits;
  img->preprocess_ms = now_ms() - t0_ms;
  return img;
}

ImageRef VisionEncoder::finish(uint64_t key, const vision::Image& decoded, double t0_ms) {
  auto img = std::make_shared<PreparedImage>();
  img->key = key;
  proc_->preprocess(decoded, *img);
  img->preprocess_ms = now_ms() - t0_ms;
  std::lock_guard lock(mu_);
  ++stats_.images;
  return img;
}

VisionStats VisionEncoder::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::shared_ptr<const std::vector<float>> VisionEncoder::features(PreparedImage& img) {
  if (img.features) return img.features;
  {
    // Encoded since this one was prepared (two requests with the same image)?
    std::lock_guard lock(mu_);
    if (const auto found = index_.find(img.key); found != index_.end()) {
      ++stats_.cache_hits;
      img.features = found->second->features;
      img.deepstack = found->second->deepstack;
      img.pixels = {};
      return img.features;
    }
  }
  const double t0 = now_ms();
  proc_->encode(engine_, img);
  check(img.features &&
            img.features->size() == size_t(img.tokens) * size_t(engine_.model().config().hidden),
        "internal: {} image feature values for {} tokens", img.features ? img.features->size() : 0,
        img.tokens);
  if (!opts_.keep_pixels) img.pixels = {};
  std::lock_guard lock(mu_);
  stats_.vision_ms += now_ms() - t0;
  stats_.tiles_encoded += img.tiles;
  remember(img);
  return img.features;
}

// Called with mu_ held.
void VisionEncoder::remember(const PreparedImage& img) {
  const auto& f = img.features;
  const size_t bytes = (f->size() + (img.deepstack ? img.deepstack->size() : 0)) * sizeof(float);
  if (opts_.cache_bytes == 0 || bytes > opts_.cache_bytes || index_.count(img.key)) return;
  lru_.push_front(Entry{img.key, img.tiles, img.tokens, img.grid, f, img.deepstack, img.groups,
                        img.timestamps});
  index_[img.key] = lru_.begin();
  cached_bytes_ += bytes;
  while (cached_bytes_ > opts_.cache_bytes) {
    const Entry& last = lru_.back();
    cached_bytes_ -=
        (last.features->size() + (last.deepstack ? last.deepstack->size() : 0)) * sizeof(float);
    index_.erase(last.key);
    lru_.pop_back();
  }
}

}  // namespace edgevl
