#pragma once
// Reading hub JSON files (config.json, generation_config.json, index files) with errors that
// name the file, the key and what was expected. A key whose value is null means "use the
// default" in transformers, the same as an absent key; these readers follow that rule.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace edgevl {

// Reads and parses a JSON file; errors name the file and the byte offset of a syntax error.
nlohmann::json read_json_file(const std::filesystem::path& p);

// Typed access to the keys of one JSON object; `what` names it in errors (e.g.
// "/m/config.json llm_config").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& j, std::string what);

  const nlohmann::json& object() const { return j_; }
  const std::string& what() const { return what_; }
  // The value, or null when the key is absent or null.
  const nlohmann::json* opt(const char* key) const;
  bool has(const char* key) const { return opt(key) != nullptr; }
  // Present in the file, even as null (some defaults depend on the difference).
  bool mentions(const char* key) const { return j_.contains(key); }

  int32_t req_int(const char* key) const;
  int32_t opt_int(const char* key, int32_t def) const;
  float opt_float(const char* key, float def) const;
  bool opt_bool(const char* key, bool def) const;
  std::string opt_string(const char* key, const std::string& def) const;
  // One id or a list of ids (eos_token_id); empty when absent.
  std::vector<int32_t> id_list(const char* key) const;
  // A nested object (absent or null: nullptr); anything else is an error.
  const nlohmann::json* opt_object(const char* key) const;

 private:
  int32_t as_int(const nlohmann::json& v, const char* key) const;

  const nlohmann::json& j_;
  std::string what_;
};

}  // namespace edgevl
