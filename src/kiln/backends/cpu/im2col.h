#pragma once
// im2col / col2im over up to three spatial dims, the data movement behind convolution as a
// matrix product. One side of a convolution is the "image" (the input of a plain
// convolution, the output of a transposed one); the other is the "grid" of kernel
// placements (the output / input). Column o of the col matrix holds, for kernel offset k
// of channel c (row c * K + k), the image element at o * stride - padding + k * dilation,
// or 0 where that falls into the padding. 1-D and 2-D problems are 3-D ones whose leading
// spatial dims have size 1.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/tensor/copy_bytes.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

struct ConvGeometry {
  int64_t image[3] = {1, 1, 1}, grid[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t image_size() const { return image[0] * image[1] * image[2]; }
  int64_t grid_size() const { return grid[0] * grid[1] * grid[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
  // True when the col matrix equals the image (1x1 kernel, stride 1, no padding).
  bool is_identity() const {
    for (int d = 0; d < 3; ++d)
      if (kernel[d] != 1 || stride[d] != 1 || pad[d] != 0 || image[d] != grid[d]) return false;
    return true;
  }
};

// The grid positions o2 in [0, grid) whose image index o2 * s - p + off (off = k * dil)
// lies in [0, image): [lo, hi), possibly empty.
inline void valid_range(int64_t grid, int64_t image, int64_t s, int64_t p, int64_t off,
                        int64_t& lo, int64_t& hi) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  lo = std::clamp<int64_t>(ceil_div(p - off, s), 0, grid);
  hi = std::clamp<int64_t>(ceil_div(image + p - off, s), lo, grid);
}

// Visits every row of the col matrix (channel c, kernel offset k) and, per (o0, o1) grid
// line, calls line(col offset of the line start, image offset of that line's o2 = 0 tap or
// -1 when the line lies in the padding, lo, hi) where [lo, hi) are the o2 positions inside
// the image; image index of o2 is image offset + o2 * stride[2]. Channels are independent
// and run in parallel when the work is large.
// ld: the col matrix's row stride (>= grid size; larger when several samples' columns sit
// side by side in one matrix).
template <typename F>
void for_each_col_line(int64_t channels, const ConvGeometry& g, int64_t ld, F&& line) {
  const int64_t K = g.kernel_size(), G = g.grid_size(), I = g.image_size();
  const bool parallel = channels > 1 && channels * K * G >= (int64_t(1) << 16);
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < channels; ++c) {
      int64_t k = 0;
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
        for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
          for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2, ++k) {
            int64_t lo, hi;
            const int64_t off2 = k2 * g.dil[2] - g.pad[2];
            valid_range(g.grid[2], g.image[2], g.stride[2], g.pad[2], k2 * g.dil[2], lo, hi);
            int64_t row = (c * K + k) * ld;
            for (int64_t o0 = 0; o0 < g.grid[0]; ++o0) {
              const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
              const bool in0 = i0 >= 0 && i0 < g.image[0];
              for (int64_t o1 = 0; o1 < g.grid[1]; ++o1, row += g.grid[2]) {
                const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
                const bool inside = in0 && i1 >= 0 && i1 < g.image[1];
                line(row, inside, c * I + (i0 * g.image[1] + i1) * g.image[2] + off2, lo, hi);
              }
            }
          }
    }
  });
}

// col[C * K, G] (row stride ld) from image[C, I].
template <typename T>
void im2col(const T* image, int64_t channels, const ConvGeometry& g, T* col, int64_t ld) {
  const int64_t W = g.grid[2], s = g.stride[2];
  for_each_col_line(channels, g, ld, [&](int64_t row, bool inside, int64_t base, int64_t lo, int64_t hi) {
    T* dst = col + row;
    if (!inside) {
      std::fill(dst, dst + W, T(0));
      return;
    }
    std::fill(dst, dst + lo, T(0));
    // base may point before the image (left padding); only o in [lo, hi) is read.
    if (s == 1) {
      if (hi > lo) detail::copy_bytes(dst + lo, image + base + lo, size_t(hi - lo) * sizeof(T));
    } else {
      for (int64_t o = lo; o < hi; ++o) dst[o] = image[base + o * s];
    }
    std::fill(dst + hi, dst + W, T(0));
  });
}

// image[C, I] = sum of the col entries that read each image element (the adjoint of im2col).
// Channels are independent, so the parallel loop over them never races.
template <typename T>
void col2im(const T* col, int64_t ld, int64_t channels, const ConvGeometry& g, T* image) {
  std::fill(image, image + channels * g.image_size(), T(0));
  const int64_t s = g.stride[2];
  for_each_col_line(channels, g, ld, [&](int64_t row, bool inside, int64_t base, int64_t lo, int64_t hi) {
    if (!inside) return;
    const T* src = col + row;
    for (int64_t o = lo; o < hi; ++o) image[base + o * s] += src[o];
  });
}

}  // namespace kiln::cpu
