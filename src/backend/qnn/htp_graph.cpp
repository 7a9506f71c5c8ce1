#include "backend/qnn/htp_graph.h"

#include <chrono>
#include <cstring>

#include "backend/qnn/qnn_library.h"
#include "core/error.h"

namespace edgevl::qnn {

namespace {

const api::Interface& F() {
  return QnnLibrary::get().fn();
}
void ck(api::ErrorHandle e, const std::string& what) {
  QnnLibrary::get().check(e, what);
}

}  // namespace

// ---- targets ----

std::vector<HtpTarget> HtpTarget::known() {
  // QNN's SoC ids: SM8550 (Snapdragon 8 Gen 2) v73, SM8650 (8 Gen 3) v75, SM8750 (8 Elite) v79,
  // SM8850 (8 Elite Gen 5) v81.
  return {{73, 43}, {75, 57}, {79, 69}, {81, 87}};
}

HtpTarget HtpTarget::parse(const std::string& name) {
  std::string names;
  for (const HtpTarget& t : known()) {
    if (t.name() == name) return t;
    names += (names.empty() ? "" : ", ") + t.name();
  }
  fail("unknown HTP target '{}' (known: {})", name, names);
}

size_t QnnType::element_bytes() const {
  // The low byte of a QNN data type spells its width in decimal digits: 0x08, 0x16, 0x32, 0x64
  // (and 0x04, stored a byte each).
  const uint32_t lo = uint32_t(type) & 0xFF, bits = (lo >> 4) * 10 + (lo & 0xF);
  return bits < 8 ? 1 : bits / 8;
}

// ---- params ----

namespace {

// A scalar parameter: the value goes in the union member `member` of its type.
template <class T>
QnnParam scalar_param(const std::string& n, api::DataType type, T api::Scalar::*member, T v) {
  QnnParam p;
  p.name = n;
  p.scalar.type = type;
  p.scalar.*member = v;
  return p;
}

}  // namespace

QnnParam QnnParam::boolean(const std::string& n, bool v) {
  return scalar_param<uint8_t>(n, api::kBool8, &api::Scalar::b8, v ? 1 : 0);
}
QnnParam QnnParam::u32(const std::string& n, uint32_t v) {
  return scalar_param(n, api::kUInt32, &api::Scalar::u32, v);
}
QnnParam QnnParam::i32(const std::string& n, int32_t v) {
  return scalar_param(n, api::kInt32, &api::Scalar::i32, v);
}
QnnParam QnnParam::f32(const std::string& n, float v) {
  return scalar_param(n, api::kFloat32, &api::Scalar::f32, v);
}
QnnParam QnnParam::u32_tensor(const std::string& n, std::vector<uint32_t> dims,
                              std::vector<uint32_t> values) {
  QnnParam p;
  p.name = n;
  p.is_tensor = true;
  p.dims = std::move(dims);
  p.u32_values = std::move(values);
  return p;
}
QnnParam QnnParam::i32_tensor(const std::string& n, std::vector<uint32_t> dims,
                              std::vector<int32_t> values) {
  QnnParam p = u32_tensor(n, std::move(dims), {});
  p.i32_values = std::move(values);
  return p;
}

// ---- context ----

HtpContext::HtpContext(const HtpTarget& target, bool share_weights)
    : target_(target), share_weights_(share_weights) {
  const QnnLibrary& lib = QnnLibrary::get();
  ck(F().backend_create(lib.log(), nullptr, &backend_), "QnnBackend_create");
  ck(F().device_create(lib.log(), device_config(), &device_),
     "QnnDevice_create for " + target.name());
  const void** config = nullptr;
  if (share_weights) {
    api::HtpContextConfig& c = context_configs_.emplace_back();
    c.option = 1;
    c.group = nullptr;
    c.weight_sharing = 1;
    std::vector<const void*>& list = config_lists_.emplace_back();
    list = {custom(&c), nullptr};
    config = list.data();
  }
  ck(F().context_create(backend_, device_, config, &context_),
     std::string("QnnContext_create") + (share_weights ? " (weight sharing)" : ""));
}

HtpContext::HtpContext(const HtpTarget& target, std::span<const uint8_t> binary) : target_(target) {
  const QnnLibrary& lib = QnnLibrary::get();
  ck(F().backend_create(lib.log(), nullptr, &backend_), "QnnBackend_create");
  ck(F().device_create(lib.log(), device_config(), &device_),
     "QnnDevice_create for " + target.name());
  ck(F().context_create_from_binary(backend_, device_, nullptr, binary.data(), binary.size(),
                                    &context_, nullptr),
     "QnnContext_createFromBinary (" + target.name() + ")");
}

const api::CustomConfig* HtpContext::custom(void* config) {
  api::CustomConfig& c = configs_.emplace_back();
  c.option = 0;
  c.custom = config;
  return &c;
}

const void** HtpContext::device_config() {
  // The SoC id fixes the architecture (QNN prefers it to an arch config, which it ignores once
  // a SoC is set).
  api::HtpDeviceConfig& soc = device_configs_.emplace_back();
  soc.option = 0;
  soc.soc_model = target_.soc_model;
  std::vector<const void*>& list = config_lists_.emplace_back();
  list = {custom(&soc), nullptr};
  return list.data();
}

HtpContext::~HtpContext() {
  if (context_) F().context_free(context_, nullptr);
  if (device_) F().device_free(device_);
  if (backend_) F().backend_free(backend_);
}

HtpGraph& HtpContext::graph(const std::string& name, bool precision_fp16) {
  std::vector<const void*>& list = config_lists_.emplace_back();
  if (precision_fp16) {
    api::HtpGraphConfig& precision = graph_configs_.emplace_back();
    precision.option = 2;
    precision.precision = api::kPrecisionFloat16;
    list.push_back(custom(&precision));
  }
  list.push_back(nullptr);
  api::Handle h = nullptr;
  ck(F().graph_create(context_, name.c_str(), list.size() > 1 ? list.data() : nullptr, &h),
     "QnnGraph_create " + name);
  graphs_.push_back(HtpGraph(*this, name, h));
  return graphs_.back();
}

HtpGraph& HtpContext::retrieve(const std::string& name, const std::vector<HtpTensorDesc>& inputs,
                               const std::vector<HtpTensorDesc>& outputs) {
  api::Handle h = nullptr;
  ck(F().graph_retrieve(context_, name.c_str(), &h), "QnnGraph_retrieve " + name);
  graphs_.push_back(HtpGraph(*this, name, h));
  HtpGraph& g = graphs_.back();
  auto add = [&](const HtpTensorDesc& d, api::TensorType kind) {
    HtpGraph::Slot& s = g.slots_.emplace_back();
    s.name = d.name;
    s.dims = d.dims;
    s.type = d.type;
    s.t.v1.id = d.id;
    s.t.v1.type = kind;
    return int(g.slots_.size() - 1);
  };
  for (const HtpTensorDesc& d : inputs) g.inputs_.push_back(add(d, api::kAppWrite));
  for (const HtpTensorDesc& d : outputs) g.outputs_.push_back(add(d, api::kAppRead));
  g.finalized_ = true;
  return g;
}

std::vector<uint8_t> HtpContext::binary() const {
  uint64_t size = 0;
  ck(F().context_get_binary_size(context_, &size), "QnnContext_getBinarySize");
  std::vector<uint8_t> out(size);
  uint64_t written = 0;
  ck(F().context_get_binary(context_, out.data(), size, &written), "QnnContext_getBinary");
  out.resize(written);
  return out;
}

// ---- graph ----

api::Tensor& HtpGraph::fix(Slot& s) {
  api::TensorV1& v = s.t.v1;
  v.name = s.name.c_str();
  v.rank = uint32_t(s.dims.size());
  v.dims = s.dims.data();
  v.data_type = s.type.type;
  if (!s.type.scales.empty()) {
    v.quant.definition = api::kDefined;
    const uint32_t bits = s.type.bitwidth ? s.type.bitwidth : uint32_t(s.type.element_bytes() * 8);
    if (s.type.axis < 0 && s.type.bitwidth == 0) {
      v.quant.encoding = api::kScaleOffset;
      v.quant.scale_offset = {s.type.scales[0], s.type.offsets[0]};
    } else if (s.type.axis < 0) {
      v.quant.encoding = api::kBwScaleOffset;
      v.quant.bw_scale_offset = {bits, s.type.scales[0], s.type.offsets[0]};
    } else if (s.type.bitwidth == 0) {
      s.axis_encodings.resize(s.type.scales.size());
      for (size_t i = 0; i < s.type.scales.size(); ++i)
        s.axis_encodings[i] = {s.type.scales[i], s.type.offsets[i]};
      v.quant.encoding = api::kAxisScaleOffset;
      v.quant.axis_scale_offset = {s.type.axis, uint32_t(s.axis_encodings.size()),
                                   s.axis_encodings.data()};
    } else {
      v.quant.encoding = api::kBwAxisScaleOffset;
      v.quant.bw_axis_scale_offset = {bits, s.type.axis, uint32_t(s.type.scales.size()),
                                      s.type.scales.data(), s.type.offsets.data()};
    }
  }
  if (!s.data.empty()) v.client_buf = {s.data.data(), uint32_t(s.data.size())};
  return s.t;
}

int HtpGraph::add(const std::string& name, std::vector<uint32_t> dims, QnnType t,
                  api::TensorType kind, std::span<const uint8_t> bytes) {
  check(!finalized_, "graph {}: tensor {} added after finalize", name_, name);
  Slot& s = slots_.emplace_back();
  s.name = name;
  s.dims = std::move(dims);
  s.type = std::move(t);
  s.data.assign(bytes.begin(), bytes.end());
  s.t.v1.type = kind;
  ck(F().tensor_create_graph_tensor(handle_, &fix(s)), "graph " + name_ + ": tensor " + name);
  return int(slots_.size() - 1);
}

int HtpGraph::input(const std::string& name, std::vector<uint32_t> dims, QnnType t) {
  int id = add(name, std::move(dims), std::move(t), api::kAppWrite, {});
  inputs_.push_back(id);
  return id;
}
int HtpGraph::output(const std::string& name, std::vector<uint32_t> dims, QnnType t) {
  int id = add(name, std::move(dims), std::move(t), api::kAppRead, {});
  outputs_.push_back(id);
  return id;
}
int HtpGraph::native(const std::string& name, std::vector<uint32_t> dims, QnnType t) {
  return add(name, std::move(dims), std::move(t), api::kNative, {});
}
int HtpGraph::constant(const std::string& name, std::vector<uint32_t> dims, QnnType t,
                       std::span<const uint8_t> bytes) {
  return add(name, std::move(dims), std::move(t), api::kStatic, bytes);
}

int HtpGraph::weight(const std::string& key, std::vector<uint32_t> dims, QnnType t,
                     std::span<const uint8_t> bytes) {
  std::string name = name_ + "_" + key;
  // FNV-1a over the bytes, the shape and the encoding: equal names hold equal tensors.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  };
  mix(bytes.data(), bytes.size());
  mix(dims.data(), dims.size() * sizeof(uint32_t));
  mix(&t.type, sizeof(t.type));
  mix(t.scales.data(), t.scales.size() * sizeof(float));
  mix(t.offsets.data(), t.offsets.size() * sizeof(int32_t));
  mix(&t.bitwidth, sizeof(t.bitwidth));
  if (ctx_.shares_weights()) name = fmt::format("w_{}_{:016x}", key, h);
  // A weight read by several ops of the graph is one tensor.
  if (auto it = weights_.find(name); it != weights_.end()) return it->second;
  return weights_[name] = constant(name, std::move(dims), std::move(t), bytes);
}

void HtpGraph::node(const std::string& name, const std::string& type, std::vector<int> inputs,
                    std::vector<int> outputs, std::vector<QnnParam> params) {
  check(!finalized_, "graph {}: node {} added after finalize", name_, name);
  std::vector<api::Tensor> in, out;
  for (int i : inputs) in.push_back(fix(slots_.at(size_t(i))));
  for (int o : outputs) out.push_back(fix(slots_.at(size_t(o))));
  // Tensor parameters are static tensors owned by the param list until the call returns.
  // Static data given to QNN (here: tensor parameters) must stay valid until finalize: the
  // graph keeps the parameters.
  std::vector<api::Param> ps(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    QnnParam& p = params_.emplace_back(std::move(params[i]));
    ps[i].name = names_.emplace_back(p.name).c_str();
    const char* tensor_name = names_.emplace_back(name + "." + p.name).c_str();
    if (!p.is_tensor) {
      ps[i].type = api::kParamScalar;
      ps[i].scalar = p.scalar;
      continue;
    }
    ps[i].type = api::kParamTensor;
    ps[i].tensor = api::Tensor();
    api::TensorV1& v = ps[i].tensor.v1;
    v.name = tensor_name;
    v.type = api::kStatic;
    v.rank = uint32_t(p.dims.size());
    v.dims = p.dims.data();
    if (!p.u32_values.empty()) {
      v.data_type = api::kUInt32;
      v.client_buf = {p.u32_values.data(), uint32_t(p.u32_values.size() * 4)};
    } else {
      v.data_type = api::kInt32;
      v.client_buf = {p.i32_values.data(), uint32_t(p.i32_values.size() * 4)};
    }
    // A tensor parameter is a static tensor of the graph: it is created like one first.
    ck(F().tensor_create_graph_tensor(handle_, &ps[i].tensor),
       "graph " + name_ + ": parameter " + tensor_name);
  }
  api::OpConfig op;
  op.v1 = {name.c_str(),        "qti.aisw", type.c_str(),         uint32_t(ps.size()), ps.data(),
           uint32_t(in.size()), in.data(),  uint32_t(out.size()), out.data()};
  const std::string what = "graph " + name_ + ": " + type + " node " + name;
  ck(F().backend_validate_op_config(ctx_.backend_, op), what + " (validate)");
  ck(F().graph_add_node(handle_, op), what);
}

std::vector<HtpTensorDesc> HtpGraph::input_descs() const {
  std::vector<HtpTensorDesc> out;
  for (int i : inputs_) {
    const Slot& s = slots_[size_t(i)];
    out.push_back({s.t.v1.id, s.name, s.dims, s.type});
  }
  return out;
}

std::vector<HtpTensorDesc> HtpGraph::output_descs() const {
  std::vector<HtpTensorDesc> out;
  for (int i : outputs_) {
    const Slot& s = slots_[size_t(i)];
    out.push_back({s.t.v1.id, s.name, s.dims, s.type});
  }
  return out;
}

void HtpGraph::finalize() {
  ck(F().graph_finalize(handle_, nullptr, nullptr),
     "graph " + name_ + ": finalize for " + ctx_.target_.name());
  finalized_ = true;
}

HtpRunStats HtpGraph::execute(std::span<const std::span<const uint8_t>> inputs,
                              std::span<const std::span<uint8_t>> outputs, bool node_cycles) {
  check(finalized_, "graph {}: execute before finalize", name_);
  check(inputs.size() == inputs_.size() && outputs.size() == outputs_.size(),
        "graph {}: {} inputs and {} outputs given, it has {} and {}", name_, inputs.size(),
        outputs.size(), inputs_.size(), outputs_.size());
  auto bind = [&](int id, const uint8_t* data, size_t size) {
    Slot& s = slots_.at(size_t(id));
    size_t want = s.type.element_bytes();
    for (uint32_t d : s.dims) want *= d;
    check(size == want, "graph {}: tensor {} given {} bytes, it holds {}", name_, s.name, size,
          want);
    api::Tensor t = fix(s);
    t.v1.client_buf = {const_cast<uint8_t*>(data), uint32_t(size)};
    return t;
  };
  std::vector<api::Tensor> in, out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(bind(inputs_[i], inputs[i].data(), inputs[i].size()));
  for (size_t i = 0; i < outputs.size(); ++i)
    out.push_back(bind(outputs_[i], outputs[i].data(), outputs[i].size()));

  api::Handle profile = nullptr;
  // The detailed level is the one that reports the accelerator's cycles (the basic level only
  // its time).
  ck(F().profile_create(ctx_.backend_, api::kProfileDetailed, &profile), "QnnProfile_create");
  auto t0 = std::chrono::steady_clock::now();
  api::ErrorHandle e = F().graph_execute(handle_, in.data(), uint32_t(in.size()), out.data(),
                                         uint32_t(out.size()), profile, nullptr);
  HtpRunStats st;
  if (api::error_code(e) == 6006) {
    // The detailed profile of some graphs overflows the library's op statistics and fails the
    // execute (QNN_GRAPH_ERROR_SET_PROFILE, seen with f32 LayerNorm graphs): run unprofiled.
    F().profile_free(profile);
    profile = nullptr;
    t0 = std::chrono::steady_clock::now();
    e = F().graph_execute(handle_, in.data(), uint32_t(in.size()), out.data(), uint32_t(out.size()),
                          nullptr, nullptr);
  }
  st.host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e != api::kSuccess) {
    if (profile) F().profile_free(profile);
    ck(e, "graph " + name_ + ": execute");
  }
  if (!profile) return st;
  const uint64_t* events = nullptr;
  uint32_t n = 0;
  if (F().profile_get_events(profile, &events, &n) == api::kSuccess) {
    for (uint32_t i = 0; i < n; ++i) {
      api::ProfileEventData d{};
      if (F().profile_get_event_data(events[i], &d) != api::kSuccess) continue;
      // 3003: accelerator execute time in cycles; 3004: the same in microseconds (HTP events).
      if (d.type == 3003 && d.unit == api::kUnitCycles) {
        st.accel_cycles = d.value;
        const uint64_t* sub = nullptr;
        uint32_t ns = 0;
        if (node_cycles && F().profile_get_sub_events(events[i], &sub, &ns) == api::kSuccess)
          for (uint32_t j = 0; j < ns; ++j) {
            api::ProfileEventData sd{};
            if (F().profile_get_event_data(sub[j], &sd) == api::kSuccess)
              st.node_cycles.emplace_back(sd.identifier ? sd.identifier : "", sd.value);
          }
      }
      if (d.type == 3004 && d.unit == api::kUnitMicroseconds) st.accel_us = d.value;
    }
  }
  F().profile_free(profile);
  return st;
}

}  // namespace edgevl::qnn
