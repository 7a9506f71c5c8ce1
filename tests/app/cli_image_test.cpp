// `edgevl run` with images on a tiny InternVL checkpoint: the JSON report, and every kind of
// bad image input ending in one clear error line and exit status 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

using test::run_cli;
using test::TempDir;

std::string q(const std::filesystem::path& p) { return test::shell_quote(p); }

std::filesystem::path vlm() {
  return test::compiled_path(test::fixtures_dir() / "golden" / "internvl_qwen2", "f32");
}
std::filesystem::path image(const std::string& name) {
  return test::fixtures_dir() / "images" / "src" / name;
}

void expect_error(const test::CliResult& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const size_t at = r.err.find("edgevl: error: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string line = r.err.substr(at);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << r.err;
  for (const auto& f : fragments) EXPECT_NE(line.find(f), std::string::npos) << f << " in " << line;
}

TEST(CliImage, JsonReportsTilesTokensAndTimings) {
  auto r = run_cli("run -m " + q(vlm()) + " -i " + q(image("wide_3to1.png")) +
                   " -p 'What is this?' -n 4 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 1);
  // 3:1 picks a 3x1 grid, plus the thumbnail.
  EXPECT_EQ(j["tiles"], 4);
  EXPECT_EQ(j["image_tokens"], 4 * 256);
  for (const char* k : {"preprocess_ms", "vision_ms_per_tile", "ttft_ms"})
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  EXPECT_GE(j["prompt_tokens"].get<int>(), 4 * 256 + 2);
}

TEST(CliImage, TwoImagesAndMaxTiles) {
  auto r = run_cli("run -m " + q(vlm()) + " -i " + q(image("wide_3to1.png")) + " -i " +
                   q(image("square_64.png")) + " --max-tiles 2 -p 'Compare.' -n 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 2);
  EXPECT_EQ(j["tiles"], 3 + 1);  // 2x1 + thumbnail, then 1x1 (no thumbnail for one tile)
}

TEST(CliImage, DumpWritesPixelValuesAndVisionEmbeds) {
  TempDir t;
  auto r = run_cli("run -m " + q(vlm()) + " -i " + q(image("square_64.png")) +
                   " -p hi -n 1 --json --dump " + q(t.path()) + " --dump-filter none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(t.path() / "pixel_values.npy"));
  EXPECT_TRUE(std::filesystem::exists(t.path() / "vision_embeds.npy"));
}

TEST(CliImage, ChatTakesImagesMidConversation) {
  const std::string input = "Hello\n/image " + image("square_64.png").string() +
                            "\nWhat is this?\n/image /nonexistent.png\nStill there?\n/quit\n";
  auto r = run_cli("chat -m " + q(vlm()) + " -n 4 --temp 0", input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("attached"), std::string::npos) << r.err;
  // A bad image is reported and the conversation goes on.
  EXPECT_NE(r.err.find("edgevl: error: "), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '['), 3) << r.err;  // three replies
}

TEST(CliImageErrors, BadFiles) {
  TempDir t;
  const auto empty = t.path() / "empty.png";
  std::ofstream(empty).close();
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(empty) + " -p hi"), {"empty.png"});
  const auto garbage = t.path() / "garbage.jpg";
  std::ofstream(garbage) << "this is not an image at all";
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(garbage) + " -p hi"), {"garbage.jpg"});
  expect_error(run_cli("run -m " + q(vlm()) + " -i /nonexistent.png -p hi"), {"/nonexistent.png"});
  // Truncated JPEG: half of a real one.
  std::ifstream in(image("baseline.jpg"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto trunc = t.path() / "trunc.jpg";
  std::ofstream(trunc, std::ios::binary).write(bytes.data(), long(bytes.size() / 2));
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(trunc) + " -p hi"), {"trunc.jpg"});
}

TEST(CliImageErrors, PixelLimit) {
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(image("wide_3to1.png")) +
                       " --max-pixels 0.0001 -p hi"),
               {"wide_3to1.png"});
}

TEST(CliImageErrors, PlaceholdersAndImagesDisagree) {
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(image("square_64.png")) +
                       " -p '<image> and <image>?' -n 1"),
               {"2 <image> placeholder(s)", "1 image(s)"});
}

TEST(CliImageErrors, MoreImagesThanTheContextHolds) {
  // Context of the fixture is 4096 tokens; 13 tiles of 256 tokens each, twice, cannot fit.
  const auto big = image("strip_3000x200.png");
  const auto path = std::filesystem::exists(big) ? big : image("wide_3to1.png");
  expect_error(run_cli("run -m " + q(vlm()) + " -i " + q(path) + " -i " + q(path) + " -i " +
                       q(path) + " -i " + q(path) + " -i " + q(path) + " -p hi -n 1"),
               {"exceeds"});
}

TEST(CliImageErrors, TextOnlyModelRefusesImages) {
  const auto llm = test::compiled_path(test::fixtures_dir() / "golden" / "qwen2", "f32");
  expect_error(run_cli("run -m " + q(llm) + " -i " + q(image("square_64.png")) + " -p hi"),
               {"text-only"});
}

}  // namespace
}  // namespace edgevl
