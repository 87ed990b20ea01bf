#pragma once
// The iterator every elementwise kernel uses. Operands (output first) are viewed at one
// broadcast shape with byte strides (0 on broadcast dims); dims that can be merged are merged
// so the innermost run is as long as possible; the kernel body sees 1-D runs
// (pointers, byte strides, length) and is written once for every layout: contiguous,
// transposed, broadcast, 0-d and empty.
#include <array>
#include <tuple>
#include <cstdint>
#include <exception>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

template <size_t N>
struct StridedLoop {
  Shape shape;                                // merged shape (innermost last)
  std::vector<std::array<int64_t, N>> strides;  // per dim, byte strides of each operand
  std::array<char*, N> data{};
  int64_t numel = 0;
};

// Byte strides of t when viewed at shape (which t broadcasts to).
inline Strides broadcast_byte_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  size_t offset = shape.size() - t.shape().size();
  int64_t es = int64_t(t.element_size());
  for (size_t i = 0; i < t.shape().size(); ++i)
    out[offset + i] = t.shape()[i] == 1 ? 0 : t.strides()[i] * es;
  return out;
}

template <size_t N>
StridedLoop<N> make_strided_loop(const std::array<const Tensor*, N>& ops, const Shape& shape) {
  StridedLoop<N> loop;
  loop.numel = numel_of(shape);
  for (size_t k = 0; k < N; ++k) loop.data[k] = static_cast<char*>(ops[k]->raw_data());
  std::vector<Strides> st(N);
  for (size_t k = 0; k < N; ++k) st[k] = broadcast_byte_strides(*ops[k], shape);
  // Merge dims from innermost outwards: dim i-1 folds into dim i when for every operand
  // stride[i-1] == stride[i] * size[i]. Dims of size 1 are dropped.
  Shape merged;
  std::vector<std::array<int64_t, N>> mstrides;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = st[k][i];
    if (!merged.empty()) {
      bool can = true;
      for (size_t k = 0; k < N; ++k)
        if (s[k] != mstrides.back()[k] * merged.back()) can = false;
      if (can) {
        merged.back() *= shape[i];
        continue;
      }
    }
    merged.push_back(shape[i]);
    mstrides.push_back(s);
  }
  loop.shape.assign(merged.rbegin(), merged.rend());
  loop.strides.assign(mstrides.rbegin(), mstrides.rend());
  return loop;
}

// Calls body(ptrs, byte_strides, n) for each innermost run.
template <size_t N, typename Body>
void for_each_run(const StridedLoop<N>& loop, Body&& body) {
  if (loop.numel == 0) return;
  size_t nd = loop.shape.size();
  if (nd == 0) {  // a single element
    std::array<int64_t, N> zero{};
    body(loop.data, zero, int64_t(1));
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  std::array<char*, N> ptr = loop.data;
  const int64_t inner = loop.shape[nd - 1];
  const auto& inner_strides = loop.strides[nd - 1];
  while (true) {
    body(ptr, inner_strides, inner);
    // Advance the outer index (odometer), updating pointers incrementally.
    size_t d = nd - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < loop.shape[d]) {
        for (size_t k = 0; k < N; ++k) ptr[k] += loop.strides[d][k];
        break;
      }
      for (size_t k = 0; k < N; ++k) ptr[k] -= loop.strides[d][k] * (loop.shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// out[i] = f(in0[i], in1[i], ...) with out of type Out and inputs of types In...; operands
// are viewed at out's shape (inputs broadcast).
template <typename Out, typename... In, typename F>
void elementwise_kernel(const Tensor& out, std::array<const Tensor*, sizeof...(In)> ins, F&& f) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < sizeof...(In); ++k) ops[k + 1] = ins[k];
  auto loop = make_strided_loop<N>(ops, out.shape());
  for_each_run<N>(loop, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s,
                            int64_t n) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      // Unit strides (the common case): typed pointers let the compiler vectorise, and long
      // runs are split over the OpenMP threads.
      if (s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In))) && ...)) {
        Out* o = reinterpret_cast<Out*>(p[0]);
        const std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
        constexpr int64_t kParallelRun = int64_t(1) << 16;
        if (n < kParallelRun) {
          for (int64_t j = 0; j < n; ++j) o[j] = f(std::get<I>(in)[j]...);
          return;
        }
        // f may throw (integer division by zero): an exception must not leave the parallel
        // region, so each thread catches it and the first one is rethrown after the region.
        std::exception_ptr error;
#pragma omp parallel
        {
          try {
#pragma omp for schedule(static) nowait
            for (int64_t j = 0; j < n; ++j) o[j] = f(std::get<I>(in)[j]...);
          } catch (...) {
#pragma omp critical(kiln_elementwise_error)
            if (!error) error = std::current_exception();
          }
        }
        if (error) std::rethrow_exception(error);
        return;
      }
      for (int64_t j = 0; j < n; ++j) {
        *reinterpret_cast<Out*>(p[0] + j * s[0]) =
            f(*reinterpret_cast<const In*>(p[I + 1] + j * s[I + 1])...);
      }
    }(std::index_sequence_for<In...>{});
  });
}

}  // namespace kiln
