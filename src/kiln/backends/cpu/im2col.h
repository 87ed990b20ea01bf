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

// Calls f(c, kernel index, col row, image plane offsets) for every row of the col matrix;
// the body visits grid positions and the image index each one reads (-1 in padding).
template <typename F>
void for_each_col_entry(int64_t channels, const ConvGeometry& g, F&& f) {
  const int64_t K = g.kernel_size(), G = g.grid_size(), I = g.image_size();
  const bool parallel = channels > 1 && channels * K * G >= (int64_t(1) << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < channels; ++c) {
    int64_t k = 0;
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2, ++k) {
          const int64_t row = (c * K + k) * G;
          int64_t o = 0;
          for (int64_t o0 = 0; o0 < g.grid[0]; ++o0) {
            const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
            const bool in0 = i0 >= 0 && i0 < g.image[0];
            for (int64_t o1 = 0; o1 < g.grid[1]; ++o1) {
              const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
              const bool in01 = in0 && i1 >= 0 && i1 < g.image[1];
              const int64_t base = c * I + (i0 * g.image[1] + i1) * g.image[2];
              for (int64_t o2 = 0; o2 < g.grid[2]; ++o2, ++o) {
                const int64_t i2 = o2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
                const bool inside = in01 && i2 >= 0 && i2 < g.image[2];
                f(row + o, inside ? base + i2 : int64_t(-1));
              }
            }
          }
        }
  }
}

// col[C * K, G] from image[C, I].
template <typename T>
void im2col(const T* image, int64_t channels, const ConvGeometry& g, T* col) {
  for_each_col_entry(channels, g, [&](int64_t ci, int64_t ii) {
    col[ci] = ii >= 0 ? image[ii] : T(0);
  });
}

// image[C, I] = sum of the col entries that read each image element (the adjoint of im2col).
// Channels are independent, so the parallel loop over them never races.
template <typename T>
void col2im(const T* col, int64_t channels, const ConvGeometry& g, T* image) {
  std::fill(image, image + channels * g.image_size(), T(0));
  for_each_col_entry(channels, g, [&](int64_t ci, int64_t ii) {
    if (ii >= 0) image[ii] += col[ci];
  });
}

}  // namespace kiln::cpu
