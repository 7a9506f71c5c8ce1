#pragma once
// A graph as the .evb graphs section stores it: written by the compiler, read and checked at
// load (each op against its op table entry, op_table.h).
#include <cstddef>

#include "core/byte_io.h"
#include "graph/graph.h"

namespace edgevl {

void write_graph(ByteWriter& w, const Graph& g);
// Validates op arity, value ids, shapes and arena extents; throws naming the graph.
Graph read_graph(ByteReader& r, size_t n_weights);

}  // namespace edgevl
