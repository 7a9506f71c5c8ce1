#pragma once
// `edgevl bench --image`: the vision tower and time-to-first-token, for both kinds of tower.
//
//   InternVL   vision          one synthetic normalised 448x448 tile  -> ms/tile, GFLOP/s
//              ttft            a 1-tile image and a question of <= 30 tokens, the chat path and
//                              one generated token -> ms
//   Qwen-VL    vision@WxH      one random W x H RGB image (each --image-size), preprocessed
//                              untimed, through the tower -> ms/image, patches, GFLOP/s
//              ttft@WxH        the first size's image and the question, as above
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/execution/profiler.h"
#include "runtime/execution/session.h"

namespace edgevl::app {

struct BenchRow {
  std::string name, value, rate;
};

struct BenchStats {
  double mean = 0, sd = 0;
};

// Mean and sample standard deviation (n - 1); sd is 0 for a single sample.
BenchStats bench_stats(const std::vector<double>& v);

struct ImageBenchOpts {
  int reps = 5;
  std::vector<std::pair<int, int>> sizes;                     // Qwen-VL: the images' width x height
  std::function<Profiler*(const std::string&)> profiler_for;  // null result: not profiled
  std::function<void(const std::string&)> progress;
};

// Runs the tests above on the session's model (which must have a vision tower) and appends
// them to `tests` (JSON) and `rows` (the table).
void bench_images(Session& session, const ImageBenchOpts& o, std::mt19937_64& rng,
                  nlohmann::json& tests, std::vector<BenchRow>& rows);

// "448x448" -> {448, 448}; throws on anything else.
std::pair<int, int> parse_image_size(const std::string& s);

}  // namespace edgevl::app
