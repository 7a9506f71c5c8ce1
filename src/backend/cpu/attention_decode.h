#pragma once
// The decode attention of one query row (attention_decode.cpp), for the dispatcher's attention().
#include <cstdint>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/thread_pool.h"

namespace edgevl::cpu {

// Query row 0 of `a` against its first n_keys keys (zero output when n_keys <= 0).
void attention_decode(ThreadPool& pool, const AttnArgs& a, int64_t n_keys);

}  // namespace edgevl::cpu
