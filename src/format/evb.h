#pragma once
// The .evb context binary. One little-endian file:
//
//   Header (128 bytes)   magic "EDGEVLB1", format version, target (ISA family + required CPU
//                        features), producer version, section count, section table offset
//   Sections             model config, runtime config, graphs, tensor table, tokenizer,
//                        chat template, preprocessing (each: id, offset, size in the table)
//   Weights              64-byte aligned; each tensor at a 64-byte aligned offset
//
// Every offset and length is checked against the file size before use; weights are used in
// place from the mapping and never copied at load.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace edgevl {

inline constexpr char kEvbMagic[8] = {'E', 'D', 'G', 'E', 'V', 'L', 'B', '1'};
// 2: quantized tensor fields, chat-template BOS flag; 3: tokenizer lookup tables precomputed,
// runtime kv_type may be q8 (int8 KV); 4: bf16p tensors (vision weights stored in the AMX
// layout), arena plans that keep a fused matmul's inputs alive through the op it absorbs;
// 5: fusions decided by the compiler: matmul epilogues (GELU, residual add) with the product
// as a value of its own, bf16 block hand-offs flagged per value, the self-attention precision
// as an attribute (four int attributes per op); 6: Q4 panels as one stream (groups in pairs,
// each pair's codes followed by its f16 scales and zero points: backend/cpu/quant.h); 7: a
// source per tensor (the RoPE tables computed at load instead of stored); 8: the LLM config's
// family flags as one list of named int / float values (model_config.h FamilyFlags, tag 21)
// instead of a field each (qkv_bias, o_bias, mlp_bias, qk_norm: tags 13-15 and 20, retired)
inline constexpr uint32_t kEvbFormatVersion = 9;
inline constexpr size_t kEvbHeaderSize = 128;
inline constexpr size_t kEvbAlign = 64;

// Stored in the file: append only.
enum class SectionId : uint32_t {
  LlmConfig = 1,
  RuntimeConfig = 2,
  Graphs = 3,
  Tensors = 4,
  Tokenizer = 5,
  ChatTemplate = 6,
  Preprocess = 7,
  Weights = 8,
  VisionConfig = 9,
  // Optional: compiled accelerator graphs, e.g. a QNN HTP context binary with the map from the
  // model's graphs to its graphs (backend/qnn/htp_section.h). Readers that do not know it run
  // the model on the CPU.
  Htp = 10,
};
const char* section_name(SectionId id);

// Instruction-set family of the machine code the weights' layouts are packed for.
enum class TargetIsa : uint32_t { Any = 0, X86_64 = 1, AArch64 = 2 };
const char* target_isa_name(TargetIsa t);

struct EvbTarget {
  TargetIsa isa = TargetIsa::Any;
  // CPU features the packed layouts need, bit i = cpu_feature_names()[i] (core/cpu_features.h,
  // append only); 0 = layouts every
  // kernel level reads (what `edgevl compile` writes today: Q8 / Q4 / bf16p panels serve all).
  uint64_t required_features = 0;
};

// The features of t.required_features missing from `cpu_features` (space-separated names, as
// cpu_features_string() prints them); "" when the CPU has them all.
std::string evb_missing_features(const EvbTarget& t, std::string_view cpu_features);

// Where a tensor's values come from. Stored in the file: append only.
enum class TensorSource : uint8_t {
  File = 0,     // its bytes in the weights section
  RopeCos = 1,  // computed at load from the LLM config (core/rope_tables.h): f32
  RopeSin = 2,  //   [context][head_dim / 2]; no bytes in the file
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // within the weights section
  uint64_t bytes = 0;
  // Quantized types (Q8, Q4): shape is the logical [out, in]; the bytes are the packed
  // panels of backend/cpu/quant.h.
  uint16_t group = 0;       // Q4: weights per scale along the input dim (32, 64, 128)
  bool zero_point = false;  // Q4: asymmetric groups
  bool act8 = false;        // activations quantized to int8 per token at run time (A8)
  // Input channels rotated in blocks of this many by a Hadamard matrix (backend/cpu/hadamard.h):
  // the stored rows are W H, and whoever multiplies by them rotates x the same way. 0: none.
  uint16_t rotation = 0;
  TensorSource source = TensorSource::File;
  int64_t numel() const;
  // The byte count the type and shape imply (throws for an impossible combination); 0 for a
  // computed tensor.
  uint64_t expected_bytes() const;
  std::string type_name() const;  // "f16", "q8", "q4g32", "q4g64z", ... plus "a8" when A8
};

struct EvbSection {
  SectionId id{};
  uint64_t offset = 0;
  uint64_t size = 0;
};

// --- writing (compiler side) ---
struct EvbWriteInput {
  EvbTarget target;
  std::string producer;  // e.g. "edgevl 0.1.0"
  // Serialized section payloads (everything but the weights).
  std::vector<std::pair<SectionId, std::vector<uint8_t>>> sections;
  // Weights: the entries (offsets assigned by the writer) and a function that writes a
  // tensor's bytes (called once per tensor, in order, with a buffer of entry.bytes).
  std::vector<TensorEntry> tensors;
  std::function<void(size_t index, uint8_t* out)> fill_tensor;
  std::function<void(size_t done, size_t total)> progress;
};
// Writes to `path` via a temporary file renamed at the end, so a failed compile never
// leaves a half-written binary under the final name.
void write_evb(const std::filesystem::path& path, EvbWriteInput in);

// Rewrites the binary at `path` with section `id` set to `payload` (added, or replacing the one
// there); everything else is copied. Atomic like write_evb.
void set_evb_section(const std::filesystem::path& path, SectionId id, std::vector<uint8_t> payload);

// --- reading (runtime side) ---
class EvbFile {
 public:
  explicit EvbFile(const std::filesystem::path& path);
  const std::string& path() const { return file_.path(); }
  uint32_t format_version() const { return version_; }
  const EvbTarget& target() const { return target_; }
  const std::string& producer() const { return producer_; }
  const std::vector<EvbSection>& sections() const { return sections_; }
  // Payload of a section; throws naming the section when absent.
  std::span<const uint8_t> section(SectionId id) const;
  bool has_section(SectionId id) const;
  size_t section_offset(SectionId id) const;
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  // Null for a computed tensor (Model::weight_data has those).
  const uint8_t* tensor_data(size_t i) const {
    return tensors_[i].source == TensorSource::File ? weights_ + tensors_[i].offset : nullptr;
  }
  int32_t find_tensor(std::string_view name) const;  // -1 when absent
  size_t file_size() const { return file_.size(); }
  const MappedFile& mapping() const { return file_; }

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  EvbTarget target_;
  std::string producer_;
  std::vector<EvbSection> sections_;
  std::vector<TensorEntry> tensors_;
  const uint8_t* weights_ = nullptr;
};

// Checks that this machine can run a binary made for `t`: its ISA family, and the CPU features
// its layouts were packed for; throws naming both when not.
void check_target_supported(const EvbTarget& t, const std::string& path);

}  // namespace edgevl
