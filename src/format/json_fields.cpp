#include "format/json_fields.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"

namespace edgevl {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& p) {
  const std::string text = read_text_file(p);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte counts from 1; offsets elsewhere in edgevl count from 0.
    fail("{}: invalid JSON at byte offset {}: expected a JSON document ({})", p.string(),
         e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const json::exception& e) {
    fail("{}: cannot read JSON: {}", p.string(), e.what());
  }
}

JsonFields::JsonFields(const json& j, std::string what) : j_(j), what_(std::move(what)) {
  check(j_.is_object(), "{}: expected a JSON object, got {}", what_, j_.type_name());
}

const json* JsonFields::opt(const char* key) const {
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

int32_t JsonFields::as_int(const json& v, const char* key) const {
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>())) {
    x = int64_t(v.get<double>());
  } else {
    fail("{}: key '{}' is {}; expected an integer", what_, key, v.dump());
  }
  check(x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max(),
        "{}: key '{}' = {} is out of the 32-bit range", what_, key, x);
  return int32_t(x);
}

int32_t JsonFields::req_int(const char* key) const {
  const json* v = opt(key);
  check(v != nullptr, "{}: missing required key '{}'", what_, key);
  return as_int(*v, key);
}

int32_t JsonFields::opt_int(const char* key, int32_t def) const {
  const json* v = opt(key);
  return v ? as_int(*v, key) : def;
}

float JsonFields::opt_float(const char* key, float def) const {
  const json* v = opt(key);
  if (!v) return def;
  check(v->is_number(), "{}: key '{}' is {}; expected a number", what_, key, v->dump());
  return v->get<float>();
}

bool JsonFields::opt_bool(const char* key, bool def) const {
  const json* v = opt(key);
  if (!v) return def;
  check(v->is_boolean(), "{}: key '{}' is {}; expected true or false", what_, key, v->dump());
  return v->get<bool>();
}

std::string JsonFields::opt_string(const char* key, const std::string& def) const {
  const json* v = opt(key);
  if (!v) return def;
  check(v->is_string(), "{}: key '{}' is {}; expected a string", what_, key, v->dump());
  return v->get<std::string>();
}

std::vector<int32_t> JsonFields::id_list(const char* key) const {
  std::vector<int32_t> out;
  const json* v = opt(key);
  if (!v) return out;
  if (v->is_array()) {
    for (const auto& e : *v) out.push_back(as_int(e, key));
  } else {
    out.push_back(as_int(*v, key));
  }
  return out;
}

const json* JsonFields::opt_object(const char* key) const {
  const json* v = opt(key);
  check(!v || v->is_object(), "{}: key '{}' is {}; expected null or an object", what_, key,
        v ? v->dump() : "");
  return v;
}

}  // namespace edgevl
