#pragma once
// float16 elementwise ops in one pass over memory (decision 0066). Each run of the output is
// cut into blocks that are widened (F16C) into L1 buffers, put through the float32 vector
// function that float32 tensors use, and rounded back once: the float32 kernel's result on
// the widened inputs, bit for bit, which is the float16 op's definition (PyTorch's opmath,
// float16_in_float32.cpp) without the three extra memory passes of widening whole tensors
// first ([1024, 1024] add: 179 us that way against PyTorch's 56).
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>

#include "isa/vec_math.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace f16_detail {

// Values per block: two or three float buffers of 2 KiB, in L1 beside the data.
constexpr int64_t kBlock = 512;

// dst[0, n) = narrow(fn(widen(src[0, n)))), block by block (src == dst allowed).
template <typename Fn>
void unary_run(const uint16_t* src, uint16_t* dst, int64_t n, const Fn& fn) {
  const VecMathF32& vm = vec_math_f32();
  alignas(64) float in[kBlock], res[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    vm.widen_f16(src + i, in, m);
    fn(in, res, m);
    vm.narrow_f16(res, dst + i, m);
  }
}

// Whether an input shares memory with the output other than exactly (in place: the same
// data, shape and strides); then the blocks could read values already written.
inline bool overlaps(const Tensor& out, std::initializer_list<const Tensor*> ins) {
  for (const Tensor* in : ins) {
    if (in->shares_storage_with(out) &&
        !(in->raw_data() == out.raw_data() && in->strides() == out.strides() &&
          in->shape() == out.shape()))
      return true;
  }
  return false;
}

}  // namespace f16_detail

// Whether the ISA level converts float16 in vectors (F16C; not at the baseline level).
inline bool float16_blocks_available() {
  const VecMathF32& vm = vec_math_f32();
  return vm.widen_f16 != nullptr && vm.narrow_f16 != nullptr;
}

// dst[i] = fn applied to src[i] for n dense float16 values (dst == src, or no overlap):
// fn(in, out, m) is a float32 vector function. Long arrays are split over the threads;
// outputs of kStreamingStoreBytes and more (not in place) are written with streaming stores.
template <typename Fn>
void float16_unary_blocks(const uint16_t* src, uint16_t* dst, int64_t n, const Fn& fn) {
  const bool stream =
      src != dst && n * int64_t(sizeof(uint16_t)) >= detail::kStreamingStoreBytes;
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks == 1 && !stream) {  // small: no OpenMP region
    f16_detail::unary_run(src, dst, n, fn);
    return;
  }
  parallel_region(chunks > 4, [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
      if (stream) {
        detail::run_streamed(dst + begin, len, [&](uint16_t* d, int64_t j, int64_t m) {
          detail::prefetch_ahead(src + begin + j, m * int64_t(sizeof(uint16_t)));
          f16_detail::unary_run(src + begin + j, d, m, fn);
        });
      } else {
        f16_detail::unary_run(src + begin, dst + begin, len, fn);
      }
    }
  });
}

// out = fn(a, b) for float16 out, a and b (broadcast to out's shape): runs where every
// operand steps by one element or stays on one value go through fn16, the same operation on
// float16 converted in registers, where the level has it, else through the float32 vector
// function fn in blocks; other runs convert element by element through op(float, float), the
// same IEEE operation. Returns false, having done nothing, when fn is null or an input
// overlaps the output other than exactly (in place).
template <typename ScalarOp>
bool float16_binary_blocks(const Tensor& out, const Tensor& a, const Tensor& b,
                           VecBinaryF32 fn, VecBinaryF16 fn16, ScalarOp op) {
  if (!fn || !float16_blocks_available() || f16_detail::overlaps(out, {&a, &b})) return false;
  const VecMathF32& vm = vec_math_f32();
  auto loop = make_strided_loop<3>({&out, &a, &b}, out.shape(), /*memory_order=*/true);
  const bool stream = use_streaming_stores<2>(out, {&a, &b});
  constexpr int64_t kEs = int64_t(sizeof(uint16_t));
  using f16_detail::kBlock;
  auto run = [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    const bool steps_ok = s[0] == kEs && (s[1] == kEs || s[1] == 0) &&
                          (s[2] == kEs || s[2] == 0) && (s[1] != 0 || s[2] != 0);
    if (!steps_ok) {
      auto f = [&op](Half x, Half y) { return Half(op(float(x), float(y))); };
      detail::elementwise_run<Half, Half, Half>(p, s, n, f, std::index_sequence<0, 1>{});
      return;
    }
    const uint16_t* x = reinterpret_cast<const uint16_t*>(p[1]);
    const uint16_t* y = reinterpret_cast<const uint16_t*>(p[2]);
    const int64_t xs = s[1] / kEs, ys = s[2] / kEs;
    // A one-value operand is widened once for the run.
    const float x_value = float(*reinterpret_cast<const Half*>(x));
    const float y_value = float(*reinterpret_cast<const Half*>(y));
    // dst[0, len) = out[j, j + len): out itself or run_streamed's buffer.
    auto compute = [&](uint16_t* dst, int64_t j, int64_t len) {
      if (fn16) return fn16(x + j * xs, xs, y + j * ys, ys, dst, len);
      alignas(64) float bx[kBlock], by[kBlock], res[kBlock];
      for (int64_t k = 0; k < len; k += kBlock) {
        const int64_t m = std::min(kBlock, len - k);
        if (xs != 0) vm.widen_f16(x + j + k, bx, m);
        if (ys != 0) vm.widen_f16(y + j + k, by, m);
        fn(xs != 0 ? bx : &x_value, xs, ys != 0 ? by : &y_value, ys, res, m);
        vm.narrow_f16(res, dst + k, m);
      }
    };
    uint16_t* o = reinterpret_cast<uint16_t*>(p[0]);
    if (stream) detail::run_streamed(o, n, compute);
    else compute(o, 0, n);
  };
  parallel_for_each_run(loop, run);
  return true;
}

// out = cmp(a, b) for float16 a and b (broadcast to out's shape) and a bool out: the
// comparisons (eq ... ge), exact on the widened values. Runs where both inputs step by one
// element or stay on one value compare widened blocks; others convert element by element.
// Returns false, having done nothing, at the baseline level.
template <typename Cmp>
bool float16_compare_blocks(const Tensor& out, const Tensor& a, const Tensor& b, Cmp cmp) {
  if (!float16_blocks_available()) return false;
  const VecMathF32& vm = vec_math_f32();
  auto loop = make_strided_loop<3>({&out, &a, &b}, out.shape(), /*memory_order=*/true);
  constexpr int64_t kEs = int64_t(sizeof(uint16_t));
  using f16_detail::kBlock;
  auto run = [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    const bool steps_ok = s[0] == int64_t(sizeof(bool)) && (s[1] == kEs || s[1] == 0) &&
                          (s[2] == kEs || s[2] == 0) && (s[1] != 0 || s[2] != 0);
    if (!steps_ok) {
      auto f = [&cmp](Half x, Half y) { return cmp(float(x), float(y)); };
      detail::elementwise_run<bool, Half, Half>(p, s, n, f, std::index_sequence<0, 1>{});
      return;
    }
    const uint16_t* x = reinterpret_cast<const uint16_t*>(p[1]);
    const uint16_t* y = reinterpret_cast<const uint16_t*>(p[2]);
    const bool x_one = s[1] == 0, y_one = s[2] == 0;
    const float x_value = float(*reinterpret_cast<const Half*>(x));
    const float y_value = float(*reinterpret_cast<const Half*>(y));
    bool* o = reinterpret_cast<bool*>(p[0]);
    alignas(64) float bx[kBlock], by[kBlock];
    for (int64_t k = 0; k < n; k += kBlock) {
      const int64_t m = std::min(kBlock, n - k);
      if (!x_one) vm.widen_f16(x + k, bx, m);
      if (!y_one) vm.widen_f16(y + k, by, m);
      if (x_one) {
        for (int64_t i = 0; i < m; ++i) o[k + i] = cmp(x_value, by[i]);
      } else if (y_one) {
        for (int64_t i = 0; i < m; ++i) o[k + i] = cmp(bx[i], y_value);
      } else {
        for (int64_t i = 0; i < m; ++i) o[k + i] = cmp(bx[i], by[i]);
      }
    }
  };
  parallel_for_each_run(loop, run);
  return true;
}

// out = shift + t1 * t2 (addcmul with value 1: eval-mode batch norm, a scale and shift) for
// float16 operands broadcast to out's shape: runs where one factor (x) steps by one element
// and the other factor and shift step by one or stay on one value go through muladd_f32 in
// blocks (x * mul + add, two roundings, no fused multiply-add); other runs element by element
// with the same two roundings (this header is built without FMA contraction: baseline flags).
// Returns false, having done nothing, when an input overlaps the output other than exactly.
inline bool float16_muladd_blocks(const Tensor& out, const Tensor& shift, const Tensor& t1,
                                  const Tensor& t2) {
  const VecMathF32& vm = vec_math_f32();
  if (!vm.muladd_f32 || !float16_blocks_available() ||
      f16_detail::overlaps(out, {&shift, &t1, &t2}))
    return false;
  auto loop = make_strided_loop<4>({&out, &shift, &t1, &t2}, out.shape(), /*memory_order=*/true);
  const bool stream = use_streaming_stores<3>(out, {&shift, &t1, &t2});
  constexpr int64_t kEs = int64_t(sizeof(uint16_t));
  using f16_detail::kBlock;
  auto run = [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
    auto steps = [&](size_t k) { return s[k] == kEs || s[k] == 0; };
    const size_t xk = s[2] == kEs ? 2 : s[3] == kEs ? 3 : 0;
    if (s[0] != kEs || xk == 0 || !steps(1) || !steps(2) || !steps(3)) {
      auto f = [](Half a, Half b, Half c) {
        const float product = float(b) * float(c);
        return Half(float(a) + product);
      };
      detail::elementwise_run<Half, Half, Half, Half>(p, s, n, f,
                                                      std::index_sequence<0, 1, 2>{});
      return;
    }
    const size_t mk = xk == 2 ? 3 : 2;
    const uint16_t* x = reinterpret_cast<const uint16_t*>(p[xk]);
    const uint16_t* mul = reinterpret_cast<const uint16_t*>(p[mk]);
    const uint16_t* add = reinterpret_cast<const uint16_t*>(p[1]);
    const int64_t ms = s[mk] / kEs, as = s[1] / kEs;
    const float mul_value = float(*reinterpret_cast<const Half*>(mul));
    const float add_value = float(*reinterpret_cast<const Half*>(add));
    auto compute = [&](uint16_t* dst, int64_t j, int64_t len) {
      if (vm.muladd_f16)
        return vm.muladd_f16(x + j, 1, mul + j * ms, ms, add + j * as, as, dst, len);
      alignas(64) float bx[kBlock], bm[kBlock], ba[kBlock], res[kBlock];
      for (int64_t k = 0; k < len; k += kBlock) {
        const int64_t m = std::min(kBlock, len - k);
        vm.widen_f16(x + j + k, bx, m);
        if (ms != 0) vm.widen_f16(mul + j + k, bm, m);
        if (as != 0) vm.widen_f16(add + j + k, ba, m);
        vm.muladd_f32(bx, ms != 0 ? bm : &mul_value, ms, as != 0 ? ba : &add_value, as, res, m);
        vm.narrow_f16(res, dst + k, m);
      }
    };
    uint16_t* o = reinterpret_cast<uint16_t*>(p[0]);
    if (stream) detail::run_streamed(o, n, compute);
    else compute(o, 0, n);
  };
  parallel_for_each_run(loop, run);
  return true;
}

}  // namespace kiln::cpu
