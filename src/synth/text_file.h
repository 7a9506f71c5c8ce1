#pragma once
// Writing the small text files of a synthetic checkpoint (config.json, vocab.json, ...).
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace edgevl::synth {

inline void write_text_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  check(bool(f), "{}: cannot create", p.string());
  f.write(s.data(), std::streamsize(s.size()));
  f.close();
  check(f.good(), "{}: write failed", p.string());
}

}  // namespace edgevl::synth
