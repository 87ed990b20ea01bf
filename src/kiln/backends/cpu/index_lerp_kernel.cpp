// CPU kernel of index_lerp (kiln/ops/indexing.h): x viewed as [outer, size, inner] (the op
// passes contiguous tensors), out as [outer, n, inner]. With inner > 1 (interpolating along
// a dim that is not the last) each output row blends two whole input rows with one weight,
// a plain loop the compiler vectorises; along the last dim each output element picks its
// two inputs. Work is split over the threads by output rows.
#include <cmath>

#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

// PyTorch's lerp: exact at both ends (lerp(a, b, 1) == b).
template <typename C>
inline C lerp_value(C a, C b, C w) {
  return std::fabs(w) < C(0.5) ? a + w * (b - a) : b - (b - a) * (C(1) - w);
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
  for (const int64_t* idx : {i0, i1})
    for (int64_t j = 0; j < n; ++j)
      KILN_CHECK(idx[j] >= 0 && idx[j] < size, IndexError, "index_lerp(): index ", idx[j],
                 " is out of bounds for dimension ", dim, " with size ", size);
  KILN_DISPATCH_FLOAT(x.dtype(), "index_lerp", [&]<typename T>() {
    using C = opmath_t<T>;
    const T* src = x.data_ptr<T>();
    const T* w = call.inputs[3].data_ptr<T>();
    T* dst = out.data_ptr<T>();
    const int64_t rows = outer * (inner > 1 ? n : 1);
    auto run_rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        if (inner > 1) {
          const int64_t b = r / n, j = r % n;
          const T* a0 = src + (b * size + i0[j]) * inner;
          const T* a1 = src + (b * size + i1[j]) * inner;
          T* o = dst + r * inner;
          const C wj = C(w[j]);
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

}  // namespace

void register_index_lerp_kernel() {
  register_kernel("index_lerp", DeviceType::CPU, index_lerp_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
