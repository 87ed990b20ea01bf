#include "gemm_f32.h"

#include <cmath>

#include "kiln/backends/cpu/cpu_info.h"

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

// Splitting the panels costs nothing extra (each thread packs only its own); splitting the
// rows makes each row run pack the same B again. So the grid with the least work on the
// busiest thread is chosen, packing counted. Each visit of a row tile (per column block) costs
// about two panels' work on top: its A rows come into L1 and its first products wait for
// them. Counting it, 256^3 splits the rows between two threads instead of the columns: float32
// 227 vs 217 GFLOP/s, bfloat16 399 vs 373 (timed one after the other); larger shapes keep
// their grid.
GemmGrid gemm_thread_grid(int64_t row_tiles, int64_t panels, int64_t threads, int64_t mr,
                          int64_t block_panels) {
  const double tile_visit = 2.0 * double(mr);
  GemmGrid best{1, threads};
  double best_cost = -1;
  for (int64_t tp = 1; tp <= threads; ++tp) {
    if (threads % tp != 0) continue;
    const int64_t tr = threads / tp;
    const double tiles = double((row_tiles + tr - 1) / tr);
    const double cols = double((panels + tp - 1) / tp);
    const double visits = std::ceil(cols / double(block_panels));  // column blocks per tile
    const double cost = tiles * (cols * double(mr) + visits * tile_visit) + cols * 2.0;
    if (best_cost < 0 || cost < best_cost) best_cost = cost, best = {tr, tp};
  }
  return best;
}

}  // namespace kiln::cpu
