#pragma once
// The Qwen-VL goldens' command-line check: `edgevl run -m EVB -i IMAGE -p QUESTION` greedy, as
// a user types it, with its ids and prompt length compared to the reference's.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/model_fixture.h"
#include "support/test_util.h"

namespace edgevl::test {

inline void expect_cli_image_run(const std::filesystem::path& evb,
                                 const std::filesystem::path& image, const std::string& question,
                                 const std::string& extra_flags, const nlohmann::json& golden) {
  const auto r =
      run_cli("run -m " + shell_quote(evb) + " -i " + shell_quote(image) + " -p " +
              shell_quote(question) + " -n 16 --temp 0 --ignore-eos --json" + extra_flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::vector<int32_t> got = j["tokens"], want = golden["tokens"];
  EXPECT_EQ(got, want);
  EXPECT_EQ(j["prompt_tokens"], golden["prompt_ids"].size());
}

}  // namespace edgevl::test
