#include "gemm_f32.h"

#include <cmath>

#include "kiln/backends/cpu/cpu_info.h"
#include "gemm_packed_b.h"

namespace kiln::cpu {

GemmF32Fn gemm_f32_kernel() {
  static const GemmF32Fn fn = [] {
    IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return &gemm_f32_avx512;
    if (level >= IsaLevel::Avx2) return &gemm_f32_avx2;
    return &gemm_f32_baseline;
  }();
  return fn;
}

GemmPackedKernel gemm_f32_packed_kernel() {
  static const GemmPackedKernel k = [] {
    IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512)
      return GemmPackedKernel{&gemm_f32_avx512_pack, &gemm_f32_avx512_packed};
    if (level >= IsaLevel::Avx2)
      return GemmPackedKernel{&gemm_f32_avx2_pack, &gemm_f32_avx2_packed};
    return GemmPackedKernel{};
  }();
  return k;
}

// Splitting the panels costs nothing extra (each thread packs only its own); splitting the
// rows makes each row run pack the same B again. So the grid with the least work on the
// busiest thread is chosen, in units of one tile row's products per panel and k:
//  - each visit of a row tile (per column block) costs about two panels' work on top: its A
//    rows come into L1 and its first products wait for them;
//  - packing a panel costs a quarter of a tile's products while B sits in L2, and about six
//    times that once B is larger (it then streams from L3 or memory);
//  - each row tile a thread owns costs a little more again (fitted: with the terms above
//    alone, 512^3 split the columns, and the rows measured faster).
// Measured one after the other on two threads (forced grids, packed B 64-byte aligned):
// float32 256^3 rows 227 vs columns 205-219 GFLOP/s, 512^3 230 vs 229; bfloat16 256^3 400 vs
// 378, 512^3 438 vs 427; int8 256^3 775 vs 647 GOP/s, 512^3 855 vs 782; float32 1024^3
// columns 217 vs rows 211-215, 128 x 768 x 3072 columns 186-206 vs rows 174-189, 128 x 3072 x
// 768 columns 195-197 vs rows 165-181.
GemmGrid gemm_thread_grid(int64_t row_tiles, int64_t panels, int64_t threads, int64_t mr,
                          int64_t block_panels, int64_t b_bytes, int64_t prepacked_bytes) {
  const double tile_visit = 2.0 * double(mr);
  // b_bytes 0: B was packed beforehand (gemm_packed_b.h), so splitting rows costs no packing,
  // but every thread still reads its panels of the packed copy: a copy beyond the L2 (a
  // network's weights, cold from memory on each forward) costs about two tiles' work per
  // panel, so few rows split columns (x[36, 384] @ W[384, 1536] on two threads: each thread
  // reads half of W instead of all of it). At one tile per panel, BERT's x[128, 768] @
  // W[768, 768]^T and x[128, 3072] @ W[768, 3072]^T split the rows; split by columns inside
  // the model they took 399 -> 373 us and 1565 -> 1441 us, the whole encoder 62.4 -> 59.7 ms
  // (two threads, AVX-512; the same products alone, weights rotated through 400 MB, did not
  // move either way).
  const double pack =
      b_bytes != 0 ? (b_bytes > (int64_t(1) << 20) ? 1.5 : 0.25) * double(mr)
      : prepacked_bytes > (int64_t(1) << 20) ? 2.0 * double(mr)
                                             : 0.0;
  const double per_tile = 0.1875 * double(mr);
  GemmGrid best{1, threads};
  double best_cost = -1;
  for (int64_t tp = 1; tp <= threads; ++tp) {
    if (threads % tp != 0) continue;
    const int64_t tr = threads / tp;
    const double tiles = double((row_tiles + tr - 1) / tr);
    const double cols = double((panels + tp - 1) / tp);
    const double visits = std::ceil(cols / double(block_panels));  // column blocks per tile
    const double cost = tiles * (cols * double(mr) + visits * tile_visit + per_tile) + cols * pack;
    if (best_cost < 0 || cost < best_cost) best_cost = cost, best = {tr, tp};
  }
  return best;
}

}  // namespace kiln::cpu
