// CPU kernels for strided copies with dtype conversion, fill, arange, linspace and eye.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"
#include "parallel_pieces.h"
#include "permuted_copy.h"

namespace kiln::cpu {
namespace {

// The two tensors have one layout over one dense block without gaps or overlaps (both
// contiguous, both channels-last, or both any other permutation of a contiguous tensor), so a
// copy or an elementwise conversion can walk them as flat arrays: the dims of more than one
// element, taken by increasing stride, each step over all the smaller ones. (Copies of
// channels-last tensors went through the permuted-copy walk: clone of a [16, 256, 56, 56]
// bfloat16 tensor at 15-19 GB/s against 29-42 contiguous.)
bool dense_alike(const Tensor& src, const Tensor& dst) {
  if (src.shape() != dst.shape() || src.strides() != dst.strides()) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (src.size(d) == 0) return false;
    if (src.size(d) > 1) dims.emplace_back(src.stride(d), src.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t step = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != step) return false;
    step *= size;
  }
  return true;
}

// float32 <-> bfloat16 / float16 between two tensors laid out alike in one dense block
// (contiguous, or both channels-last): the ISA's vector converters, threaded (the element loop
// rounded each value on its own in baseline code, 4x slower than a float32 copy for bfloat16,
// 10x for float16). False where it does not apply or at the baseline ISA level.
bool convert_f32_half_dense(const Tensor& src, const Tensor& dst) {
  const DType from = src.dtype(), to = dst.dtype();
  const bool narrow = from == DType::F32 && (to == DType::BF16 || to == DType::F16);
  const bool widen = to == DType::F32 && (from == DType::BF16 || from == DType::F16);
  if (!(narrow || widen) || !dense_alike(src, dst)) return false;
  const VecMathF32& vm = vec_math_f32();
  const bool f16 = from == DType::F16 || to == DType::F16;
  const VecNarrowBf16 narrow_fn = f16 ? vm.narrow_f16 : vm.narrow_bf16;
  const VecWidenBf16 widen_fn = f16 ? vm.widen_f16 : vm.widen_bf16;
  if (!widen_fn || !narrow_fn) return false;
  auto piece = [&](int64_t b, int64_t e) {
    if (narrow)
      narrow_fn(static_cast<const float*>(src.raw_data()) + b,
                static_cast<uint16_t*>(dst.raw_data()) + b, e - b);
    else
      widen_fn(static_cast<const uint16_t*>(src.raw_data()) + b,
               static_cast<float*>(dst.raw_data()) + b, e - b);
  };
  parallel_pieces(dst.numel(), piece);
  return true;
}

// float16 <-> bfloat16 between two tensors laid out alike in one dense block: blocks widened
// exactly to float32 in L1 and narrowed once (the element loop's single rounding, bit for
// bit), threaded; the element loop took 1.9x PyTorch's time. False at the baseline level.
bool convert_half_pair_dense(const Tensor& src, const Tensor& dst) {
  const DType from = src.dtype(), to = dst.dtype();
  if (!((from == DType::F16 && to == DType::BF16) || (from == DType::BF16 && to == DType::F16)) ||
      !dense_alike(src, dst))
    return false;
  const VecMathF32& vm = vec_math_f32();
  const bool from_f16 = from == DType::F16;
  const VecWidenF16 widen = from_f16 ? vm.widen_f16 : vm.widen_bf16;
  const VecNarrowF16 narrow = from_f16 ? vm.narrow_bf16 : vm.narrow_f16;
  if (!widen || !narrow) return false;
  const uint16_t* in = static_cast<const uint16_t*>(src.raw_data());
  uint16_t* out = static_cast<uint16_t*>(dst.raw_data());
  parallel_pieces(dst.numel(), [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 1024;
    alignas(64) float block[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t len = std::min(kBlock, e - i);
      widen(in + i, block, len);
      narrow(block, out + i, len);
    }
  });
  return true;
}

// float32 / bfloat16 / float16 -> int64 / int32 between two tensors laid out alike in one dense
// block: the ISA's truncating conversions (AVX-512, AVX2), 16-bit floats widened a block at a
// time first. The element loop took twice PyTorch's time (float32 [2048, 512] to int64: 485
// against 265 us).
bool convert_float_to_int_dense(const Tensor& src, const Tensor& dst) {
  const VecMathF32& vm = vec_math_f32();
  const bool from_f32 = src.dtype() == DType::F32, from_bf16 = src.dtype() == DType::BF16;
  const bool from_f16 = src.dtype() == DType::F16 && vm.widen_f16;
  const bool to_i64 = dst.dtype() == DType::I64, to_i32 = dst.dtype() == DType::I32;
  if (!vm.to_i64 || !vm.to_i32 || !(from_f32 || from_bf16 || from_f16) ||
      !(to_i64 || to_i32) || !dense_alike(src, dst))
    return false;
  const VecWidenF16 widen = from_f16 ? vm.widen_f16 : vm.widen_bf16;
  auto convert = [&](const float* in, int64_t at, int64_t len) {
    if (to_i64) vm.to_i64(in, static_cast<int64_t*>(dst.raw_data()) + at, len);
    else vm.to_i32(in, static_cast<int32_t*>(dst.raw_data()) + at, len);
  };
  parallel_pieces(dst.numel(), [&](int64_t b, int64_t e) {
    if (from_f32) return convert(static_cast<const float*>(src.raw_data()) + b, b, e - b);
    constexpr int64_t kBlock = 1024;
    alignas(64) float block[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t len = std::min(kBlock, e - i);
      widen(static_cast<const uint16_t*>(src.raw_data()) + i, block, len);
      convert(block, i, len);
    }
  });
  return true;
}

bool convert_dense(const Tensor& src, const Tensor& dst) {
  return convert_f32_half_dense(src, dst) || convert_half_pair_dense(src, dst) ||
         convert_float_to_int_dense(src, dst);
}

// A conversion into a contiguous tensor from a differently laid out one (w.t() cast to
// bfloat16, as autocast casts a transposed weight): the permuted copy's tiles into a contiguous
// block of the source's dtype, then the dense converter. The element loop walked a new cache
// line per element: float32 [3072, 768].t() to bfloat16 4.2 ms, against 0.67 for the same-dtype
// copy and 0.23 for the contiguous conversion (decision 0121).
bool convert_permuted(const Tensor& src, const Tensor& dst) {
  constexpr int64_t kMinElements = 4096;  // below, the temporary costs more than it saves
  // (Operands laid out alike convert in one pass: staging them only added a copy, float32 to
  // bool of 1M elements 629 us against PyTorch's 81.)
  if (src.dtype() == dst.dtype() || src.shape() != dst.shape() || !dst.is_contiguous() ||
      dst.numel() < kMinElements || dense_alike(src, dst))
    return false;
  const Tensor staged = empty_tensor(dst.shape(), src.dtype(), dst.device());
  if (!copy_permuted(src, staged)) return false;
  if (convert_dense(staged, dst)) return true;
  KILN_DISPATCH_ALL(dst.dtype(), "copy_", [&]<typename To>() {
    KILN_DISPATCH_ALL(src.dtype(), "copy_", [&]<typename From>() {
      elementwise_kernel<To, From>(dst, {&staged}, [](From v) { return convert_value<To>(v); });
    });
  });
  return true;
}

// outs[0] <- inputs[0] (broadcast, converted).
void copy_kernel(OpCall& call) {
  const Tensor& src = call.inputs[0];
  const Tensor& dst = call.outs[0];
  if (convert_dense(src, dst)) return;
  if (src.dtype() == dst.dtype() && dense_alike(src, dst)) {
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    const int64_t n = int64_t(dst.nbytes());
    if (s + n <= d || d + n <= s)
      detail::parallel_copy_bytes(d, s, n);  // threaded, streaming stores when large
    else if (n)
      std::memmove(d, s, size_t(n));
    return;
  }
  if (copy_permuted(src, dst) || convert_permuted(src, dst)) return;
  KILN_DISPATCH_ALL(dst.dtype(), "copy_", [&]<typename To>() {
    KILN_DISPATCH_ALL(src.dtype(), "copy_", [&]<typename From>() {
      elementwise_kernel<To, From>(dst, {&src}, [](From v) { return convert_value<To>(v); });
    });
  });
}

// dst[0, n) = the value in `bytes` with one string store (`rep stosw / stosl / stosq`) for
// 2-, 4- and 8-byte elements; false for other sizes and off x86-64. A fill of 4 MB on two
// threads: 26 us, as an AVX-512 store loop, where a 1 KiB block copied with memcpy took 32
// and an AVX2 store loop 31.
template <typename T>
bool string_fill(T* dst, const unsigned char* bytes, int64_t n) {
#if defined(__x86_64__)
  void* d = dst;
  uint64_t count = uint64_t(n);
  if constexpr (sizeof(T) == 2) {
    uint16_t v;
    std::memcpy(&v, bytes, 2);
    asm volatile("rep stosw" : "+D"(d), "+c"(count) : "a"(v) : "memory");
    return true;
  } else if constexpr (sizeof(T) == 4) {
    uint32_t v;
    std::memcpy(&v, bytes, 4);
    asm volatile("rep stosl" : "+D"(d), "+c"(count) : "a"(v) : "memory");
    return true;
  } else if constexpr (sizeof(T) == 8) {
    uint64_t v;
    std::memcpy(&v, bytes, 8);
    asm volatile("rep stosq" : "+D"(d), "+c"(count) : "a"(v) : "memory");
    return true;
  }
#endif
  (void)dst, (void)bytes, (void)n;
  return false;
}

// outs[0] <- attrs[0] (Scalar).
void fill_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const Scalar& v = call.scalar_attr(0);
  if (dst.numel() == 0) return;  // (an empty tensor's data may be null: no memset on it)
  KILN_DISPATCH_ALL(dst.dtype(), "fill_", [&]<typename T>() {
    T value = v.is_floating() ? convert_value<T>(v.to_double())
              : v.is_bool()   ? convert_value<T>(v.to_bool())
                              : convert_value<T>(v.to_int());
    if (dst.is_contiguous()) {
      // Contiguous: threaded pieces, memset where every byte of the value is zero (glibc's
      // vector stores); the element iterator filled 1M float32 at half torch's rate.
      T* p = static_cast<T*>(dst.raw_data());
      const int64_t n = dst.numel();
      unsigned char bytes[sizeof(T)];
      std::memcpy(bytes, &value, sizeof(T));
      const bool zero = std::all_of(bytes, bytes + sizeof(T), [](unsigned char b) { return b == 0; });
      // Other values: `rep stos` for 2-, 4- and 8-byte values (the string store runs at
      // AVX-512 store speed at every ISA level), else a 1 KiB block of the value copied over
      // the piece with memcpy (glibc's wide stores; std::fill compiles to this baseline
      // build's 16-byte stores).
      constexpr int64_t kBlock = 1024 / int64_t(sizeof(T));
      auto piece = [&](int64_t b, int64_t e) {
        if (zero) {  // zero bits are +0 in every dtype
          std::memset(static_cast<void*>(p + b), 0, size_t(e - b) * sizeof(T));
          return;
        }
        if (string_fill(p + b, bytes, e - b)) return;
        T block[kBlock];
        std::fill(block, block + kBlock, value);
        for (int64_t i = b; i < e; i += kBlock)
          std::memcpy(p + i, block, size_t(std::min(kBlock, e - i)) * sizeof(T));
      };
      parallel_pieces(n, piece);
      return;
    }
    elementwise_kernel<T>(dst, {}, [value]() { return value; });
  });
}

// outs[0][i] = start + i * step (attrs: start, end, step as Scalars).
void arange_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const Scalar& start = call.scalar_attr(0);
  const Scalar& step = call.scalar_attr(2);
  int64_t n = dst.numel();
  KILN_DISPATCH_ALL(dst.dtype(), "arange", [&]<typename T>() {
    T* p = dst.data_ptr<T>();
    if (start.is_floating() || step.is_floating() || is_floating(dst.dtype())) {
      double s = start.to_double(), d = step.to_double();
      for (int64_t i = 0; i < n; ++i) p[i] = convert_value<T>(s + double(i) * d);
    } else {
      int64_t s = start.to_int(), d = step.to_int();
      for (int64_t i = 0; i < n; ++i) p[i] = convert_value<T>(s + i * d);
    }
  });
}

// outs[0] = linspace(start, end, steps): the first half counts up from start and the second
// half down from end, as PyTorch, so both ends are exact.
void linspace_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  double start = call.double_attr(0), end = call.double_attr(1);
  int64_t n = dst.numel();
  KILN_DISPATCH_ALL(dst.dtype(), "linspace", [&]<typename T>() {
    T* p = dst.data_ptr<T>();
    if (n == 1) {
      p[0] = convert_value<T>(start);
      return;
    }
    double step = (end - start) / double(n - 1);
    int64_t half = n / 2;
    for (int64_t i = 0; i < n; ++i)
      p[i] = convert_value<T>(i < half ? start + step * double(i)
                                       : end - step * double(n - 1 - i));
  });
}

void eye_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  int64_t rows = dst.size(0), cols = dst.size(1);
  KILN_DISPATCH_ALL(dst.dtype(), "eye", [&]<typename T>() {
    T* p = dst.data_ptr<T>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = convert_value<T>(int(i == j));
  });
}

}  // namespace

void register_copy_kernels() {
  register_kernel("_copy_strided", DeviceType::CPU, copy_kernel, kAllDTypes);
  register_kernel("fill_", DeviceType::CPU, fill_kernel, kAllDTypes);
  register_kernel("arange", DeviceType::CPU, arange_kernel, kAllDTypes & ~dtype_bit(DType::Bool));
  register_kernel("linspace", DeviceType::CPU, linspace_kernel, kAllDTypes & ~dtype_bit(DType::Bool));
  register_kernel("eye", DeviceType::CPU, eye_kernel, kAllDTypes);
}

}  // namespace kiln::cpu
