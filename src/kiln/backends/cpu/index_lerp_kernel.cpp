// CPU kernel of index_lerp (kiln/ops/indexing.h): x viewed as [outer, size, inner] (the op
// passes contiguous tensors), out as [outer, n, inner]. With inner > 1 (interpolating along
// a dim that is not the last) each output row blends two whole input rows with one weight,
// a plain loop the compiler vectorises; along the last dim each output element picks its
// two inputs. Work is split over the threads by output rows.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

// PyTorch's lerp: exact at both ends (lerp(a, b, 1) == b).
template <typename C>
inline C lerp_value(C a, C b, C w) {
  return std::fabs(w) < C(0.5) ? a + w * (b - a) : b - (b - a) * (C(1) - w);
}

// The op's n indices along dim, each in [0, size).
void check_indices(const char* op, const int64_t* idx, int64_t n, int64_t size, int64_t dim) {
  for (int64_t j = 0; j < n; ++j)
    KILN_CHECK(idx[j] >= 0 && idx[j] < size, IndexError, op, ": index ", idx[j],
               " is out of bounds for dimension ", dim, " with size ", size);
}

void index_lerp_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const int64_t dim = wrap_dim(call.int_attr(0), x.dim());
  const int64_t size = x.size(dim), n = out.size(dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t* i0 = call.inputs[1].data_ptr<int64_t>();
  const int64_t* i1 = call.inputs[2].data_ptr<int64_t>();
  check_indices("index_lerp()", i0, n, size, dim);
  check_indices("index_lerp()", i1, n, size, dim);
  KILN_DISPATCH_FLOAT(x.dtype(), "index_lerp", [&]<typename T>() {
    using C = opmath_t<T>;
    const T* src = x.data_ptr<T>();
    const T* w = call.inputs[3].data_ptr<T>();
    T* dst = out.data_ptr<T>();
    const int64_t rows = outer * (inner > 1 ? n : 1);
    const VecLerpF32 vec_blend = vec_math_f32().lerp_rounded_twice_f32;
    auto run_rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        if (inner > 1) {
          const int64_t b = r / n, j = r % n;
          const T* a0 = src + (b * size + i0[j]) * inner;
          const T* a1 = src + (b * size + i1[j]) * inner;
          T* o = dst + r * inner;
          const C wj = C(w[j]);
          if constexpr (std::is_same_v<T, float>) {
            if (vec_blend) {  // this ISA level's loop (this file's own runs 4 lanes wide)
              vec_blend(a0, a1, wj, o, inner);
              continue;
            }
          }
          // The formula's branch depends on the row's weight only: one loop per side.
          if (std::fabs(wj) < C(0.5)) {
            for (int64_t k = 0; k < inner; ++k) o[k] = T(C(a0[k]) + wj * (C(a1[k]) - C(a0[k])));
          } else {
            const C v = C(1) - wj;
            for (int64_t k = 0; k < inner; ++k) o[k] = T(C(a1[k]) - (C(a1[k]) - C(a0[k])) * v);
          }
        } else {
          const T* a = src + r * size;
          T* o = dst + r * n;
          for (int64_t j = 0; j < n; ++j)
            o[j] = T(lerp_value(C(a[i0[j]]), C(a[i1[j]]), C(w[j])));
        }
      }
    };
    const int64_t per_row = inner > 1 ? inner : n;
    if (rows * per_row < detail::kParallelElements || rows < 2) return run_rows(0, rows);
    const int64_t pieces = std::min<int64_t>(rows, 4 * int64_t(detail::elementwise_threads()));
    detail::parallel_chunks(
        pieces, [&](int64_t p) { run_rows(rows * p / pieces, rows * (p + 1) / pieces); });
  });
}

// t[k] = lerp(a0[k], a1[k], w) in C for k < n: index_lerp's rows, one loop per side of the
// formula; float32 through vec_blend (this ISA level's loop) where there is one.
template <typename C, typename A>
void blend_rows(const A* a0, const A* a1, C w, C* t, int64_t n, VecLerpF32 vec_blend) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<C, float>) {
    if (vec_blend) return vec_blend(a0, a1, w, t, n);
  }
  if (std::fabs(w) < C(0.5)) {
    for (int64_t k = 0; k < n; ++k) t[k] = C(a0[k]) + w * (C(a1[k]) - C(a0[k]));
  } else {
    const C c = C(1) - w;
    for (int64_t k = 0; k < n; ++k) t[k] = C(a1[k]) - (C(a1[k]) - C(a0[k])) * c;
  }
}

// o[q * inner + k] = lerp(t[j0[q] * inner + k], t[j1[q] * inner + k], v[q]), rounded to O:
// index_lerp along the row's positions (one value each, or rows of `inner`).
// Float32 rows of positions go through vec_positions (this ISA level's loop) where there is one.
template <typename C, typename O>
void blend_positions(const C* t, const int64_t* j0, const int64_t* j1, const C* v, int64_t n1,
                     int64_t inner, O* o, VecLerpPositionsF32 vec_positions) {
  if (inner == 1) {  // one value per position: index_lerp's loop along the last dim
    for (int64_t q = 0; q < n1; ++q) o[q] = O(lerp_value(t[j0[q]], t[j1[q]], v[q]));
    return;
  }
  if constexpr (std::is_same_v<C, float> && std::is_same_v<O, float>) {
    if (vec_positions) return vec_positions(t, j0, j1, v, n1, inner, o);
  }
  for (int64_t q = 0; q < n1; ++q, o += inner) {
    const C* p0 = t + j0[q] * inner;
    const C* p1 = t + j1[q] * inner;
    const C vq = v[q];
    if (std::fabs(vq) < C(0.5)) {
      for (int64_t k = 0; k < inner; ++k) o[k] = O(p0[k] + vq * (p1[k] - p0[k]));
    } else {
      const C c = C(1) - vq;
      for (int64_t k = 0; k < inner; ++k) o[k] = O(p1[k] - (p1[k] - p0[k]) * c);
    }
  }
}

// index_lerp2: x viewed as [outer, size0, size1, inner], out as [outer, n0, n1, inner]. Each
// output row (b, j) blends input rows i0[j] and i1[j] along dim into a row of size1 * inner
// values of the computation type (what index_lerp along dim gives, in float32 for 16-bit
// inputs widened first), then each of its n1 positions blends two positions of that row, the
// result rounded once: index_lerp's two passes, value for value, without the intermediate
// tensor (bilinear x2 of a channels-last [1, 32, 14, 14] float32 ran in 13.8 us that way,
// PyTorch 8.8).
void index_lerp2_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const int64_t dim = wrap_dim(call.int_attr(0), x.dim());
  const int64_t size0 = x.size(dim), size1 = x.size(dim + 1);
  const int64_t n0 = out.size(dim), n1 = out.size(dim + 1);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 2; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t* i0 = call.inputs[1].data_ptr<int64_t>();
  const int64_t* i1 = call.inputs[2].data_ptr<int64_t>();
  const int64_t* j0 = call.inputs[4].data_ptr<int64_t>();
  const int64_t* j1 = call.inputs[5].data_ptr<int64_t>();
  check_indices("index_lerp2()", i0, n0, size0, dim);
  check_indices("index_lerp2()", i1, n0, size0, dim);
  check_indices("index_lerp2()", j0, n1, size1, dim + 1);
  check_indices("index_lerp2()", j1, n1, size1, dim + 1);
  KILN_DISPATCH_FLOAT(x.dtype(), "index_lerp2", [&]<typename T>() {
    using C = opmath_t<T>;
    const T* src = x.data_ptr<T>();
    const C* w = call.inputs[3].data_ptr<C>();
    const C* v = call.inputs[6].data_ptr<C>();
    T* dst = out.data_ptr<T>();
    const int64_t rows = outer * n0, row_len = size1 * inner;
    // bfloat16 rows are widened and the results narrowed by the ISA's vector loops (this file
    // is baseline code, whose one-value conversions made the fused pass slower than widening
    // the whole tensor first: channels-last [8, 32, 28, 28] x2 453 -> 659 us); the arithmetic
    // is the float32 one either way.
    const VecMathF32& vm = vec_math_f32();
    const VecLerpF32 vec_blend = vm.lerp_rounded_twice_f32;
    const VecLerpPositionsF32 vec_positions = vm.lerp_positions_f32;
    // Resizing down by 2 or more (rows of channels): each position of the blended row is used
    // at most about once, so both blends run per output position, the row never written
    // (channels-last x0.5 of [1, 64, 112, 112] float32, one thread: 88 -> 59 us, PyTorch 57).
    const VecLerpRowsPositionsF32 vec_direct =
        inner > 1 && 2 * n1 <= size1 + 1 ? vm.lerp_rows_positions_f32 : nullptr;
    constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
    const bool vector_bf16 = kBf16 && vm.widen_bf16 && vm.narrow_bf16;
    auto run_rows = [&](int64_t begin, int64_t end) {
      std::vector<C> row(static_cast<size_t>(row_len));
      std::vector<float> wide(vector_bf16 ? size_t(2 * row_len + n1 * inner) : 0);
      C* t = row.data();
      // The input rows held widened in the two slots of `wide` (neighbouring output rows
      // mostly blend the same two: widening them again made short rows slower).
      int64_t held[2] = {-1, -1};
      auto widened = [&](int64_t input_row, int slot) {
        float* at = wide.data() + slot * row_len;
        if (held[slot] != input_row) {
          vm.widen_bf16(reinterpret_cast<const uint16_t*>(src + input_row * row_len), at,
                        row_len);
          held[slot] = input_row;
        }
        return at;
      };
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / n0, j = r % n0;
        const C wj = w[j];
        if constexpr (kBf16) {
          if (vector_bf16) {
            const int64_t ra = b * size0 + i0[j], rb = b * size0 + i1[j];
            const int sa = held[1] == ra ? 1 : 0;  // a row already held keeps its slot
            const int sb = rb == ra ? sa : 1 - sa;
            const float* w0 = widened(ra, sa);
            const float* w1 = widened(rb, sb);
            float* o = wide.data() + 2 * row_len;
            if (vec_direct) {
              vec_direct(w0, w1, wj, j0, j1, v, n1, inner, o);
            } else {
              blend_rows(w0, w1, wj, t, row_len, vec_blend);
              blend_positions(t, j0, j1, v, n1, inner, o, vec_positions);
            }
            vm.narrow_bf16(o, reinterpret_cast<uint16_t*>(dst + r * n1 * inner), n1 * inner);
            continue;
          }
        }
        const T* a0 = src + (b * size0 + i0[j]) * row_len;
        const T* a1 = src + (b * size0 + i1[j]) * row_len;
        if constexpr (std::is_same_v<T, float>) {
          if (vec_direct) {
            vec_direct(a0, a1, wj, j0, j1, v, n1, inner, dst + r * n1 * inner);
            continue;
          }
        }
        blend_rows(a0, a1, wj, t, row_len, vec_blend);
        blend_positions(t, j0, j1, v, n1, inner, dst + r * n1 * inner, vec_positions);
      }
    };
    if (rows * n1 * inner < detail::kParallelElements || rows < 2) return run_rows(0, rows);
    const int64_t pieces = std::min<int64_t>(rows, 4 * int64_t(detail::elementwise_threads()));
    detail::parallel_chunks(
        pieces, [&](int64_t p) { run_rows(rows * p / pieces, rows * (p + 1) / pieces); });
  });
}

// index_lerp_backward: grad viewed as [outer, n, inner], out as [outer, size, inner]. Each
// outer slice's rows are accumulated in order (rows of a slice may meet at a position; slices
// never do, so they go over the threads), in the computation type: float32 / float64 into the
// output itself, 16-bit floats into a float32 slice rounded once. The composite it replaces
// (two products, two scatter_adds into zeros, a sum) took 3.6 ms of bilinear x2's backward
// over [8, 32, 28, 28] float32 (PyTorch's whole forward and backward: 2.6).
void index_lerp_backward_kernel(OpCall& call) {
  const Tensor& g = call.inputs[0];
  const Tensor& out = call.outs[0];
  const int64_t d = wrap_dim(call.int_attr(0), g.dim());
  const int64_t n = g.size(d), size = out.size(d);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= g.size(k);
  for (int64_t k = d + 1; k < g.dim(); ++k) inner *= g.size(k);
  const int64_t* i0 = call.inputs[1].data_ptr<int64_t>();
  const int64_t* i1 = call.inputs[2].data_ptr<int64_t>();
  check_indices("index_lerp_backward()", i0, n, size, d);
  check_indices("index_lerp_backward()", i1, n, size, d);
  KILN_DISPATCH_FLOAT(g.dtype(), "index_lerp_backward", [&]<typename T>() {
    using C = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    const T* wp = call.inputs[3].data_ptr<T>();
    T* op = out.data_ptr<T>();
    auto run_slices = [&](int64_t begin, int64_t end) {
      std::vector<C> wide(std::is_same_v<T, C> ? 0 : size_t(size * inner));
      for (int64_t b = begin; b < end; ++b) {
        C* acc;
        if constexpr (std::is_same_v<T, C>) acc = op + b * size * inner;
        else acc = wide.data();
        std::fill(acc, acc + size * inner, C(0));
        for (int64_t j = 0; j < n; ++j) {
          const T* gr = gp + (b * n + j) * inner;
          const C w1 = C(wp[j]), w0 = C(1) - w1;
          C* a0 = acc + i0[j] * inner;
          C* a1 = acc + i1[j] * inner;
          for (int64_t k = 0; k < inner; ++k) {
            const C gv = C(gr[k]);
            a0[k] += gv * w0;
            a1[k] += gv * w1;
          }
        }
        if constexpr (!std::is_same_v<T, C>) {
          T* o = op + b * size * inner;
          for (int64_t k = 0; k < size * inner; ++k) o[k] = T(acc[k]);
        }
      }
    };
    if (outer < 2 || outer * n * inner < detail::kParallelElements) return run_slices(0, outer);
    const int64_t pieces = std::min<int64_t>(outer, 4 * int64_t(detail::elementwise_threads()));
    detail::parallel_chunks(
        pieces, [&](int64_t p) { run_slices(outer * p / pieces, outer * (p + 1) / pieces); });
  });
}

}  // namespace

void register_index_lerp_kernel() {
  register_kernel("index_lerp_backward", DeviceType::CPU, index_lerp_backward_kernel,
                  kFloatDTypes);
  register_kernel("index_lerp", DeviceType::CPU, index_lerp_kernel, kFloatDTypes);
  register_kernel("index_lerp2", DeviceType::CPU, index_lerp2_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
