#include "models/family.h"

#include "core/error.h"

namespace edgevl::models {

std::vector<SplitPart> LlmFamily::split(const TensorDef& t, const LlmConfig&) const {
  fail("internal: family {} lists '{}' as fused but does not split it", name(), t.name);
}

}  // namespace edgevl::models
