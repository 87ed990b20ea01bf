#pragma once
// Loops shared by the indexing, shape and sorting kernels: an odometer over a shape that
// keeps one element offset per operand, reading index values, and moving single elements
// by bytes (so kernels that only move data need no dtype dispatch).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/core/convert.h"
#include "kiln/core/error.h"
#include "kiln/core/scalar.h"
#include "kiln/core/shape.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// Shape and element strides of t; with as_1d a 0-d tensor is seen as shape [1].
struct Geom {
  Shape shape;
  Strides strides;
};
inline Geom geom_of(const Tensor& t, bool as_1d = false) {
  if (as_1d && t.dim() == 0) return {{1}, {1}};
  return {t.shape(), t.strides()};
}

// Calls f(offs, coord) for every coordinate of shape in row-major order, where offs[k] is
// sum_d coord[d] * strides[k][d] (element offsets; strides[k] has shape.size() entries).
template <typename F>
void for_each_offset(const Shape& shape, const std::vector<Strides>& strides, F&& f) {
  const int64_t n = numel_of(shape);
  if (n == 0) return;
  const size_t nd = shape.size(), K = strides.size();
  for (const auto& s : strides)
    KILN_INTERNAL_ASSERT(s.size() == nd, "stride rank ", s.size(), " != shape rank ", nd);
  std::vector<int64_t> coord(nd, 0), offs(K, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(static_cast<const int64_t*>(offs.data()), static_cast<const int64_t*>(coord.data()));
    for (size_t d = nd; d-- > 0;) {
      if (++coord[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) offs[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < K; ++k) offs[k] -= strides[k][d] * (shape[d] - 1);
      coord[d] = 0;
    }
  }
}

// Calls f(offs, len) for the runs along the last dim of shape that cover the row-major
// elements [begin, end): offs[k] is the offset of the run's first element for strides[k],
// and the run goes on in steps of strides[k].back() (a 0-d shape is one run of one element).
template <typename F>
void for_each_run_in_range(const Shape& shape, const std::vector<Strides>& strides,
                           int64_t begin, int64_t end, F&& f) {
  if (begin >= end) return;  // (also every range of an empty shape)
  const size_t nd = shape.size(), K = strides.size();
  std::vector<int64_t> coord(nd, 0), offs(K, 0);
  if (nd == 0) return f(static_cast<const int64_t*>(offs.data()), int64_t(1));
  for (int64_t rem = begin, d = int64_t(nd) - 1; d >= 0; --d) {  // begin's coordinates
    coord[size_t(d)] = rem % shape[size_t(d)];
    rem /= shape[size_t(d)];
    for (size_t k = 0; k < K; ++k) offs[k] += coord[size_t(d)] * strides[k][size_t(d)];
  }
  const int64_t inner = shape.back();
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(inner - coord.back(), end - pos);
    f(static_cast<const int64_t*>(offs.data()), len);
    pos += len;
    for (size_t k = 0; k < K; ++k) offs[k] -= coord.back() * strides[k].back();
    coord.back() = 0;
    for (size_t d = nd - 1; d-- > 0;) {  // carry into the outer dims
      if (++coord[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) offs[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < K; ++k) offs[k] -= strides[k][d] * (shape[d] - 1);
      coord[d] = 0;
    }
  }
}

// Index tensors are int64 or int32 (checked by the ops layer).
inline int64_t read_index(const char* base, DType t, int64_t off) {
  if (t == DType::I64) return reinterpret_cast<const int64_t*>(base)[off];
  return reinterpret_cast<const int32_t*>(base)[off];
}

inline char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

// Copies element src[s] to dst[d] (element offsets, element size es).
inline void copy_elem(char* dst, int64_t d, const char* src, int64_t s, size_t es) {
  std::memcpy(dst + d * int64_t(es), src + s * int64_t(es), es);
}

// Copies src (any layout) into dst (same shape, same dtype, any layout): a threaded byte copy
// (parallel_copy_bytes) when both are contiguous, else the threaded strided iterator on same-sized integer words.
inline void copy_same_shape(const Tensor& dst, const Tensor& src) {
  if (dst.raw_data() == src.raw_data() && dst.strides() == src.strides()) return;
  if (dst.numel() == 0) return;
  if (dst.is_contiguous() && src.is_contiguous()) {
    detail::parallel_copy_bytes(dst.raw_data(), src.raw_data(), int64_t(dst.nbytes()));
    return;
  }
  auto copy_as = [&]<typename W>() {
    elementwise_kernel<W, W>(dst, {&src}, [](W v) { return v; });
  };
  switch (dst.element_size()) {
    case 1: return copy_as.template operator()<uint8_t>();
    case 2: return copy_as.template operator()<uint16_t>();
    case 4: return copy_as.template operator()<uint32_t>();
    case 8: return copy_as.template operator()<uint64_t>();
    default: break;
  }
  char* d = bytes_of(dst);
  const char* s = bytes_of(src);
  size_t es = dst.element_size();
  for_each_offset(dst.shape(), {dst.strides(), src.strides()},
                  [&](const int64_t* o, const int64_t*) { copy_elem(d, o[0], s, o[1], es); });
}

// PyTorch reports an out-of-range index as IndexError, except in gather and the scatter
// family, which raise RuntimeError; kiln raises the same classes.
[[noreturn]] inline void index_out_of_bounds(const char* op, int64_t index, int64_t dim,
                                             int64_t size) {
  std::string name = op;
  if (name.rfind("gather", 0) == 0 || name.rfind("scatter", 0) == 0)
    KILN_THROW(Error, op, ": index ", index, " is out of bounds for dimension ", dim,
               " with size ", size);
  KILN_THROW(IndexError, op, ": index ", index, " is out of bounds for dimension ", dim,
             " with size ", size);
}

// The value v converted to dtype t, as raw bytes (for fills that do not dispatch on dtype).
struct ElemBytes {
  alignas(16) char bytes[16] = {};  // up to complex128
};
inline ElemBytes scalar_bytes(double v, DType t) {
  ElemBytes b;
  if (is_complex(t)) {
    KILN_DISPATCH_COMPLEX(t, "fill", [&]<typename C>() {
      const C x(typename C::value_type(v), 0);
      std::memcpy(b.bytes, &x, sizeof(C));
    });
    return b;
  }
  KILN_DISPATCH_ALL(t, "fill", [&]<typename T>() {
    T x = convert_value<T>(v);
    std::memcpy(b.bytes, &x, sizeof(T));
  });
  return b;
}
// As fill_: a float Scalar converts from double, an integer one from int64 (exact); complex
// dtypes take the Scalar as a complex number.
inline ElemBytes scalar_bytes(const Scalar& v, DType t) {
  ElemBytes b;
  if (is_complex(t)) {
    KILN_DISPATCH_COMPLEX(t, "fill", [&]<typename C>() {
      const C x = scalar_to_complex<typename C::value_type>(v);
      std::memcpy(b.bytes, &x, sizeof(C));
    });
    return b;
  }
  KILN_DISPATCH_ALL(t, "fill", [&]<typename T>() {
    T x = v.is_floating() ? convert_value<T>(v.to_double())
          : v.is_bool()   ? convert_value<T>(v.to_bool())
                          : convert_value<T>(v.to_int());
    std::memcpy(b.bytes, &x, sizeof(T));
  });
  return b;
}

}  // namespace kiln::cpu
