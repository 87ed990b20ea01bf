#pragma once
// Graph passes (decision 0081). Each keeps the graph's results equal to the eager ones bit
// for bit.
#include "kiln/graph/graph.h"

namespace kiln::graph {

// Drops nodes whose results nobody uses (not in-place / out= nodes, not random ones: their
// draws move the generator for the ops after them).
int64_t eliminate_dead_code(Graph& graph);
// Merges nodes with the same op, inputs and attributes (not random ones; not at all in a
// graph that mutates, where equal value numbers need not mean equal contents).
int64_t eliminate_common_subexpressions(Graph& graph);
// Runs the nodes whose inputs are all literals or results of such nodes (factories such as
// arange / ones, and what is computed from them) once, keeping their results as literals.
int64_t fold_constants(Graph& graph);
// Chains of float32 elementwise steps (add, sub, mul, div with literal scalars, maximum,
// minimum, relu, neg, abs, clamp, erf, sqrt) over one tensor become one pointwise_program
// node (one pass instead of one per step). Only for graphs that record no gradient.
int64_t fuse_pointwise(Graph& graph);

struct PassStats {
  int64_t dead = 0, common = 0, folded = 0, fused = 0;
};
// All of them, in order; fusion only when `fuse`.
PassStats optimize(Graph& graph, bool fuse);

}  // namespace kiln::graph
