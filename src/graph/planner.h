#pragma once
#include "graph/graph.h"

namespace edgevl {

// Places every activation of `g` in one arena: a value occupies its slot from the op that
// defines it to the last op that reads it; slots are reused first-fit, 64-byte aligned.
// Sets Value::offset and Graph::arena_bytes. The graph output stays live to the end.
void plan_arena(Graph& g);

}  // namespace edgevl
