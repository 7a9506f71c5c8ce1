#include "compiler/quant_overrides.h"

#include <fnmatch.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "backend/cpu/hadamard.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace edgevl::compiler {

namespace {

using nlohmann::json;

DType parse_type(const std::string& s, const std::string& where) {
  if (s == "q8") return DType::Q8;
  if (s == "q4") return DType::Q4;
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  fail("{}: unknown type '{}' (choose f32, f16, bf16, q8 or q4)", where, s);
}

TensorOverride parse_one(const json& j, const std::string& where) {
  check(j.is_object(), "{}: expected an object like {{\"type\": \"q8\"}}", where);
  TensorOverride t;
  for (const auto& [key, v] : j.items()) {
    const std::string at = where + "." + key;
    if (key == "quantize") {
      check(v.is_boolean(), "{}: expected true or false", at);
      t.keep_float = !v.get<bool>();
    } else if (key == "type") {
      check(v.is_string(), "{}: expected a string", at);
      t.type = parse_type(v.get<std::string>(), at);
    } else if (key == "group") {
      check(v.is_number_integer() && (v == 32 || v == 64 || v == 128), "{}: must be 32, 64 or 128",
            at);
      t.group = v.get<int>();
    } else if (key == "zero_point") {
      check(v.is_boolean(), "{}: expected true or false", at);
      t.zero_point = v.get<bool>();
    } else if (key == "act8") {
      check(v.is_boolean(), "{}: expected true or false", at);
      t.act8 = v.get<bool>();
    } else if (key == "rotate") {
      check(v.is_boolean(), "{}: expected true or false", at);
      t.rotate = v.get<bool>();
    } else if (key != "pattern" && key != "name") {
      fail("{}: unknown key '{}' (known: quantize, type, group, zero_point, act8, rotate)", where,
           key);
    }
  }
  return t;
}

}  // namespace

bool override_matches(const TensorOverride& r, const std::string& name) {
  return r.is_pattern ? fnmatch(r.selector.c_str(), name.c_str(), 0) == 0 : r.selector == name;
}

QuantOverrides parse_quant_overrides(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", source, e.what());
  }
  check(j.is_object(),
        "{}: expected a JSON object with \"tensor_quantization_overrides\" and/or "
        "\"patterns\"",
        source);
  QuantOverrides o;
  o.source = source;
  for (const auto& [key, v] : j.items()) {
    if (key == "patterns") {
      check(v.is_array(), "{}: \"patterns\" must be a list of {{\"pattern\": ..., \"type\": ...}}",
            source);
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string where = fmt::format("{}: patterns[{}]", source, i);
        check(v[i].is_object() && v[i].contains("pattern") && v[i]["pattern"].is_string(),
              "{}: needs a \"pattern\" string", where);
        TensorOverride t = parse_one(v[i], where);
        t.selector = v[i]["pattern"].get<std::string>();
        t.is_pattern = true;
        o.rules.push_back(t);
      }
    } else if (key != "tensor_quantization_overrides") {
      fail("{}: unknown key '{}' (known: tensor_quantization_overrides, patterns)", source, key);
    }
  }
  if (j.contains("tensor_quantization_overrides")) {
    const json& m = j["tensor_quantization_overrides"];
    check(m.is_object(), "{}: \"tensor_quantization_overrides\" must map tensor names to objects",
          source);
    for (const auto& [name, v] : m.items()) {
      const std::string where = fmt::format("{}: \"{}\"", source, name);
      const json* one = &v;
      if (v.is_array()) {
        check(v.size() == 1, "{}: a list of {} overrides; one per tensor is supported", where,
              v.size());
        one = &v[0];
      }
      TensorOverride t = parse_one(*one, where);
      t.selector = name;
      o.rules.push_back(t);
    }
  }
  // Patterns first, then exact names: a name beats a pattern whatever the file order.
  std::stable_partition(o.rules.begin(), o.rules.end(),
                        [](const TensorOverride& r) { return r.is_pattern; });
  return o;
}

QuantOverrides read_quant_overrides(const std::filesystem::path& path) {
  check(std::filesystem::is_regular_file(path), "--overrides {}: no such file", path.string());
  return parse_quant_overrides(read_text_file(path), path.string());
}

void apply_quant_overrides(const QuantOverrides& o, const QuantPreset& preset,
                           const std::vector<WeightRole>& roles,
                           std::vector<TensorEntry>& entries) {
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  const DType float_type = preset.matrix == DType::F32 ? DType::F32 : DType::F16;
  for (const TensorOverride& r : o.rules) {
    size_t hits = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      TensorEntry& e = entries[i];
      if (!override_matches(r, e.name)) continue;
      ++hits;
      const bool matrix = roles[i] == WeightRole::Linear || roles[i] == WeightRole::Embedding ||
                          roles[i] == WeightRole::LmHead;
      if (!matrix) {
        // A pattern may sweep over norms and biases on its way; only a name is an error.
        check(r.is_pattern, "{}: '{}' is a norm, bias or table; those stay f32", o.source, e.name);
        --hits;
        continue;
      }
      const DType t = r.keep_float ? float_type : r.type.value_or(e.dtype);
      e.dtype = t;
      const bool q = t == DType::Q8 || t == DType::Q4;
      e.act8 = q && r.act8.value_or(e.act8 || preset.act8);
      e.group =
          t == DType::Q4 ? uint16_t(r.group.value_or(e.group ? int(e.group) : preset.group)) : 0;
      e.zero_point = t == DType::Q4 && r.zero_point.value_or(e.zero_point || preset.zero_point);
      // Only int8 / int4 matrices are rotated; a tensor keeps its rotation unless told otherwise.
      const bool rotate = q && r.rotate.value_or(e.rotation != 0);
      e.rotation = rotate ? uint16_t(cpu::hadamard_block_for(e.shape[1])) : 0;
      e.bytes = e.expected_bytes();
    }
    if (hits == 0) {
      std::string list;
      for (const auto& c : closest_names(r.selector, names)) list.append("\n  ").append(c);
      fail("{}: {} '{}' matches no quantizable tensor; closest names:{}", o.source,
           r.is_pattern ? "pattern" : "name", r.selector, list);
    }
  }
}

std::string overrides_json(const std::vector<std::pair<std::string, std::string>>& name_type) {
  json m = json::object();
  for (const auto& [name, type] : name_type) m[name] = {{"type", type}};
  return json{{"tensor_quantization_overrides", m}}.dump(2) + "\n";
}

}  // namespace edgevl::compiler
