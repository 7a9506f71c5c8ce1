// Engine::decode_batch (runtime/execution/engine.h): B sequences' next tokens in one step.
//
// Batch invariance, at every ISA level the CPU runs, for the Q8 / Q4 presets (w8a8, w4a8,
// w4a16) on the tiny Qwen2 (tied Q8 head) and Llama (untied head, FFN 176) fixtures: eleven
// sequences with prompts of different lengths (so different depths and positions) are decoded
// step by step in batches of changing size (1..8 and 11, which the engine runs as 8 + 3) and
// order; every sequence's logits at every step must equal, bit for bit, those of the same
// sequence decoded alone through Session::eval_tokens. Then the same through
// decode_batch_embeddings; and with the int8 KV cache. The f16 preset only promises agreement to
// rounding (checked to a tolerance). The errors (context full, a repeated session, another engine's
// session, sizes, token ids) leave every session as it was; a binary compiled with --batch 1 still
// decodes batches (one row at a time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/kernels.h"
#include "compiler/compile.h"
#include "core/error.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/session.h"
#include "support/isa_params.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

constexpr int kSeqs = 11;
constexpr int kSteps = 6;

std::filesystem::path golden(const std::string& name) {
  return test::fixtures_dir() / "golden" / name;
}

// Sequence s: a prompt of 3 + 5 * s tokens, then kSteps fixed tokens (not sampled, so that a
// wrong logit cannot change what is fed next and hide itself).
struct Script {
  std::vector<std::vector<int32_t>> prompts, steps;
};
Script make_script(int32_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(3, vocab - 1);
  Script s;
  for (int i = 0; i < kSeqs; ++i) {
    s.prompts.emplace_back(size_t(3 + 5 * i));
    for (int32_t& t : s.prompts.back()) t = tok(rng);
    s.steps.emplace_back(size_t(kSteps));
    for (int32_t& t : s.steps.back()) t = tok(rng);
  }
  return s;
}

// Logits [seq][step][vocab] of each sequence decoded alone (prompt by prefill, then one token
// per eval_tokens call: the width-1 decode graph).
std::vector<std::vector<std::vector<float>>> alone(const Model& m, const Script& sc) {
  std::vector<std::vector<std::vector<float>>> out(kSeqs);
  Session s(m, SessionOptions{2, 0});
  for (int i = 0; i < kSeqs; ++i) {
    s.reset();
    s.eval_tokens(sc.prompts[size_t(i)]);
    for (int j = 0; j < kSteps; ++j) {
      const auto l = s.eval_tokens(std::span(&sc.steps[size_t(i)][size_t(j)], 1));
      out[size_t(i)].emplace_back(l.begin(), l.end());
    }
  }
  return out;
}

// Batch compositions per step: (size, rotation of the sequence order). Every sequence takes
// every step exactly once: a step's members are taken from those that are behind.
const std::vector<int> kBatchSizes = {1, 2, 3, 4, 5, 6, 7, 8, 11};

// Runs the script batched; compare(i, j, logits) for sequence i's step j. by_rows: through
// decode_batch_embeddings instead of token ids.
template <class Compare>
void run_batched(const Model& m, const Script& sc, bool by_rows, Compare&& compare) {
  Engine engine(m, EngineOptions{2});
  std::vector<std::unique_ptr<Session>> seqs;
  for (int i = 0; i < kSeqs; ++i) {
    seqs.push_back(std::make_unique<Session>(engine));
    seqs.back()->eval_tokens(sc.prompts[size_t(i)]);
  }
  const int64_t vocab = m.config().vocab_size, d = m.config().hidden;
  std::vector<int> done(kSeqs, 0);
  std::vector<float> logits, rows;
  for (size_t round = 0;; ++round) {
    // The sequences still to run, rotated so that positions inside a batch change per round.
    std::vector<int> todo;
    for (int i = 0; i < kSeqs; ++i)
      if (done[size_t(i)] < kSteps) todo.push_back(i);
    if (todo.empty()) break;
    std::rotate(todo.begin(), todo.begin() + long(round % todo.size()), todo.end());
    const size_t b = std::min(todo.size(), size_t(kBatchSizes[round % kBatchSizes.size()]));
    std::vector<Session*> batch;
    std::vector<int32_t> toks;
    for (size_t k = 0; k < b; ++k) {
      const int i = todo[k];
      batch.push_back(seqs[size_t(i)].get());
      toks.push_back(sc.steps[size_t(i)][size_t(done[size_t(i)])]);
    }
    logits.assign(b * size_t(vocab), -1.f);
    if (by_rows) {
      rows.resize(b * size_t(d));
      engine.embed(toks, rows.data());
      engine.decode_batch_embeddings(batch, rows.data(), logits.data());
    } else {
      engine.decode_batch(batch, toks, logits.data());
    }
    for (size_t k = 0; k < b; ++k) {
      const int i = todo[k];
      ASSERT_EQ(batch[k]->n_past(), int32_t(sc.prompts[size_t(i)].size()) + done[size_t(i)] + 1);
      compare(i, done[size_t(i)], b, logits.data() + k * size_t(vocab));
      if (::testing::Test::HasFatalFailure()) return;
      ++done[size_t(i)];
    }
  }
}

using Param = std::tuple<std::string, std::string, std::string>;  // model, quant, ISA level

class BatchDecode : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!cpu::force_isa(std::get<2>(GetParam())))
      GTEST_SKIP() << "this CPU does not run " << std::get<2>(GetParam());
  }
  void TearDown() override { cpu::force_isa("best"); }
};

TEST_P(BatchDecode, BitIdenticalToAlone) {
  const auto& [model, quant, isa] = GetParam();
  const Model& m = test::compiled_model(golden(model), quant);
  const Script sc = make_script(m.config().vocab_size);
  const auto ref = alone(m, sc);
  const size_t vocab = size_t(m.config().vocab_size);
  for (bool by_rows : {false, true})
    run_batched(m, sc, by_rows, [&](int i, int j, size_t b, const float* got) {
      const float* want = ref[size_t(i)][size_t(j)].data();
      ASSERT_EQ(std::memcmp(got, want, vocab * 4), 0)
          << model << " " << quant << " " << isa << ": sequence " << i << " step " << j
          << " in a batch of " << b << (by_rows ? " (embedding rows)" : "") << " differs from "
          << "its logits alone";
    });
}

INSTANTIATE_TEST_SUITE_P(Presets, BatchDecode,
                         ::testing::Combine(::testing::Values("qwen2", "llama"),
                                            ::testing::Values("w8a8", "w4a8", "w4a16"),
                                            ::testing::ValuesIn(test::all_isa_levels())),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param) +
                                           "_" + std::get<2>(info.param);
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// The int8 KV cache (a scale per token and head): each row is stored and read in its own
// cache by the M = 1 kernels, so the bits hold there too, at every level.
TEST(BatchDecodeKv, Int8CacheBitIdenticalToAlone) {
  const Model& m = test::compiled_model(golden("qwen2"), "w8a8", "q8");
  ASSERT_EQ(m.runtime_config().kv_type, DType::Q8);
  const Script sc = make_script(m.config().vocab_size);
  const size_t vocab = size_t(m.config().vocab_size);
  for (const std::string& isa : test::all_isa_levels()) {
    if (!cpu::force_isa(isa)) continue;
    const auto ref = alone(m, sc);
    run_batched(m, sc, false, [&](int i, int j, size_t b, const float* got) {
      ASSERT_EQ(std::memcmp(got, ref[size_t(i)][size_t(j)].data(), vocab * 4), 0)
          << isa << ": sequence " << i << " step " << j << " batch " << b;
    });
    if (HasFatalFailure()) break;
  }
  cpu::force_isa("best");
}

// f16 weights: kernels whose order changes with the row count; the batched logits agree with
// the sequence alone to rounding (the bound: 1e-4 of the largest logit).
TEST(BatchDecodeFloat, F16AgreesToRounding) {
  const Model& m = test::compiled_model(golden("qwen2"), "f16");
  const Script sc = make_script(m.config().vocab_size);
  const auto ref = alone(m, sc);
  const size_t vocab = size_t(m.config().vocab_size);
  run_batched(m, sc, false, [&](int i, int j, size_t b, const float* got) {
    const auto& want = ref[size_t(i)][size_t(j)];
    float amax = 0.f, err = 0.f;
    for (size_t v = 0; v < vocab; ++v) {
      amax = std::max(amax, std::fabs(want[v]));
      err = std::max(err, std::fabs(got[v] - want[v]));
    }
    ASSERT_LE(err, 1e-4f * amax) << "sequence " << i << " step " << j << " batch " << b;
  });
}

TEST(BatchDecodeErrors, RefusedStepsChangeNothing) {
  const Model& m = test::compiled_model(golden("qwen2"), "w8a8");
  Engine engine(m, EngineOptions{2});
  EXPECT_EQ(engine.max_batch(), compiler::CompileOptions{}.decode_batch);
  Session a(engine), b(engine), full(engine, SessionOptions{0, 4});
  const std::vector<int32_t> p = {5, 6, 7, 8};
  a.eval_tokens(p);
  b.eval_tokens(std::span(p).first(2));
  full.eval_tokens(p);  // 4 of 4 positions: no room
  std::vector<float> logits(3 * size_t(m.config().vocab_size));
  const std::vector<int32_t> toks = {1, 2, 3};
  auto expect_error = [&](std::vector<Session*> seqs, std::vector<int32_t> t, const char* what) {
    try {
      engine.decode_batch(seqs, t, logits.data());
      ADD_FAILURE() << "no error; expected one containing '" << what << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_EQ(a.n_past(), 4);
    EXPECT_EQ(b.n_past(), 2);
    EXPECT_EQ(full.n_past(), 4);
  };
  expect_error({&a, &b, &full}, toks, "context full: sequence 2 has 4 tokens");
  expect_error({&a, &b, &a}, toks, "sequences 0 and 2 are the same session");
  expect_error({&a, &b}, toks, "3 tokens for 2 sequences");
  expect_error({}, {}, "no sequences");
  expect_error({&a, &b}, {1, m.config().vocab_size}, "token id 512 of sequence 1");
  Engine other(m, EngineOptions{1});
  Session stranger(other);
  expect_error({&a, &stranger}, {1, 2}, "sequence 1 belongs to another engine");
  // And the step after the refusals runs.
  std::vector<Session*> ok = {&a, &b};
  engine.decode_batch(ok, std::vector<int32_t>{1, 2}, logits.data());
  EXPECT_EQ(a.n_past(), 5);
  EXPECT_EQ(b.n_past(), 3);
}

// A binary without the batch graphs (compile --batch 1, like those compiled before them)
// loads, reports max_batch() = 1 and decodes batches one row at a time, with the same bits.
TEST(BatchDecodeCompat, CompiledWithoutBatchGraphs) {
  TempDir tmp;
  compiler::CompileOptions o;
  o.input = golden("qwen2");
  o.output = tmp.path() / "nobatch.evb";
  o.quant = "w8a8";
  o.prefill_chunk = 16;
  o.decode_batch = 1;
  compiler::compile_model(o);
  const Model m(o.output);
  EXPECT_EQ(m.find_graph("decode_batch"), nullptr);
  EXPECT_EQ(Engine(m, EngineOptions{1}).max_batch(), 1);
  const Script sc = make_script(m.config().vocab_size);
  const auto ref = alone(m, sc);
  const size_t vocab = size_t(m.config().vocab_size);
  run_batched(m, sc, false, [&](int i, int j, size_t b, const float* got) {
    ASSERT_EQ(std::memcmp(got, ref[size_t(i)][size_t(j)].data(), vocab * 4), 0)
        << "sequence " << i << " step " << j << " batch " << b;
  });
  o.decode_batch = 65;
  EXPECT_THROW(compiler::compile_model(o), Error);
}

}  // namespace
}  // namespace edgevl
