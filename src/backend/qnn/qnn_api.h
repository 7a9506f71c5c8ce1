#pragma once
// The subset of Qualcomm's QNN C API (core API 2.x) that edgevl calls, declared here from the
// public API documentation: the SDK's headers are not available to us and are never copied.
// Layouts are those of the C ABI on LP64 (x86_64, AArch64). Only version-1 tensors and op
// configs are used: every QNN 2.x backend accepts them. The interface table's prefix is fixed
// across 2.x minor versions (new entry points are appended), which is what lets one declaration
// drive the library a phone ships as well as the x86_64 one from PyPI.
#include <cstdarg>
#include <cstdint>

namespace edgevl::qnn::api {

using ErrorHandle = uint64_t;  // 0 = success; the low 16 bits hold the error code
using Handle = void*;

constexpr ErrorHandle kSuccess = 0;
inline uint32_t error_code(ErrorHandle e) {
  return uint32_t(e & 0xFFFF);
}

enum DataType : uint32_t {
  kInt8 = 0x0008,
  kInt16 = 0x0016,
  kInt32 = 0x0032,
  kInt64 = 0x0064,
  kUInt8 = 0x0108,
  kUInt16 = 0x0116,
  kUInt32 = 0x0132,
  kFloat16 = 0x0216,
  kFloat32 = 0x0232,
  kSFixed8 = 0x0308,
  kSFixed16 = 0x0316,
  kSFixed32 = 0x0332,
  kUFixed8 = 0x0408,
  kUFixed16 = 0x0416,
  kUFixed32 = 0x0432,
  kBool8 = 0x0508,
  kSFixed4 = 0x0304,
  kUFixed4 = 0x0404,
  kDataTypeUndefined = 0x7FFFFFFF,
};

enum TensorType : uint32_t {
  kAppWrite = 0,  // graph input
  kAppRead = 1,   // graph output
  kAppReadWrite = 2,
  kNative = 3,  // intermediate
  kStatic = 4,  // weights, data given at creation
  kNullTensor = 5,
};

enum ParamType : uint32_t { kParamScalar = 0, kParamTensor = 1 };
enum Definition : uint32_t { kImplGenerated = 0, kDefined = 1, kDefinitionUndefined = 0x7FFFFFFF };
enum QuantEncoding : uint32_t {
  kScaleOffset = 0,
  kAxisScaleOffset = 1,
  kBwScaleOffset = 2,
  kBwAxisScaleOffset = 3,
  kEncodingUndefined = 0x7FFFFFFF,
};
enum Precision : uint32_t { kPrecisionFloat32 = 0, kPrecisionFloat16 = 1 };

struct Version {
  uint32_t major, minor, patch;
};
struct ApiVersion {
  Version core, backend;
};

// The value union also holds 64-bit members and a string pointer, so it sits at offset 8.
struct Scalar {
  DataType type;
  union {
    double f64;
    uint64_t u64;
    int64_t i64;
    const char* str;
    float f32;
    uint32_t u32;
    int32_t i32;
    uint16_t u16;
    int16_t i16;
    uint8_t u8;
    int8_t i8;
    uint8_t b8;
  };
};

// Quantized value q stands for scale * (q + offset) (QNN's sign convention: offset = -zero_point).
struct ScaleOffset {
  float scale;
  int32_t offset;
};
struct BwScaleOffset {
  uint32_t bitwidth;
  float scale;
  int32_t offset;
};
struct AxisScaleOffset {
  int32_t axis;
  uint32_t count;
  ScaleOffset* values;
};
struct BwAxisScaleOffset {
  uint32_t bitwidth;
  int32_t axis;
  uint32_t count;
  float* scales;
  int32_t* offsets;
};
struct QuantizeParams {
  Definition definition = kDefinitionUndefined;
  QuantEncoding encoding = kEncodingUndefined;
  union {
    ScaleOffset scale_offset;
    AxisScaleOffset axis_scale_offset;
    BwScaleOffset bw_scale_offset;
    BwAxisScaleOffset bw_axis_scale_offset;
  };
  QuantizeParams() : scale_offset{0.f, 0} {}
};

enum MemType : uint32_t { kMemRaw = 0, kMemHandle = 1 };
struct ClientBuffer {
  void* data;
  uint32_t size;
};

struct TensorV1 {
  uint32_t id = 0;
  const char* name = nullptr;
  TensorType type = kNative;
  uint32_t data_format = 0;  // flat buffer
  DataType data_type = kDataTypeUndefined;
  QuantizeParams quant;
  uint32_t rank = 0;
  uint32_t* dims = nullptr;
  MemType mem_type = kMemRaw;
  union {
    ClientBuffer client_buf;
    Handle mem_handle;
  };
  TensorV1() : client_buf{nullptr, 0} {}
};
// Version 2 adds trailing fields; its size is what Qnn_Tensor_t's union (and so every array of
// tensors and every tensor parameter) occupies, even when only v1 is filled.
struct TensorV2Tail {
  uint8_t* is_dynamic_dims;
  uint32_t sparse_layout, sparse_a, sparse_b;
  uint8_t is_produced;
};
struct Tensor {
  uint32_t version = 1;
  union {
    TensorV1 v1;
    struct {
      TensorV1 head;
      TensorV2Tail tail;
    } v2_storage;
  };
  Tensor() : v1() {}
};
static_assert(sizeof(TensorV1) == 112 && sizeof(Tensor) == 144, "QNN tensor ABI (LP64)");
static_assert(sizeof(Scalar) == 16, "QNN scalar ABI (LP64)");

struct Param {
  ParamType type;
  const char* name;
  union {
    Scalar scalar;
    Tensor tensor;
  };
  Param() : type(kParamScalar), name(nullptr), scalar{} {}
};

struct OpConfigV1 {
  const char* name;
  const char* package;
  const char* type;
  uint32_t num_params;
  Param* params;
  uint32_t num_inputs;
  Tensor* inputs;
  uint32_t num_outputs;
  Tensor* outputs;
};
struct OpConfig {
  uint32_t version = 1;
  OpConfigV1 v1{};
};

// Configs: a null-terminated array of pointers to these.
struct CustomConfig {
  uint32_t option;  // 0 = custom (the union holds a backend-specific struct pointer)
  union {
    void* custom;
    uint32_t priority;
  };
};

// HTP custom configs (pointed to by CustomConfig::custom).
struct HtpDeviceArch {
  uint32_t device_id;
  uint32_t arch;  // 68, 69, 73, 75, 79, ...
};
struct HtpDeviceConfig {
  uint32_t option;  // 0 = SoC model, 1 = arch
  union {
    uint32_t soc_model;
    HtpDeviceArch arch;
    void* extension;  // makes the union pointer-aligned, as the library lays it out
  };
};
struct HtpContextConfig {
  uint32_t option;  // 1 = weight sharing (graphs of the context share equal static tensors)
  union {
    uint8_t weight_sharing;
    void* group;  // the largest member is pointer-aligned
  };
};
struct HtpGraphOptimization {
  uint32_t type;  // 3 = finalize optimization flag (level 1..3)
  float value;
};
struct HtpGraphConfig {
  uint32_t option;  // 1 = optimization, 2 = precision, 3 = VTCM MB, 6 = HVX threads
  union {
    HtpGraphOptimization optimization;
    Precision precision;
    uint32_t vtcm_mb;
    uint64_t hvx_threads;
  };
};

struct ProfileEventData {
  uint32_t type;
  uint32_t unit;  // 1 us, 2 bytes, 3 cycles, 4 count
  uint64_t value;
  const char* identifier;
};
constexpr uint32_t kProfileBasic = 1, kProfileDetailed = 2;
constexpr uint32_t kUnitMicroseconds = 1, kUnitCycles = 3;

using LogCallback = void (*)(const char* fmt, uint32_t level, uint64_t timestamp, va_list args);

// The function table a provider returns, in its published order.
struct Interface {
  ErrorHandle (*property_has_capability)(uint32_t key);
  ErrorHandle (*backend_create)(Handle log, const void** config, Handle* backend);
  ErrorHandle (*backend_set_config)(Handle backend, const void** config);
  ErrorHandle (*backend_get_api_version)(ApiVersion* version);
  ErrorHandle (*backend_get_build_id)(const char** id);
  ErrorHandle (*backend_register_op_package)(Handle, const char*, const char*, const char*);
  ErrorHandle (*backend_get_supported_operations)(Handle, uint32_t*, const void**);
  ErrorHandle (*backend_validate_op_config)(Handle backend, OpConfig op);
  ErrorHandle (*backend_free)(Handle backend);
  ErrorHandle (*context_create)(Handle backend, Handle device, const void** config,
                                Handle* context);
  ErrorHandle (*context_set_config)(Handle context, const void** config);
  ErrorHandle (*context_get_binary_size)(Handle context, uint64_t* size);
  ErrorHandle (*context_get_binary)(Handle context, void* buffer, uint64_t size, uint64_t* written);
  ErrorHandle (*context_create_from_binary)(Handle backend, Handle device, const void** config,
                                            const void* binary, uint64_t size, Handle* context,
                                            Handle profile);
  ErrorHandle (*context_free)(Handle context, Handle profile);
  ErrorHandle (*graph_create)(Handle context, const char* name, const void** config, Handle* graph);
  ErrorHandle (*graph_create_subgraph)(Handle, const char*, Handle*);
  ErrorHandle (*graph_set_config)(Handle graph, const void** config);
  ErrorHandle (*graph_add_node)(Handle graph, OpConfig op);
  ErrorHandle (*graph_finalize)(Handle graph, Handle profile, Handle signal);
  ErrorHandle (*graph_retrieve)(Handle context, const char* name, Handle* graph);
  ErrorHandle (*graph_execute)(Handle graph, const Tensor* inputs, uint32_t num_inputs,
                               Tensor* outputs, uint32_t num_outputs, Handle profile,
                               Handle signal);
  void* graph_execute_async;
  ErrorHandle (*tensor_create_context_tensor)(Handle context, Tensor* tensor);
  ErrorHandle (*tensor_create_graph_tensor)(Handle graph, Tensor* tensor);
  ErrorHandle (*log_create)(LogCallback callback, uint32_t max_level, Handle* log);
  ErrorHandle (*log_set_level)(Handle log, uint32_t max_level);
  ErrorHandle (*log_free)(Handle log);
  ErrorHandle (*profile_create)(Handle backend, uint32_t level, Handle* profile);
  ErrorHandle (*profile_set_config)(Handle profile, const void** config);
  ErrorHandle (*profile_get_events)(Handle profile, const uint64_t** events, uint32_t* count);
  ErrorHandle (*profile_get_sub_events)(uint64_t event, const uint64_t** events, uint32_t* count);
  ErrorHandle (*profile_get_event_data)(uint64_t event, ProfileEventData* data);
  void* profile_get_extended_event_data;
  ErrorHandle (*profile_free)(Handle profile);
  void* mem_register;
  void* mem_deregister;
  void* device_get_platform_info;
  void* device_free_platform_info;
  void* device_get_infrastructure;
  ErrorHandle (*device_create)(Handle log, const void** config, Handle* device);
  ErrorHandle (*device_set_config)(Handle device, const void** config);
  void* device_get_info;
  ErrorHandle (*device_free)(Handle device);
  void* signal_create;
  void* signal_set_config;
  void* signal_trigger;
  void* signal_free;
  ErrorHandle (*error_get_message)(ErrorHandle error, const char** message);
  ErrorHandle (*error_get_verbose_message)(ErrorHandle error, const char** message);
  ErrorHandle (*error_free_verbose_message)(const char* message);
};

struct Provider {
  uint32_t backend_id;  // 6 = HTP
  const char* name;
  ApiVersion api_version;
  Interface fn;  // valid for core API major 2
};

using GetProvidersFn = ErrorHandle (*)(const Provider*** providers, uint32_t* count);

}  // namespace edgevl::qnn::api
