// Overrides files: the accepted forms, the errors, and that a compiled binary stores exactly
// the types the file asks for.
#include <gtest/gtest.h>

#include <fstream>

#include "compiler/compile.h"
#include "compiler/quant_overrides.h"
#include "runtime/execution/model.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl::compiler {
namespace {

using test::error_of;

struct Plan {
  std::vector<TensorEntry> entries;
  std::vector<WeightRole> roles;
};

// A two-layer model's tensor table under a preset.
Plan plan(const QuantPreset& p) {
  Plan out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, WeightRole role) {
    TensorEntry e;
    e.name = name;
    e.shape = std::move(shape);
    assign_storage(p, role, WeightPlace::Llm, e);
    out.entries.push_back(e);
    out.roles.push_back(role);
  };
  add("model.embed_tokens.weight", {100, 64}, WeightRole::Embedding);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    add(b + "input_layernorm.weight", {64}, WeightRole::Norm);
    add(b + "self_attn.q_proj.weight", {64, 64}, WeightRole::Linear);
    add(b + "self_attn.q_proj.bias", {64}, WeightRole::Bias);
    add(b + "mlp.up_proj.weight", {172, 64}, WeightRole::Linear);
    add(b + "mlp.down_proj.weight", {64, 172}, WeightRole::Linear);
  }
  add("lm_head.weight", {100, 64}, WeightRole::LmHead);
  return out;
}

const TensorEntry& find(const Plan& p, const std::string& name) {
  for (const auto& e : p.entries)
    if (e.name == name) return e;
  throw std::runtime_error("no tensor " + name);
}

TEST(QuantOverrides, EdgeToolchainFormAndPatterns) {
  const QuantPreset preset = parse_quant_preset("w4a8");
  Plan p = plan(preset);
  const auto o = parse_quant_overrides(R"({
    "tensor_quantization_overrides": {
      "lm_head.weight": {"quantize": false},
      "model.layers.0.mlp.down_proj.weight": [{"type": "q8", "act8": false}],
      "model.layers.1.mlp.up_proj.weight": {"type": "q4", "group": 128, "zero_point": true}
    },
    "patterns": [{"pattern": "model.layers.[01].mlp.*", "type": "q8"},
                 {"pattern": "model.layers.1.*", "type": "f16"}]
  })",
                                       "test.json");
  apply_quant_overrides(o, preset, p.roles, p.entries);
  EXPECT_EQ(find(p, "lm_head.weight").dtype, DType::F16);
  // Pattern then exact name: the name wins although it comes first in the file.
  const auto& down0 = find(p, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(down0.dtype, DType::Q8);
  EXPECT_FALSE(down0.act8);
  EXPECT_EQ(find(p, "model.layers.0.mlp.up_proj.weight").dtype, DType::Q8);
  EXPECT_TRUE(find(p, "model.layers.0.mlp.up_proj.weight").act8);
  // Later pattern beats an earlier one; '*' crosses dots; norms and biases are swept past.
  EXPECT_EQ(find(p, "model.layers.1.mlp.down_proj.weight").dtype, DType::F16);
  EXPECT_EQ(find(p, "model.layers.1.self_attn.q_proj.weight").dtype, DType::F16);
  EXPECT_EQ(find(p, "model.layers.1.input_layernorm.weight").dtype, DType::F32);
  const auto& up1 = find(p, "model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(up1.dtype, DType::Q4);
  EXPECT_EQ(up1.group, 128);
  EXPECT_TRUE(up1.zero_point);
  EXPECT_EQ(up1.bytes, up1.expected_bytes());
  // Untouched tensors keep the preset.
  const auto& q0 = find(p, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q0.dtype, DType::Q4);
  EXPECT_EQ(q0.group, 32);
  EXPECT_EQ(find(p, "model.embed_tokens.weight").dtype, DType::Q8);
}

TEST(QuantOverrides, FloatPresetKeepsItsFloatTypeAndQuantizesOnRequest) {
  const QuantPreset preset = parse_quant_preset("f32");
  Plan p = plan(preset);
  apply_quant_overrides(parse_quant_overrides(R"({"tensor_quantization_overrides": {
      "model.layers.0.mlp.up_proj.weight": {"type": "q8"},
      "lm_head.weight": {"quantize": false}}})",
                                              "t"),
                        preset, p.roles, p.entries);
  EXPECT_EQ(find(p, "model.layers.0.mlp.up_proj.weight").dtype, DType::Q8);
  EXPECT_FALSE(find(p, "model.layers.0.mlp.up_proj.weight").act8);  // a float preset: A16
  EXPECT_EQ(find(p, "lm_head.weight").dtype, DType::F32);
}

TEST(QuantOverrides, ErrorsNameTheProblem) {
  const QuantPreset preset = parse_quant_preset("w8a8");
  Plan p = plan(preset);
  auto apply = [&](const std::string& json) {
    Plan c = p;
    apply_quant_overrides(parse_quant_overrides(json, "keep.json"), preset, c.roles, c.entries);
  };
  std::string e = error_of([&] {
    apply(
        R"({"tensor_quantization_overrides": {"model.layers.0.mlp.up_prj.weight": {"type": "q8"}}})");
  });
  EXPECT_NE(e.find("matches no quantizable tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << e;  // closest
  e = error_of([&] { apply(R"({"patterns": [{"pattern": "vision.*", "type": "q8"}]})"); });
  EXPECT_NE(e.find("pattern 'vision.*' matches no"), std::string::npos) << e;
  e = error_of([&] {
    apply(
        R"({"tensor_quantization_overrides": {"model.layers.0.input_layernorm.weight": {"type": "q8"}}})");
  });
  EXPECT_NE(e.find("norm, bias or table"), std::string::npos) << e;
  e = error_of(
      [&] { apply(R"({"tensor_quantization_overrides": {"lm_head.weight": {"type": "q3"}}})"); });
  EXPECT_NE(e.find("unknown type 'q3'"), std::string::npos) << e;
  e = error_of(
      [&] { apply(R"({"tensor_quantization_overrides": {"lm_head.weight": {"bits": 4}}})"); });
  EXPECT_NE(e.find("unknown key 'bits'"), std::string::npos) << e;
  e = error_of([&] { apply(R"({"overrides": {}})"); });
  EXPECT_NE(e.find("unknown key 'overrides'"), std::string::npos) << e;
  e = error_of([&] { apply(R"({"patterns": [{"type": "q8"}]})"); });
  EXPECT_NE(e.find("patterns[0]"), std::string::npos) << e;
  e = error_of([&] { apply("{not json"); });
  EXPECT_NE(e.find("keep.json: not valid JSON"), std::string::npos) << e;
  e = error_of(
      [&] { apply(R"({"tensor_quantization_overrides": {"lm_head.weight": {"group": 48}}})"); });
  EXPECT_NE(e.find("32, 64 or 128"), std::string::npos) << e;
  e = error_of([&] { read_quant_overrides("/nonexistent/keep.json"); });
  EXPECT_NE(e.find("no such file"), std::string::npos) << e;
}

TEST(QuantOverrides, CompiledBinaryStoresWhatTheFileSays) {
  const auto dir = test::fixtures_dir() / "golden" / "qwen2";
  TempDir tmp;
  const auto json = tmp.path() / "keep.json";
  std::ofstream(json) << R"({"tensor_quantization_overrides": {
      "model.layers.0.mlp.down_proj.weight": {"type": "q8"}},
    "patterns": [{"pattern": "model.layers.1.self_attn.*", "quantize": false}]})";
  CompileOptions o;
  o.input = dir;
  o.output = tmp.path() / "m.evb";
  o.quant = "w4a8";
  o.overrides = json;
  compile_model(o);
  const Model m(o.output);
  EXPECT_EQ(m.weight("model.layers.0.mlp.down_proj.weight").dtype, DType::Q8);
  EXPECT_EQ(m.weight("model.layers.0.mlp.up_proj.weight").dtype, DType::Q4);
  EXPECT_EQ(m.weight("model.layers.1.self_attn.q_proj.weight").dtype, DType::F16);
  EXPECT_EQ(m.weight("model.layers.1.self_attn.q_proj.bias").dtype, DType::F32);
  // inspect shows the stored types.
  const auto r = test::run_cli("inspect " + test::shell_quote(o.output));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto line_of = [&](const std::string& name) {
    const size_t at = r.out.find(name);
    return at == std::string::npos ? std::string() : r.out.substr(at, r.out.find('\n', at) - at);
  };
  EXPECT_NE(line_of("model.layers.0.mlp.down_proj.weight").find("q8a8"), std::string::npos)
      << r.out;
  EXPECT_NE(line_of("model.layers.1.self_attn.q_proj.weight").find("f16"), std::string::npos)
      << r.out;
  // A bad file leaves no output behind.
  std::ofstream(json) << R"({"tensor_quantization_overrides": {"nope": {"type": "q8"}}})";
  o.output = tmp.path() / "bad.evb";
  EXPECT_NE(error_of([&] { compile_model(o); }).find("closest names"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

}  // namespace
}  // namespace edgevl::compiler
