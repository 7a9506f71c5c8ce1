#include "format/checkpoint.h"

#include <algorithm>

#include "core/error.h"
#include "format/json_fields.h"

namespace edgevl {

namespace fs = std::filesystem;

Checkpoint::Checkpoint(const fs::path& dir) : dir_(dir) {
  const std::string d = dir.string();
  check(fs::is_directory(dir), "checkpoint {}: not a directory", d);
  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path single = dir / "model.safetensors";

  if (fs::exists(index)) {
    const nlohmann::json j = read_json_file(index);
    check(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
          "{}: expected an object with a 'weight_map' object (tensor name -> shard file)",
          index.string());
    // Each shard is opened once, however many tensors it holds.
    std::map<std::string, const SafetensorsFile*> shards;
    for (const auto& [name, v] : j["weight_map"].items()) {
      check(v.is_string(), "{}: weight_map['{}'] is a {}; expected a shard file name",
            index.string(), name, v.type_name());
      const std::string shard = v.get<std::string>();
      const fs::path rel(shard);
      // Shards live beside the index; a path that climbs out is a corrupted (or hostile) index.
      const bool inside =
          !rel.empty() && rel.is_relative() &&
          std::none_of(rel.begin(), rel.end(), [](const fs::path& c) { return c == ".."; });
      check(inside, "{}: weight_map['{}'] = '{}'; expected a file name inside {}", index.string(),
            name, shard, d);
      auto it = shards.find(shard);
      if (it == shards.end()) {
        check(fs::exists(dir / rel), "{}: shard '{}' (listed for tensor '{}') does not exist in {}",
              index.string(), shard, name, d);
        files_.push_back(std::make_unique<SafetensorsFile>(dir / rel));
        it = shards.emplace(shard, files_.back().get()).first;
      }
      const TensorView* t = it->second->find(name);
      check(t != nullptr, "{}: tensor '{}' is listed in {} but missing from shard {}",
            index.string(), name, index.filename().string(), (dir / rel).string());
      tensors_.emplace(name, t);
    }
    return;
  }

  if (fs::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    add_all(*files_.back());
    return;
  }

  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  check(!found.empty(),
        "checkpoint {}: no model.safetensors, model.safetensors.index.json or *.safetensors "
        "file found",
        d);
  for (const auto& p : found) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    add_all(*files_.back());
  }
}

void Checkpoint::add_all(const SafetensorsFile& f) {
  for (const auto& t : f.tensors()) {
    auto [it, inserted] = tensors_.emplace(t.name, &t);
    check(inserted, "checkpoint {}: tensor '{}' appears in both {} and {}", dir_.string(), t.name,
          it->second->file, t.file);
  }
}

const TensorView* Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::get(std::string_view name) const {
  const TensorView* t = find(name);
  check(t != nullptr, "checkpoint {}: tensor '{}' missing", dir_.string(), name);
  return *t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [n, t] : tensors_) out.push_back(n);
  return out;
}

void Checkpoint::require(const std::vector<std::string>& names) const {
  std::vector<std::string> missing;
  for (const auto& n : names)
    if (!find(n)) missing.push_back(n);
  if (missing.empty()) return;
  // One line (the CLI prints what() as is), every name listed.
  std::string list;
  for (const auto& n : missing) list += (list.empty() ? "" : ", ") + n;
  fail("checkpoint {}: {} of {} required tensors missing: {}", dir_.string(), missing.size(),
       names.size(), list);
}

std::vector<fs::path> Checkpoint::files() const {
  std::vector<fs::path> out;
  for (const auto& f : files_) out.emplace_back(f->path());
  return out;
}

}  // namespace edgevl
