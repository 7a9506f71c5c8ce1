// Qwen3-VL images from the command line on the tiny golden (tests/fixtures/golden/qwen3vl):
// `chat` with /image (replies equal the runtime's Chat), `run -i` with prompt-lookup
// speculation (the reference's greedy ids), `--dump` (the processor's pixels and the tower's
// features and DeepStack rows against the reference's), and `--beams`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "runtime/assistant.h"
#include "support/model_fixture.h"
#include "support/qwen3vl_fixture.h"
#include "support/test_util.h"
#include "vision/video.h"

namespace edgevl {
namespace {

using test::run_cli;

std::string q(const std::filesystem::path& p) {
  return test::shell_quote(p);
}

struct Fixture {
  test::Qwen3VlImagePrompt prompt;
  std::filesystem::path evb, image;
};

Fixture fixture(const TempDir& tmp) {
  const auto prompts = test::qwen3vl_image_prompts();
  check(!prompts.empty(), "no Qwen3-VL golden image");
  Fixture f{prompts.front(), test::compiled_path(test::qwen3vl_dir(), "f32"),
            tmp.path() / (prompts.front().name + ".bmp")};
  const auto bmp = test::bmp_bytes(f.prompt.image);
  std::ofstream(f.image, std::ios::binary)
      .write(reinterpret_cast<const char*>(bmp.data()), std::streamsize(bmp.size()));
  return f;
}

TEST(CliQwen3Vl, ChatWithAnImageEqualsTheRuntime) {
  TempDir tmp;
  const Fixture f = fixture(tmp);
  std::string want;
  {
    AssistantOptions ao;
    ao.threads = 2;
    Assistant a(f.evb, ao);
    Chat chat(a);
    GenerateOptions g;
    g.n_predict = 6;
    g.sampling.temperature = 0;
    chat.add_image(a.image_file(f.image));
    want = chat.send("What is this?", g).text + "\n";
    want += chat.send("And then?", g).text + "\n";
  }
  const auto r = run_cli("chat -m " + q(f.evb) + " -n 6 --temp 0 -t 2",
                         "/image " + f.image.string() + "\nWhat is this?\nAnd then?\n/quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  // The attach line counts the image's tokens (what the prompt's run of <|image_pad|> holds).
  const int32_t pad =
      nlohmann::json::parse(read_text_file(test::qwen3vl_dir() / "config.json"))["image_token_id"];
  const auto tokens = std::count(f.prompt.prompt_ids.begin(), f.prompt.prompt_ids.end(), pad);
  EXPECT_NE(r.err.find(std::to_string(tokens) + " image tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

// `chat` with /video: the reply of the runtime's Chat (whose ids are transformers':
// golden_qwen3vl_video_test), the attach line counting the video's tokens.
TEST(CliQwen3Vl, ChatWithAVideoEqualsTheRuntime) {
  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  TempDir tmp;
  const Fixture f = fixture(tmp);
  const auto clip = test::fixtures_dir() / "video" / "gradient_88x60_6fps.mp4";
  std::string want;
  int32_t tokens = 0;
  {
    AssistantOptions ao;
    ao.threads = 2;
    Assistant a(f.evb, ao);
    Chat chat(a);
    GenerateOptions g;
    g.n_predict = 6;
    g.sampling.temperature = 0;
    const ImageRef video = a.video_file(clip);
    tokens = video->tokens;
    chat.add_image(video);
    want = chat.send("What moves?", g).text + "\n";
    want += chat.send("And then?", g).text + "\n";
  }
  const auto r = run_cli("chat -m " + q(f.evb) + " -n 6 --temp 0 -t 2",
                         "/video " + clip.string() + "\nWhat moves?\nAnd then?\n/quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  EXPECT_NE(r.err.find(std::to_string(tokens) + " video tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

TEST(CliQwen3Vl, RunWithLookupDumpAndBeams) {
  TempDir tmp;
  const Fixture f = fixture(tmp);
  const std::string base =
      "run -m " + q(f.evb) + " -i " + q(f.image) + " -p 'What is this?' --temp 0 -t 2 ";
  // Prompt-lookup speculation: the reference's greedy ids.
  auto r = run_cli(base + "-n 16 --ignore-eos --json --lookup 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), f.prompt.tokens);
  EXPECT_GT(j["spec_passes"].get<int>(), 0);

  // --dump: the processor's pixels and the tower's rows, as the reference computed them.
  r = run_cli(base + "-n 1 --json --dump " + q(tmp.path() / "d") + " --dump-filter none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto golden = [&](const std::string& name) {
    return read_npy(test::qwen3vl_dir() / (name + "_" + f.prompt.name + ".npy"));
  };
  const auto close = [](const NpyArray& got, const NpyArray& want) {
    ASSERT_EQ(got.data.size(), want.data.size());
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < want.data.size(); ++i) {
      max_ref = std::max(max_ref, double(std::fabs(want.data[i])));
      max_diff = std::max(max_diff, double(std::fabs(got.data[i] - want.data[i])));
    }
    EXPECT_LE(max_diff, 1e-4 * max_ref);
  };
  const NpyArray px = read_npy(tmp.path() / "d" / "pixel_values.npy");
  EXPECT_EQ(px.shape, golden("pixels").shape);
  EXPECT_EQ(px.data, golden("pixels").data);  // the processor is bit-exact
  const NpyArray emb = read_npy(tmp.path() / "d" / "vision_embeds.npy");
  const NpyArray want_emb = golden("vision");
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{1, want_emb.shape[0], want_emb.shape[1]}));
  close(emb, want_emb);
  const NpyArray ds = read_npy(tmp.path() / "d" / "deepstack_embeds_0.npy");
  ASSERT_EQ(ds.shape, (std::vector<int64_t>{2, want_emb.shape[0], want_emb.shape[1]}));
  for (int k = 0; k < 2; ++k) {
    const NpyArray want = golden("deepstack_" + std::to_string(k));
    NpyArray got;
    got.data.assign(ds.data.begin() + long(k * want.data.size()),
                    ds.data.begin() + long((k + 1) * want.data.size()));
    close(got, want);
  }

  // Beam search over the image prompt: transformers' hypotheses when the golden's image is
  // the one here (tests/fixtures/golden/beam/qwen3vl_image.json).
  r = run_cli(base + "-n 8 --beams 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  const auto beams = nlohmann::json::parse(
      read_text_file(test::fixtures_dir() / "golden" / "beam" / "qwen3vl_image.json"));
  if (beams["image"] == f.prompt.name) {
    const auto& want = beams["cases"][0]["hypotheses"];
    ASSERT_EQ(j["hypotheses"].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(j["hypotheses"][i]["tokens"], want[i]["tokens"]);
  }
  EXPECT_EQ(j["prompt_tokens"], f.prompt.prompt_ids.size());
}

}  // namespace
}  // namespace edgevl
