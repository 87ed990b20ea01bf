// Choice of the bfloat16 GEMM variant, and the widening fallback for the baseline level: each
// operand is converted to float32 once (exactly: bfloat16 is a prefix of float32) and the
// plain float32 kernel multiplies them.
#include <vector>

#include "gemm_bf16.h"
#include "gemm_f32.h"
#include "gemm_packed_b.h"
#include "vec_math.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

namespace {
float widen(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

void gemm_bf16_widening(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                        int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                        int64_t c_rs) {
  std::vector<float> a(size_t(M * K)), b(size_t(K * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[size_t(i * K + k)] = widen(A[i * a_rs + k * a_cs]);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[size_t(k * N + j)] = widen(B[k * b_rs + j * b_cs]);
  gemm_f32_kernel()(M, N, K, a.data(), K, 1, b.data(), N, 1, C, c_rs, 1.0f);
}

GemmBf16Fn gemm_bf16_kernel() {
  static const GemmBf16Fn fn = [] {
    if (isa_level() >= IsaLevel::Amx && cpu_features().amx_bf16) return &gemm_bf16_amx;
    if (isa_level() >= IsaLevel::Avx512Vnni && cpu_features().avx512_bf16)
      return &gemm_bf16_avx512bf16;
    if (isa_level() >= IsaLevel::Avx512) return &gemm_bf16_avx512;
    if (isa_level() >= IsaLevel::Avx2) return &gemm_bf16_avx2;
    return &gemm_bf16_widening;
  }();
  return fn;
}

GemmBf16RowsFn gemm_bf16_rows_kernel() {
  static const GemmBf16RowsFn fn = []() -> GemmBf16RowsFn {
    if (isa_level() >= IsaLevel::Avx512) return &gemm_bf16_rows_avx512;
    if (isa_level() >= IsaLevel::Avx2) return &gemm_bf16_rows_avx2;
    return nullptr;
  }();
  return fn;
}

GemmBf16ToBf16Fn gemm_bf16_to_bf16_kernel() {
  static const GemmBf16ToBf16Fn fn = []() -> GemmBf16ToBf16Fn {
    if (isa_level() >= IsaLevel::Amx && cpu_features().amx_bf16) return &gemm_bf16_amx_to_bf16;
    return nullptr;
  }();
  return fn;
}

GemmPackedKernel gemm_bf16_packed_kernel() {
  static const GemmPackedKernel k = [] {
    if (isa_level() >= IsaLevel::Amx && cpu_features().amx_bf16)
      return GemmPackedKernel{&gemm_bf16_amx_pack, &gemm_bf16_amx_packed,
                              &gemm_bf16_amx_packed_to_bf16};
    return GemmPackedKernel{};  // see gemm_packed_b.h
  }();
  return k;
}

DotBf16Fn dot_bf16_kernel() {
  static const DotBf16Fn fn = []() -> DotBf16Fn {
    if (isa_level() >= IsaLevel::Avx512Vnni && cpu_features().avx512_bf16)
      return &dot_bf16_avx512bf16;
    if (isa_level() >= IsaLevel::Avx512) return &dot_bf16_avx512;
    if (isa_level() >= IsaLevel::Avx2) return &dot_bf16_avx2;
    return nullptr;
  }();
  return fn;
}

DotRowsBf16Fn dot_rows_bf16_kernel() {
  static const DotRowsBf16Fn fn = []() -> DotRowsBf16Fn {
    if (dot_bf16_kernel() == &dot_bf16_avx512bf16) return &dot_rows_bf16_avx512bf16;
    return nullptr;
  }();
  return fn;
}

DotF32Bf16Fn dot_f32_bf16_kernel() {
  static const DotF32Bf16Fn fn = []() -> DotF32Bf16Fn {
    const DotBf16Fn dot = dot_bf16_kernel();
    if (dot == &dot_bf16_avx512) return &dot_f32_bf16_avx512;
    if (dot == &dot_bf16_avx2) return &dot_f32_bf16_avx2;
    return nullptr;
  }();
  return fn;
}

Dot4F32Bf16Fn dot4_f32_bf16_kernel() {
  static const Dot4F32Bf16Fn fn = []() -> Dot4F32Bf16Fn {
    const DotF32Bf16Fn dot = dot_f32_bf16_kernel();
    if (dot == &dot_f32_bf16_avx512) return &dot4_f32_bf16_avx512;
    if (dot == &dot_f32_bf16_avx2) return &dot4_f32_bf16_avx2;
    return nullptr;
  }();
  return fn;
}

DotTileBf16Fn dot_tile_bf16_kernel() {
  static const DotTileBf16Fn fn = []() -> DotTileBf16Fn {
    if (isa_level() >= IsaLevel::Avx512Vnni && cpu_features().avx512_bf16)
      return &dot_tile_bf16_avx512bf16;
    return vec_math_f32().dot_tile_bf16;
  }();
  return fn;
}

}  // namespace kiln::cpu
