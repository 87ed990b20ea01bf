#pragma once
// The iterator every elementwise kernel uses. Operands (output first) are viewed at one
// broadcast shape with byte strides (0 on broadcast dims); dims that can be merged are merged
// so the innermost run is as long as possible; the kernel body sees 1-D runs
// (pointers, byte strides, length) and is written once for every layout: contiguous,
// transposed, broadcast, 0-d and empty.
#include <array>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/core/half.h"
#include "kiln/core/small_vec.h"
#include "kiln/tensor/copy_bytes.h"
#include "kiln/tensor/streaming_store.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

// Loops of up to kLoopInlineDims merged dims keep their dims inside the object (no malloc
// per op; decision 0059).
constexpr size_t kLoopInlineDims = 6;
using LoopDims = SmallVec<int64_t, kLoopInlineDims>;

template <size_t N>
struct StridedLoop {
  LoopDims shape;                                                  // merged, innermost last
  SmallVec<std::array<int64_t, N>, kLoopInlineDims> strides;  // per dim, each operand's bytes
  std::array<char*, N> data{};
  int64_t numel = 0;
};

// Whether every operand is contiguous at the loop's logical shape (no broadcast): then the
// loop is one run over all elements.
template <size_t N>
bool all_plain_at(const std::array<const Tensor*, N>& ops, const Shape& logical) {
  for (const Tensor* t : ops)
    if (!t->is_contiguous() || t->shape() != logical) return false;
  return true;
}

// Byte strides of t when viewed at shape (which t broadcasts to).
inline LoopDims broadcast_byte_strides(const Tensor& t, const Shape& shape) {
  LoopDims out(shape.size(), 0);
  size_t offset = shape.size() - t.shape().size();
  int64_t es = int64_t(t.element_size());
  for (size_t i = 0; i < t.shape().size(); ++i)
    out[offset + i] = t.shape()[i] == 1 ? 0 : t.strides()[i] * es;
  return out;
}

// memory_order: visit the dims in the memory order of ops[0] (the output) rather than in
// logical order, so a channels-last or transposed output is still written in unit-stride
// runs (the order of elementwise work is free; random fills keep logical order).
template <size_t N>
StridedLoop<N> make_strided_loop(const std::array<const Tensor*, N>& ops, const Shape& logical,
                                 bool memory_order = false) {
  StridedLoop<N> loop;
  loop.numel = numel_of(logical);
  for (size_t k = 0; k < N; ++k) loop.data[k] = static_cast<char*>(ops[k]->raw_data());
  if (loop.numel >= 1 && all_plain_at(ops, logical)) {
    // The common case, without the general merge below: one dim (none for one element,
    // as the merge drops dims of size 1).
    if (loop.numel > 1) {
      loop.shape.push_back(loop.numel);
      std::array<int64_t, N> es;
      for (size_t k = 0; k < N; ++k) es[k] = int64_t(ops[k]->element_size());
      loop.strides.push_back(es);
    }
    return loop;
  }
  std::array<LoopDims, N> st;
  for (size_t k = 0; k < N; ++k) st[k] = broadcast_byte_strides(*ops[k], logical);
  LoopDims shape(logical.begin(), logical.end());
  if (memory_order && !ops[0]->is_contiguous()) {
    // Outermost first: larger output strides first (stable, so ties keep logical order).
    LoopDims order(shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return st[0][size_t(a)] > st[0][size_t(b)]; });
    for (size_t i = 0; i < order.size(); ++i) shape[i] = logical[size_t(order[i])];
    for (auto& s : st) {
      const LoopDims old = s;
      for (size_t i = 0; i < order.size(); ++i) s[i] = old[size_t(order[i])];
    }
  }
  // Merge dims from innermost outwards: dim i-1 folds into dim i when for every operand
  // stride[i-1] == stride[i] * size[i]. Dims of size 1 are dropped.
  LoopDims merged;
  SmallVec<std::array<int64_t, N>, kLoopInlineDims> mstrides;
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
  for (size_t i = merged.size(); i-- > 0;) {
    loop.shape.push_back(merged[i]);
    loop.strides.push_back(mstrides[i]);
  }
  return loop;
}

// The operands' pointers at the start of innermost run `run` (row-major over the outer dims).
template <size_t N>
std::array<char*, N> run_pointers(const StridedLoop<N>& loop, int64_t run) {
  std::array<char*, N> ptr = loop.data;
  for (size_t d = loop.shape.size() - 1; d-- > 0;) {
    const int64_t i = run % loop.shape[d];
    run /= loop.shape[d];
    for (size_t k = 0; k < N; ++k) ptr[k] += i * loop.strides[d][k];
  }
  return ptr;
}

// Calls body(ptrs, byte_strides, n) for the innermost runs [begin, end) in row-major order
// (run r starts at the r-th position of the outer dims). The loop has at least one dim.
template <size_t N, typename Body>
void for_each_run_range(const StridedLoop<N>& loop, int64_t begin, int64_t end, Body&& body) {
  const size_t nd = loop.shape.size();
  LoopDims idx(nd, 0);
  std::array<char*, N> ptr = loop.data;
  int64_t rest = begin;
  for (size_t d = nd - 1; d-- > 0;) {
    idx[d] = rest % loop.shape[d];
    rest /= loop.shape[d];
    for (size_t k = 0; k < N; ++k) ptr[k] += idx[d] * loop.strides[d][k];
  }
  const int64_t inner = loop.shape[nd - 1];
  const auto& inner_strides = loop.strides[nd - 1];
  for (int64_t run = begin; run < end; ++run) {
    body(ptr, inner_strides, inner);
    // Advance the outer index (odometer), updating pointers incrementally.
    size_t d = nd - 1;
    while (d > 0) {
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

// Whether some operand steps at least a cache line per element along the runs but less than
// that from one run to the next (a transposed operand: x.t() + y, exp(x.t(), out=y)): visited
// run by run, each of its elements costs a cache line that the next run would have reused.
template <size_t N>
bool reads_across_runs(const StridedLoop<N>& loop) {
  const size_t nd = loop.shape.size();
  if (nd < 2 || loop.shape[nd - 2] < 2) return false;
  constexpr int64_t kLine = 64;
  for (size_t k = 0; k < N; ++k) {
    const int64_t along = std::abs(loop.strides[nd - 1][k]), across = std::abs(loop.strides[nd - 2][k]);
    if (along >= kLine && across < along && across != 0) return true;
  }
  return false;
}

// for_each_run_range for loops where reads_across_runs: the same calls cut into tiles of
// kTileRuns neighbouring runs x kTileLength elements, so the lines a transposed operand
// brings in serve every run of the tile while they are in L1, and its pages stay in the
// first-level TLB (float32 [1024, 1024] x.t() + y: 3.7 ms run by run, 0.62 ms tiled; at
// [4096, 4096] 75 -> 29 ms; tiles of 16 x 256 elements 105 ms there: 256 pages 16 KiB apart
// per tile row). The calls' order differs from for_each_run_range's: the runs must be
// independent.
template <size_t N, typename Body>
void for_each_run_range_tiled(const StridedLoop<N>& loop, int64_t begin, int64_t end, Body&& body) {
  constexpr int64_t kTileRuns = 64, kTileLength = 64;
  const size_t nd = loop.shape.size();
  const int64_t rows = loop.shape[nd - 2], inner = loop.shape[nd - 1];
  const auto& row_step = loop.strides[nd - 2];
  const auto& inner_strides = loop.strides[nd - 1];
  for (int64_t run = begin; run < end;) {
    // Runs [run, run + count): neighbours in dim nd - 2, within [begin, end).
    const int64_t count = std::min({kTileRuns, end - run, rows - run % rows});
    const std::array<char*, N> first = run_pointers(loop, run);
    for (int64_t c = 0; c < inner; c += kTileLength) {
      const int64_t len = std::min(kTileLength, inner - c);
      for (int64_t r = 0; r < count; ++r) {
        std::array<char*, N> q;
        for (size_t k = 0; k < N; ++k) q[k] = first[k] + r * row_step[k] + c * inner_strides[k];
        body(q, inner_strides, len);
      }
    }
    run += count;
  }
}

// The number of innermost runs of the loop (1 for a 0-d loop).
template <size_t N>
int64_t run_count(const StridedLoop<N>& loop) {
  if (loop.numel == 0) return 0;
  return loop.shape.empty() ? 1 : loop.numel / loop.shape.back();
}

// Calls body(ptrs, byte_strides, n) for each innermost run.
template <size_t N, typename Body>
void for_each_run(const StridedLoop<N>& loop, Body&& body) {
  if (loop.numel == 0) return;
  if (loop.shape.empty()) {  // a single element
    std::array<int64_t, N> zero{};
    body(loop.data, zero, int64_t(1));
    return;
  }
  for_each_run_range(loop, 0, run_count(loop), body);
}

namespace detail {

// Elementwise work below this many elements stays on the calling thread. The unary ops
// split from the same size (unary_kernels.cpp), so that in a chain of elementwise ops each
// thread reads what it wrote: at 2^16, with the unary ops splitting from 2^14, tanh(x + 1)
// of [8, 4096] float32 took 16.9 us and at 2^15 for both 11.4 (PyTorch, which splits from
// 2^15: 28-29); x + 1 alone 3.6 us either way, [12, 4096] 5.0 -> 4.2.
constexpr int64_t kParallelElements = int64_t(1) << 15;

int elementwise_threads();  // the OpenMP pool size (runtime/threads.cpp)

// Runs fn(c) for c in [0, n), spread over the threads in static chunks. fn may throw
// (integer division by zero): an exception must not leave an OpenMP loop body, so each
// chunk catches it and the first one is rethrown after the region.
template <typename Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  std::exception_ptr error;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n; ++c) {
    try {
      fn(c);
    } catch (...) {
#pragma omp critical(kiln_elementwise_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// dst[0, nbytes) = src[0, nbytes) for buffers that do not overlap: one copy_bytes for small
// copies, threaded pieces from 1 MiB, streaming stores from kStreamingStoreBytes.
inline void parallel_copy_bytes(void* dst, const void* src, int64_t nbytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int threads = elementwise_threads();
  if (nbytes < (int64_t(1) << 20) || threads <= 1) {
    copy_bytes(d, s, size_t(nbytes));
    return;
  }
  const bool stream = nbytes >= kStreamingStoreBytes;
  const int64_t pieces = 4 * int64_t(threads);
  parallel_chunks(pieces, [&](int64_t c) {
    const int64_t b = nbytes * c / pieces, e = nbytes * (c + 1) / pieces;
    if (!stream) {
      copy_bytes(d + b, s + b, size_t(e - b));
      return;
    }
    stream_store(d + b, s + b, size_t(e - b));
    stream_fence();
  });
}

// bool elements are read and written as their bytes (0 or 1) in the typed loops below: GCC
// vectorises no loop that loads or stores `bool` (logical_not of 1M elements took 165 us
// against PyTorch's 16, masked_fill over [1, 12, 128, 128] 55 us against 17 after).
template <typename T>
struct element_storage {
  using type = T;
};
template <>
struct element_storage<bool> {
  using type = uint8_t;
};
template <typename T>
using element_storage_t = typename element_storage<T>::type;

template <typename T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// One run whose output is contiguous and whose inputs are each contiguous or broadcast
// (stride 0): bit I of Mask marks input I as broadcast, so its index is the constant 0 and
// the compiler hoists its load; the rest is a plain vectorisable loop.
template <unsigned Mask, typename Out, typename... In, size_t... I, typename F>
void run_masked(Out* o, const std::tuple<const In*...>& in, int64_t n, F& f,
                std::index_sequence<I...>) {
  for (int64_t j = 0; j < n; ++j) o[j] = f(std::get<I>(in)[((Mask >> I) & 1u) ? 0 : j]...);
}

template <typename Out, typename... In, size_t... I, unsigned... Masks, typename F>
void run_with_mask(unsigned mask, Out* o, const std::tuple<const In*...>& in, int64_t n, F& f,
                   std::index_sequence<I...> is, std::integer_sequence<unsigned, Masks...>) {
  ((mask == Masks ? (run_masked<Masks, Out, In...>(o, in, n, f, is), true) : false) || ...);
}

// out[j] = f(in...[j]) over one run with byte strides s (output first). stream: the output
// is large enough for streaming stores (streaming_store.h) on its unit-stride runs.
template <typename Out, typename... In, size_t N, size_t... I, typename F>
void elementwise_run(const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n,
                     F& f, std::index_sequence<I...> is, bool stream = false) {
  const bool out_unit = s[0] == int64_t(sizeof(Out));
  using OutBytes = element_storage_t<Out>;
  if (out_unit && ((s[I + 1] == int64_t(sizeof(In))) && ...)) {
    // Unit strides (the common case): typed pointers let the compiler vectorise.
    OutBytes* o = reinterpret_cast<OutBytes*>(p[0]);
    const std::tuple<const element_storage_t<In>*...> in{
        reinterpret_cast<const element_storage_t<In>*>(p[I + 1])...};
    if (stream) {
      run_streamed(o, n, [&](OutBytes* d, int64_t j, int64_t len) {
        for (int64_t k = 0; k < len; ++k) d[k] = OutBytes(f(In(std::get<I>(in)[j + k])...));
      });
      return;
    }
    for (int64_t j = 0; j < n; ++j) o[j] = OutBytes(f(In(std::get<I>(in)[j])...));
    return;
  }
  if constexpr (sizeof...(In) >= 1 && sizeof...(In) <= 3 && (is_float_like_v<In> && ...)) {
    // Broadcast operands along the run (x + bias[C, 1, 1]): the same typed loop with the
    // broadcast inputs' index fixed at 0, for the floating types models use.
    if (out_unit && (((s[I + 1] == int64_t(sizeof(In))) || s[I + 1] == 0) && ...)) {
      const unsigned mask = (0u | ... | (s[I + 1] == 0 ? (1u << I) : 0u));
      OutBytes* o = reinterpret_cast<OutBytes*>(p[0]);
      const std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
      constexpr auto masks = std::make_integer_sequence<unsigned, (1u << sizeof...(In))>{};
      if (stream) {
        run_streamed(o, n, [&](OutBytes* d, int64_t j, int64_t len) {
          const std::tuple<const In*...> in_j{
              ((mask >> I) & 1u) ? std::get<I>(in) : std::get<I>(in) + j...};
          run_with_mask<OutBytes, In...>(mask, d, in_j, len, f, is, masks);
        });
        return;
      }
      run_with_mask<OutBytes, In...>(mask, o, in, n, f, is, masks);
      return;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    *reinterpret_cast<Out*>(p[0] + j * s[0]) =
        f(*reinterpret_cast<const In*>(p[I + 1] + j * s[I + 1])...);
  }
}

}  // namespace detail

// Calls run(ptrs, byte_strides, n) over every element of the loop, like for_each_run, with
// work of at least kParallelElements spread over the OpenMP threads: by groups of runs when
// there are several, else by cutting each run into pieces (strides are per element, so a
// piece is the same run with its pointers advanced). The runs must be independent.
template <size_t N, typename Run>
void parallel_for_each_run(const StridedLoop<N>& loop, Run&& run) {
  const int threads = loop.numel >= detail::kParallelElements ? detail::elementwise_threads() : 1;
  const bool tiled = loop.numel > 0 && reads_across_runs(loop);
  if (threads <= 1 || loop.shape.empty()) {
    if (tiled) for_each_run_range_tiled(loop, 0, run_count(loop), run);
    else for_each_run(loop, run);
    return;
  }
  const int64_t runs = run_count(loop);
  if (runs >= 2 * int64_t(threads)) {
    const int64_t groups = std::min<int64_t>(runs, 4 * int64_t(threads));
    detail::parallel_chunks(groups, [&](int64_t g) {
      const int64_t b = runs * g / groups, e = runs * (g + 1) / groups;
      if (tiled) for_each_run_range_tiled(loop, b, e, run);
      else for_each_run_range(loop, b, e, run);
    });
    return;
  }
  const int64_t pieces = 4 * int64_t(threads);
  for_each_run(loop, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s,
                         int64_t n) {
    detail::parallel_chunks(pieces, [&](int64_t c) {
      const int64_t b = n * c / pieces, e = n * (c + 1) / pieces;
      std::array<char*, N> q = p;
      for (size_t k = 0; k < N; ++k) q[k] += b * s[k];
      run(q, s, e - b);
    });
  });
}

// Whether an elementwise output should be written with streaming stores: large and
// contiguous, but not in place (relu_): there the line was just read into the cache, so an
// ordinary store costs no extra read.
template <size_t NIn>
bool use_streaming_stores(const Tensor& out, const std::array<const Tensor*, NIn>& ins) {
  bool stream = out.is_contiguous() &&
                out.numel() * int64_t(out.element_size()) >= detail::kStreamingStoreBytes;
  for (const Tensor* in : ins) stream = stream && !(in->defined() && in->shares_storage_with(out));
  return stream;
}

// out[i] = f(in0[i], in1[i], ...) with out of type Out and inputs of types In...; operands
// are viewed at out's shape (inputs broadcast), walked in out's memory order and threaded by
// parallel_for_each_run.
template <typename Out, typename... In, typename F>
void elementwise_kernel(const Tensor& out, std::array<const Tensor*, sizeof...(In)> ins, F&& f) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < sizeof...(In); ++k) ops[k + 1] = ins[k];
  auto loop = make_strided_loop<N>(ops, out.shape(), /*memory_order=*/true);
  const auto is = std::index_sequence_for<In...>{};
  const bool stream = use_streaming_stores(out, ins);
  auto run = [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
    detail::elementwise_run<Out, In...>(p, s, n, f, is, stream);
  };
  parallel_for_each_run(loop, run);
}

}  // namespace kiln
