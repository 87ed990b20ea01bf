#pragma once
// What the blocked float32 kernel prefetches after the last block of a packed weight
// (gemm_packed_b.h): the first block of the weight that comes next. Decision 0119.
#include <cstdint>

namespace kiln::cpu {

// A run of a packed B's cache lines: a block of it, or part of one.
struct PackedRun {
  const char* first = nullptr;
  int64_t lines = 0;  // of 64 bytes
};

// The calling thread's record of which packed weight follows which: returns the first block
// the thread read in the product that followed its last product with `weight` (none the first
// time), and records `first_block` (this product's) as the successor of the thread's previous
// weight. A network calls its Linear layers in the same order on every forward, so the last
// block of one product can prefetch the next product's first block, which otherwise waits on
// memory with nothing to overlap it. Keys and addresses are never dereferenced: a weight freed
// since costs a wasted prefetch at most (prefetches never fault). Defined once, in
// packed_successor.cpp, for every ISA variant of the kernel. (Tried in the AMX tile kernels
// too, with the next column block's first block: BERT-base bfloat16 and its Linear shapes
// unchanged within the host's noise, so they were left as they were.)
PackedRun packed_successor(const void* weight, PackedRun first_block);

}  // namespace kiln::cpu
