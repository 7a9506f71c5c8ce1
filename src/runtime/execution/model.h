#pragma once
// A loaded context binary: the mapping plus the small parsed sections. Loading is an mmap
// and validation; weights stay in the mapped pages and are never copied. The few computed
// tensors (the RoPE tables) are made at load.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "format/evb.h"
#include "format/model_config.h"
#include "graph/graph.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace edgevl {

class Model {
 public:
  explicit Model(const std::filesystem::path& path);

  const EvbFile& file() const { return file_; }
  const LlmConfig& config() const { return config_; }
  const RuntimeConfig& runtime_config() const { return runtime_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const text::ChatTemplate& chat_template() const { return template_; }
  // The vision side of a VLM; null for a text-only model.
  const VisionConfig* vision() const { return has_vision_ ? &vision_ : nullptr; }
  const std::vector<Graph>& graphs() const { return graphs_; }
  const Graph& graph(const std::string& name) const;
  const Graph* find_graph(const std::string& name) const;
  // The layers whose graphs run attention over a KV cache: every layer of most models, the
  // full-attention ones of a hybrid (Qwen3.5's Gated DeltaNet layers keep a recurrent state).
  int32_t kv_layers() const;

  const void* weight_data(int32_t index) const {
    const std::vector<float>& c = computed_[size_t(index)];
    return c.empty() ? static_cast<const void*>(file_.tensor_data(size_t(index))) : c.data();
  }
  const TensorEntry& weight(int32_t index) const { return file_.tensors()[size_t(index)]; }
  const void* weight_data(const std::string& name) const;
  const TensorEntry& weight(const std::string& name) const;

  // Token ids that end generation (EOS, <|im_end|> and similar single-token stop strings).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // Wall time of the constructor: mapping, header and table parsing, validation.
  double load_ms() const { return load_ms_; }

 private:
  void compute_tensors();  // computed_ from the config; after the configs are read
  // Declared first so it is initialized before the file is opened and mapped.
  std::chrono::steady_clock::time_point load_start_ = std::chrono::steady_clock::now();
  EvbFile file_;
  LlmConfig config_;
  RuntimeConfig runtime_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  text::ChatTemplate template_;
  VisionConfig vision_;
  bool has_vision_ = false;
  std::vector<Graph> graphs_;
  std::vector<int32_t> stop_ids_;
  std::vector<std::vector<float>> computed_;  // per tensor: its values if computed, else empty
  double load_ms_ = 0;
};

}  // namespace edgevl
