// CPU kernels for matrix products: one batched GEMM, out = beta * self + alpha * (a @ b),
// over any strides (transposed, sliced, broadcast batch dims with stride 0). Loop order
// i-k-j with one accumulator row, so the innermost loop runs along rows of b and out.
// Accumulation: float32 runs the ISA-specific microkernel (isa/gemm_f32.h) and accumulates
// in float as BLAS does; float for float16/bfloat16, double for float64, wrapping int64 for
// integers (identical to wrapping in the narrow type); each output is rounded once.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "batched_small_gemm.h"
#include "few_rows_product.h"
#include "index_loops.h"
#include "isa/gemm_bf16.h"
#include "isa/gemm_f32.h"
#include "isa/gemm_packed_b.h"
#include "isa/gemm_s8.h"
#include "isa/vec_math.h"
#include "onednn_int_mm.h"
#include "onednn_matmul.h"
#include "own_packed_weights.h"
#include "permuted_copy.h"
#include "reduce_utils.h"
#include "scalar_math.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

template <typename T>
using gemm_acc_t = std::conditional_t<std::is_integral_v<T>, int64_t,
                                      std::conditional_t<sizeof(T) == 2, float, double>>;

// One matrix operand: rows x cols with element strides, plus strides for the batch dims.
struct MatOperand {
  const char* data = nullptr;
  Strides batch;  // aligned with the output's batch dims; 0 where broadcast
  int64_t rs = 0, cs = 0;
  // The operand's tensor when it is one 2-D matrix, perhaps broadcast over the batch: once
  // that batch folds into rows (x[B, T, K] @ W[K, N], every ONNX MatMul of a weight), a B used
  // again may be packed once (onednn_matmul.h, own_packed_weights.h).
  const Tensor* tensor = nullptr;
};

struct Gemm {
  Shape batch;  // the output's batch dims
  int64_t M = 0, N = 0, K = 0;
  MatOperand a, b, self, c;
  bool has_self = false;
};

// t's strides when broadcast (right-aligned) to shape; 0 on broadcast dims.
Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  size_t off = shape.size() - size_t(t.dim());
  for (size_t i = 0; i < size_t(t.dim()); ++i)
    out[off + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return out;
}

// A matrix operand of at least 2 dims, broadcast over batch.
MatOperand matrix(const Tensor& t, const Shape& batch) {
  MatOperand op;
  op.data = static_cast<const char*>(t.raw_data());
  Shape full = batch;
  full.push_back(t.shape()[size_t(t.dim() - 2)]);
  full.push_back(t.shape()[size_t(t.dim() - 1)]);
  Strides st = broadcast_strides(t, full);
  op.batch.assign(st.begin(), st.end() - 2);
  op.rs = st[st.size() - 2];
  op.cs = st[st.size() - 1];
  if (t.dim() == 2) op.tensor = &t;
  return op;
}

// Few rows times a B whose columns are contiguous (x @ W.T with a row-major weight W: every
// Linear in LLM decoding): each output is a dot product of two contiguous vectors, so the
// weight streams from memory once, in order, without the transposed copy the general path
// makes. Columns are split over the threads. Since decision 0045 products of 2 to 15 rows
// without batch dims take run_few_rows_transposed first, so this serves one row and the
// per-batch products of run_batched_gemv.
bool gemv_transposed_f32_applies(const Gemm& g) {
  return vec_math_f32().dot && g.M < kGemmBlockedMinRows && g.b.rs == 1 && g.K != 0;
}
bool run_gemv_transposed_f32(const Gemm& g, const float* A, const float* B, float* C,
                             const float* S, float alpha, float beta, bool use_self) {
  const VecDotF32 dot = vec_math_f32().dot;
  if (!gemv_transposed_f32_applies(g)) return false;
  std::vector<float> row(size_t(g.K));
  for (int64_t i = 0; i < g.M; ++i) {
    const float* a = A + i * g.a.rs;
    if (g.a.cs != 1) {
      for (int64_t k = 0; k < g.K; ++k) row[size_t(k)] = a[k * g.a.cs];
      a = row.data();
    }
    const bool parallel = g.N * g.K >= (int64_t(1) << 16);
    // Groups of four columns (four weight rows streamed together), the last group partial.
    const VecDot4F32 dot4 = vec_math_f32().dot4;
    const int64_t groups = (g.N + 3) / 4;
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t q = 0; q < groups; ++q) {
        const int64_t j0 = 4 * q, cols = std::min<int64_t>(4, g.N - j0);
        float r[4];
        if (cols == 4 && dot4) {
          dot4(a, B + j0 * g.b.cs, g.b.cs, g.K, r);
        } else {
          for (int64_t c = 0; c < cols; ++c) r[c] = dot(a, B + (j0 + c) * g.b.cs, g.K);
        }
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t j = j0 + c;
          float v = alpha * r[c];
          if (use_self) v += beta * S[i * g.self.rs + j * g.self.cs];
          C[i * g.c.rs + j * g.c.cs] = v;
        }
      }
    });
  }
  return true;
}

// The element offsets of A, B, C and self at every batch index of g, in batch order.
std::vector<std::array<int64_t, 4>> batch_offsets(const Gemm& g) {
  std::vector<std::array<int64_t, 4>> offs;
  for_each_offsets<4>(g.batch, {&g.a.batch, &g.b.batch, &g.c.batch, &g.self.batch},
                      [&](const std::array<int64_t, 4>& o) { offs.push_back(o); });
  return offs;
}

// Batched few-row products whose B has contiguous columns (attention scores against a KV
// cache while decoding: q [H, 1, D] @ k^T, k a slice of the cache): the matrix-vector
// kernel per batch, the batches spread over the threads. The general path packed B per
// batch (q @ k^T for 12 heads x 150 keys: 83 us against torch's 11 us). run_one(gi, check)
// runs one batch's product (gi: g at that batch, no batch dims), or with check only says
// whether the matrix-vector kernel applies; the strides decide that, so the first batch
// tells. Every batch runs inside one parallel loop when there are enough to share: the first
// ran alone before (to learn whether the kernel applied), which left a thread idle through
// it (12 heads x 140 keys read from memory: 47 -> 42 us).
template <typename Elem, typename RunOne>
bool run_batched_gemv(const Gemm& g, RunOne&& run_one) {
  if (g.batch.empty() || g.M >= kGemmBlockedMinRows || g.b.rs != 1) return false;
  const std::vector<std::array<int64_t, 4>> offs = batch_offsets(g);
  auto at = [&](const std::array<int64_t, 4>& o) {
    Gemm gi = g;
    gi.batch = {};
    MatOperand* ops[4] = {&gi.a, &gi.b, &gi.c, &gi.self};
    for (int k = 0; k < 4; ++k) {
      ops[k]->batch = {};
      if (ops[k]->data) ops[k]->data += o[size_t(k)] * int64_t(sizeof(Elem));
    }
    return gi;
  };
  if (offs.empty()) return true;
  if (!run_one(at(offs[0]), true)) return false;
  const int threads = omp_get_max_threads();
  const bool parallel = int64_t(offs.size()) >= threads &&
                        int64_t(offs.size()) * g.M * g.N * g.K >= (int64_t(1) << 16);
  if (!parallel) {
    for (const auto& o : offs) run_one(at(o), false);
    return true;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < offs.size(); ++i) run_one(at(offs[i]), false);
  return true;
}

// kiln's own kernel with B packed once (decision 0043), for a product that oneDNN did not
// take whose B is one whole 2-D tensor used again unchanged, with kPackReusedMinRows or more
// rows (decision 0031's rule for oneDNN's copies). Writes alpha * A @ B into the float32 C, or
// (c16 given, alpha 1) the product rounded to bfloat16 into c16 by a kernel that rounds inside
// (decision 0119). False (nothing done) where that does not apply or the level has no such
// packed kernel.
bool own_kernel_with_packed_b(DType dtype, const Gemm& g, const Tensor* b_tensor, const void* A,
                              const void* B, float* C, int64_t c_rs, float alpha,
                              uint16_t* c16 = nullptr) {
  if (!b_tensor || g.M < kPackReusedMinRows || b_tensor->raw_data() != B) return false;
  const GemmPackedKernel k =
      dtype == DType::F32 ? gemm_f32_packed_kernel() : gemm_bf16_packed_kernel();
  if (!k || (c16 && !k.run_to_bf16)) return false;
  const std::string key = "mm|" + std::string(dtype_name(dtype)) + "|" + std::to_string(g.K) +
                          "x" + std::to_string(g.N) + "|" + std::to_string(g.b.rs) + "," +
                          std::to_string(g.b.cs);
  if (!operand_seen_unchanged(*b_tensor, key)) return false;
  const auto packed = own_packed_weight(*b_tensor, key,
                                        [&] { return k.pack(g.K, g.N, B, g.b.rs, g.b.cs); });
  if (c16)
    k.run_to_bf16(g.M, A, g.a.rs, g.a.cs, *packed, c16, c_rs, nullptr);
  else
    k.run(g.M, A, g.a.rs, g.a.cs, *packed, C, c_rs, alpha, nullptr);
  return true;
}

// Few rows (2 to kFewRowsMax - 1, bfloat16 to few_rows_max_bf16() - 1; no batch dims) times a
// B with contiguous columns (x @ W.T while decoding several sequences): few_rows_product.h's
// dot tiles into float32 sums, the weight read from memory once, then alpha, self and the
// output's dtype (T: float or BFloat16). False (nothing written) where that does not apply.
template <typename T>
bool run_few_rows_transposed(const Gemm& g, float alpha, float beta, bool use_self) {
  const int64_t max_rows = std::is_same_v<T, float> ? kFewRowsMax : few_rows_max_bf16();
  if (!g.batch.empty() || g.M < 2 || g.M >= max_rows || g.b.rs != 1 || g.a.cs != 1 || g.K == 0)
    return false;
  std::unique_ptr<float[]> sums(new float[size_t(g.M * g.N)]);
  bool done;
  if constexpr (std::is_same_v<T, float>) {
    done = few_rows_times_weight_f32(g.M, g.N, g.K, reinterpret_cast<const float*>(g.a.data),
                                     g.a.rs, reinterpret_cast<const float*>(g.b.data), g.b.cs,
                                     sums.get(), g.N);
  } else {
    done = few_rows_times_weight_bf16(g.M, g.N, g.K, reinterpret_cast<const uint16_t*>(g.a.data),
                                      g.a.rs, reinterpret_cast<const uint16_t*>(g.b.data),
                                      g.b.cs, sums.get(), g.N);
  }
  if (!done) return false;
  const T* S = reinterpret_cast<const T*>(g.self.data);
  T* C = const_cast<T*>(reinterpret_cast<const T*>(g.c.data));
  parallel_region(g.M * g.N >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        float r = alpha * sums[size_t(i * g.N + j)];
        if (use_self) r += beta * float(S[i * g.self.rs + j * g.self.cs]);
        C[i * g.c.rs + j * g.c.cs] = T(r);
      }
  });
  return true;
}

// Batched products of few rows that the row-streaming kernel takes one batch at a time, each
// too small to share among the threads (decoding attention against a KV cache: weights [H, 1,
// S] @ V [H, S, 64], V a slice of the cache): the batches are spread over the threads instead
// of running one after another on one. V comes from memory there (the step's weights passed
// through the cache since the layer's last step), and one thread read it at a fraction of the
// bandwidth. one_batch(offsets) runs one batch; false (nothing run) where this does not apply.
template <typename OneBatch>
bool run_small_batches_in_parallel(const Gemm& g, OneBatch&& one_batch) {
  const int64_t per_batch = g.M * g.N * g.K;
  if (g.batch.empty() || g.M >= kGemmBlockedMinRows || per_batch >= (int64_t(1) << 18))
    return false;  // no batches, the blocked kernel, or a product the kernel threads itself
  const int threads = omp_get_max_threads();
  const std::vector<std::array<int64_t, 4>> offs = batch_offsets(g);
  if (threads < 2 || int64_t(offs.size()) < threads ||
      int64_t(offs.size()) * per_batch < (int64_t(1) << 16))
    return false;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < offs.size(); ++i) one_batch(offs[i]);
  return true;
}

// float32 with a unit-stride output: the ISA-specific kernel (float accumulation, as BLAS).
// Any layout of B goes to it as is: its packing reads a transposed weight directly.
void run_gemm_f32(const Gemm& g, const Scalar& beta_s, const Scalar& alpha_s) {
  const float alpha = alpha_s.to<float>(), beta = beta_s.to<float>();
  const bool use_self = g.has_self && beta != 0.0f;
  if (run_few_rows_transposed<float>(g, alpha, beta, use_self)) return;
  int64_t batches = 1;
  for (int64_t d : g.batch) batches *= d;
  if (batches == 1 && run_gemv_transposed_f32(g, reinterpret_cast<const float*>(g.a.data),
                                                 reinterpret_cast<const float*>(g.b.data),
                                                 const_cast<float*>(reinterpret_cast<const float*>(g.c.data)),
                                                 reinterpret_cast<const float*>(g.self.data),
                                                 alpha, beta, use_self))
    return;
  if (run_batched_gemv<float>(g, [&](const Gemm& gi, bool check_only) {
        if (check_only) return gemv_transposed_f32_applies(gi);
        return run_gemv_transposed_f32(gi, reinterpret_cast<const float*>(gi.a.data),
                                       reinterpret_cast<const float*>(gi.b.data),
                                       const_cast<float*>(reinterpret_cast<const float*>(gi.c.data)),
                                       reinterpret_cast<const float*>(gi.self.data), alpha, beta,
                                       use_self);
      }))
    return;
  const GemmF32Fn kernel = gemm_f32_kernel();
  // addmm with beta = 1 and self one contiguous row broadcast over the rows (Linear's bias).
  // (alpha == 1 only: oneDNN would scale the bias with the product.)
  const bool bias_row = use_self && beta == 1.0f && alpha == 1.0f && g.self.rs == 0 && g.self.cs == 1;
  const float* A = reinterpret_cast<const float*>(g.a.data);
  const float* B = reinterpret_cast<const float*>(g.b.data);
  const float* S = reinterpret_cast<const float*>(g.self.data);
  float* Cp = const_cast<float*>(reinterpret_cast<const float*>(g.c.data));
  const Tensor* b_tensor = g.batch.empty() ? g.b.tensor : nullptr;
  // One batch dim (attention's [B*H] products) without self: a single batched oneDNN call.
  if (!use_self && g.batch.size() == 1 &&
      onednn_matmul_batched(DType::F32, g.batch[0], g.M, g.N, g.K, A, g.a.batch[0], g.a.rs,
                            g.a.cs, B, g.b.batch[0], g.b.rs, g.b.cs, Cp, g.c.batch[0], g.c.rs,
                            alpha))
    return;
  const auto one_batch = [&](const std::array<int64_t, 4>& o) {
    float* c = Cp + o[2];
    if (bias_row && onednn_matmul(DType::F32, g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1],
                                  g.b.rs, g.b.cs, c, g.c.rs, alpha, false, S + o[3], b_tensor))
      return;  // the bias was added inside oneDNN
    if (!onednn_matmul(DType::F32, g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs,
                       g.b.cs, c, g.c.rs, alpha, false, nullptr, b_tensor) &&
        !own_kernel_with_packed_b(DType::F32, g, b_tensor, A + o[0], B + o[1], c, g.c.rs, alpha))
      kernel(g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs, g.b.cs, c, g.c.rs, alpha);
    if (use_self)
      for (int64_t i = 0; i < g.M; ++i)
        for (int64_t j = 0; j < g.N; ++j)
          c[i * g.c.rs + j] += beta * S[o[3] + i * g.self.rs + j * g.self.cs];
  };
  if (!run_small_batches_in_parallel(g, one_batch))
    for_each_offsets<4>(g.batch, {&g.a.batch, &g.b.batch, &g.c.batch, &g.self.batch}, one_batch);
}

// bfloat16: the bfloat16 kernel (isa/gemm_bf16.h) into a float32 buffer, then alpha, beta *
// self and one rounding per output.
// Few rows times a transposed bfloat16 weight (LLM decoding): per output, the weight row is
// widened to float32 in a small buffer and dotted with the widened activation row, so the
// weight streams once instead of being packed per call. As for float32, 2 to 15 rows without
// batch dims take run_few_rows_transposed first (decision 0045).
bool gemv_transposed_bf16_applies(const Gemm& g) {
  const VecMathF32& vm = vec_math_f32();
  int64_t batches = 1;
  for (int64_t d : g.batch) batches *= d;
  return vm.dot && vm.widen_bf16 && batches == 1 && g.M < kGemmBlockedMinRows && g.b.rs == 1 &&
         g.a.cs == 1 && g.K != 0;
}
bool run_gemv_transposed_bf16(const Gemm& g, float alpha, float beta, bool use_self) {
  const VecMathF32& vm = vec_math_f32();
  if (!gemv_transposed_bf16_applies(g)) return false;
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.a.data);
  const uint16_t* B = reinterpret_cast<const uint16_t*>(g.b.data);
  const BFloat16* S = reinterpret_cast<const BFloat16*>(g.self.data);
  BFloat16* C = const_cast<BFloat16*>(reinterpret_cast<const BFloat16*>(g.c.data));
  if (dot4_f32_bf16_kernel() || dot_rows_bf16_kernel()) {
    // One activation row at a time against the weight rows as they stream
    // (one_row_times_weight_bf16: vdpbf16ps one row ahead with AVX-512 BF16, else the widened
    // row against four weight rows at a time).
    std::vector<float> sums(size_t(g.N));
    for (int64_t i = 0; i < g.M; ++i) {
      one_row_times_weight_bf16(g.N, g.K, A + i * g.a.rs, B, g.b.cs, sums.data());
      for (int64_t j = 0; j < g.N; ++j) {
        float r = alpha * sums[size_t(j)];
        if (use_self) r += beta * float(S[i * g.self.rs + j * g.self.cs]);
        C[i * g.c.rs + j * g.c.cs] = BFloat16(r);
      }
    }
    return true;
  }
  std::vector<float> a(size_t(g.K));
  for (int64_t i = 0; i < g.M; ++i) {
    vm.widen_bf16(A + i * g.a.rs, a.data(), g.K);
    parallel_region(g.N * g.K >= (int64_t(1) << 16), [&] {
      std::vector<float> w(size_t(g.K));
#pragma omp for schedule(static)
      for (int64_t j = 0; j < g.N; ++j) {
        vm.widen_bf16(B + j * g.b.cs, w.data(), g.K);
        float r = alpha * vm.dot(a.data(), w.data(), g.K);
        if (use_self) r += beta * float(S[i * g.self.rs + j * g.self.cs]);
        C[i * g.c.rs + j * g.c.cs] = BFloat16(r);
      }
    });
  }
  return true;
}

// float16: a few rows times a transposed float16 weight (x @ W.t(), LLM decoding with float16
// weights), the weight rows widened in registers as they stream (F16C), four at a time, the
// activation row widened once: the weight is read once, as float16. Other float16 products are
// computed in float32 on widened copies (dispatch/float16_in_float32.cpp); this form is the
// one the CPU claims (float16_gemv_applies). [1, 4096] x [4096, 4096]^T, two threads: 3.7 ms
// through float32 copies, PyTorch 0.92.
bool float16_gemv_shape(const Gemm& g) {
  int64_t batches = 1;
  for (int64_t d : g.batch) batches *= d;
  return batches == 1 && g.M >= 1 && g.M < kGemmBlockedMinRows && g.b.rs == 1 && g.a.cs == 1 &&
         g.K > 0 && g.N > 0;
}
bool run_gemv_transposed_f16(const Gemm& g, float alpha, float beta, bool use_self) {
  const VecMathF32& vm = vec_math_f32();
  if (!vm.dot4_f16 || !vm.dot_f16 || !vm.widen_f16 || !float16_gemv_shape(g)) return false;
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.a.data);
  const uint16_t* B = reinterpret_cast<const uint16_t*>(g.b.data);
  const Half* S = reinterpret_cast<const Half*>(g.self.data);
  Half* C = const_cast<Half*>(reinterpret_cast<const Half*>(g.c.data));
  // Every row of A widened once; each group of four weight rows is dotted with all of them
  // while it is in L1, so the weight streams from memory once whatever M.
  const int64_t M = g.M, N = g.N, K = g.K;
  std::vector<float> a(size_t(M * K)), sums(size_t(M * N));
  for (int64_t i = 0; i < M; ++i) vm.widen_f16(A + i * g.a.rs, a.data() + i * K, K);
  const bool parallel = N * K >= (int64_t(1) << 16);
  const int64_t groups = N / 4;
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t q = 0; q < groups; ++q)
      for (int64_t i = 0; i < M; ++i)
        vm.dot4_f16(a.data() + i * K, B + 4 * q * g.b.cs, g.b.cs, K, sums.data() + i * N + 4 * q);
  });
  for (int64_t j = 4 * groups; j < N; ++j)
    for (int64_t i = 0; i < M; ++i)
      sums[size_t(i * N + j)] = vm.dot_f16(a.data() + i * K, B + j * g.b.cs, K);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float r = alpha * sums[size_t(i * N + j)];
      if (use_self) r += beta * float(S[i * g.self.rs + j * g.self.cs]);
      C[i * g.c.rs + j * g.c.cs] = Half(r);
    }
  }
  return true;
}

// A few rows times a B with contiguous rows of at most 2^20 elements (attention weights times
// V in a decode step), batched or not, without self: the rows kernel (gemm_bf16.h) per batch,
// batches over the threads, each product's rows rounded once. The blocked kernel packed B for
// one row and its products ran one batch at a time: [1, 12, 1, 140] x [1, 12, 140, 64] took
// 39.8 us (PyTorch 66).
bool run_rows_bf16(const Gemm& g, float alpha, bool use_self) {
  const GemmBf16RowsFn rows = gemm_bf16_rows_kernel();
  const VecMathF32& vm = vec_math_f32();
  if (!rows || !vm.narrow_bf16 || use_self || g.M < 1 || g.M >= 4 || g.N < 1 || g.K < 1 ||
      g.K * g.N > (int64_t(1) << 20) || g.b.cs != 1 || g.c.cs != 1)
    return false;
  std::vector<std::array<int64_t, 3>> offs;
  for_each_offsets<3>(g.batch, {&g.a.batch, &g.b.batch, &g.c.batch},
                      [&](const std::array<int64_t, 3>& o) { offs.push_back(o); });
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.a.data);
  const uint16_t* B = reinterpret_cast<const uint16_t*>(g.b.data);
  uint16_t* C = const_cast<uint16_t*>(reinterpret_cast<const uint16_t*>(g.c.data));
  const int64_t M = g.M, N = g.N, batches = int64_t(offs.size());
  auto one = [&](int64_t b, float* sums) {
    const std::array<int64_t, 3>& o = offs[size_t(b)];
    rows(M, N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs, sums, N);
    for (int64_t i = 0; i < M; ++i) {
      float* row = sums + i * N;
      if (alpha != 1.0f)
        for (int64_t j = 0; j < N; ++j) row[j] *= alpha;
      vm.narrow_bf16(row, C + o[2] + i * g.c.rs, N);
    }
  };
  if (batches < 2 || batches * M * N * g.K < (int64_t(1) << 17)) {
    std::vector<float> sums(size_t(M * N));
    for (int64_t b = 0; b < batches; ++b) one(b, sums.data());
    return true;
  }
#pragma omp parallel
  {
    std::vector<float> sums(size_t(M * N));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < batches; ++b) one(b, sums.data());
  }
  return true;
}

void run_gemm_bf16(const Gemm& g, const Scalar& beta_s, const Scalar& alpha_s) {
  const float alpha = alpha_s.to<float>(), beta = beta_s.to<float>();
  const bool use_self = g.has_self && beta != 0.0f;
  if (run_few_rows_transposed<BFloat16>(g, alpha, beta, use_self)) return;
  if (run_gemv_transposed_bf16(g, alpha, beta, use_self)) return;
  if (run_rows_bf16(g, alpha, use_self)) return;
  if (run_batched_gemv<BFloat16>(
          g, [&](const Gemm& gi, bool check_only) {
            return check_only ? gemv_transposed_bf16_applies(gi)
                              : run_gemv_transposed_bf16(gi, alpha, beta, use_self);
          }))
    return;
  const GemmBf16Fn kernel = gemm_bf16_kernel();
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.a.data);
  const uint16_t* B = reinterpret_cast<const uint16_t*>(g.b.data);
  const BFloat16* S = reinterpret_cast<const BFloat16*>(g.self.data);
  BFloat16* Cp = const_cast<BFloat16*>(reinterpret_cast<const BFloat16*>(g.c.data));
  const Tensor* b_tensor = g.batch.empty() ? g.b.tensor : nullptr;
  // One batch dim (attention's [B*H] products) without self: small batches whole on each
  // thread (batched_small_gemm.h), else a single batched oneDNN call.
  if (!use_self && g.c.cs == 1 && g.batch.size() == 1 &&
      batches_on_threads_bf16(g.batch[0], g.M, g.N, g.K, A, g.a.batch[0], g.a.rs, g.a.cs, B,
                              g.b.batch[0], g.b.rs, g.b.cs, reinterpret_cast<uint16_t*>(Cp),
                              g.c.batch[0], g.c.rs, alpha))
    return;
  if (!use_self && g.c.cs == 1 && g.batch.size() == 1 &&
      onednn_matmul_batched(DType::BF16, g.batch[0], g.M, g.N, g.K, A, g.a.batch[0], g.a.rs,
                            g.a.cs, B, g.b.batch[0], g.b.rs, g.b.cs, Cp, g.c.batch[0], g.c.rs,
                            alpha))
    return;
  // With AMX a plain product (no self, alpha 1, unit column stride) is rounded inside the tile
  // kernel; otherwise float32 sums (not zero-filled: the kernels overwrite them) are rounded
  // below.
  const bool round_inside = !use_self && alpha == 1.0f && g.c.cs == 1;
  const GemmBf16ToBf16Fn to_bf16 = gemm_bf16_to_bf16_kernel();
  std::unique_ptr<float[]> acc_buf;
  const VecMathF32& vm = vec_math_f32();
  for_each_offsets<4>(g.batch, {&g.a.batch, &g.b.batch, &g.c.batch, &g.self.batch},
                      [&](const std::array<int64_t, 4>& o) {
    // Without self, oneDNN writes the rounded product straight into a row-major output;
    // with self (addmm: Linear's bias), it writes float32 sums and the loop below finishes.
    if (!use_self && g.c.cs == 1 &&
        onednn_matmul(DType::BF16, g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs,
                      g.b.cs, Cp + o[2], g.c.rs, alpha, false, nullptr, b_tensor))
      return;
    // Linear's bias (beta = 1, self one contiguous row): added inside oneDNN before rounding.
    if (use_self && beta == 1.0f && alpha == 1.0f && g.self.rs == 0 && g.self.cs == 1 && g.c.cs == 1 &&
        onednn_matmul(DType::BF16, g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs,
                      g.b.cs, Cp + o[2], g.c.rs, alpha, false, S + o[3], b_tensor))
      return;
    if (round_inside) {
      uint16_t* c16 = reinterpret_cast<uint16_t*>(Cp + o[2]);
      if (own_kernel_with_packed_b(DType::BF16, g, b_tensor, A + o[0], B + o[1], nullptr,
                                   g.c.rs, 1.0f, c16))
        return;
      if (to_bf16 && to_bf16(g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs, g.b.cs,
                             c16, g.c.rs))
        return;
    }
    if (!acc_buf) acc_buf.reset(new float[size_t(g.M * g.N)]);
    float* const acc = acc_buf.get();
    if ((!use_self || !onednn_matmul(DType::BF16, g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs,
                                     B + o[1], g.b.rs, g.b.cs, acc, g.N, 1.0f, true, nullptr,
                                     b_tensor)) &&
        !own_kernel_with_packed_b(DType::BF16, g, b_tensor, A + o[0], B + o[1], acc, g.N, 1.0f))
      kernel(g.M, g.N, g.K, A + o[0], g.a.rs, g.a.cs, B + o[1], g.b.rs, g.b.cs, acc, g.N);
    BFloat16* c = Cp + o[2];
    // The plain product rounds a row at a time with the vector narrowing (a scalar loop here
    // took half the time of a 256^3 product); alpha, self and strided outputs element-wise.
    const bool plain = !use_self && alpha == 1.0f && g.c.cs == 1 && vm.narrow_bf16;
    parallel_region(g.M * g.N >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < g.M; ++i) {
        if (plain) {
          vm.narrow_bf16(acc + i * g.N, reinterpret_cast<uint16_t*>(c + i * g.c.rs), g.N);
          continue;
        }
        for (int64_t j = 0; j < g.N; ++j) {
          float r = alpha * acc[size_t(i * g.N + j)];
          if (use_self) r += beta * float(S[o[3] + i * g.self.rs + j * g.self.cs]);
          c[i * g.c.rs + j * g.c.cs] = BFloat16(r);
        }
      }
    });
  });
}

template <typename T>
void run_gemm(const Gemm& g, const Scalar& beta_s, const Scalar& alpha_s) {
  if constexpr (std::is_same_v<T, Half>) {
    const float beta = beta_s.to<float>();
    if (run_gemv_transposed_f16(g, alpha_s.to<float>(), beta, g.has_self && beta != 0.0f))
      return;
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (g.M * g.N * g.K >= 4096) {  // tiny products: the plain loops below are as fast
      run_gemm_bf16(g, beta_s, alpha_s);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (g.c.cs == 1 || g.N == 1) {
      run_gemm_f32(g, beta_s, alpha_s);
      return;
    }
  }
  using Acc = gemm_acc_t<T>;
  const Acc alpha = alpha_s.to<Acc>(), beta = beta_s.to<Acc>();
  const bool use_self = g.has_self && beta != Acc(0);
  const T* A = reinterpret_cast<const T*>(g.a.data);
  const T* B = reinterpret_cast<const T*>(g.b.data);
  const T* S = reinterpret_cast<const T*>(g.self.data);
  T* Cp = const_cast<T*>(reinterpret_cast<const T*>(g.c.data));
  auto load = [](T v) { return Acc(opmath_t<T>(v)); };
  // Rows of one matrix product are independent: large products split them over the OpenMP
  // threads (each with its own accumulator row); small ones stay on the calling thread.
  const bool parallel = g.M > 1 && g.M * g.N * g.K >= (int64_t(1) << 18);
  for_each_offsets<4>(g.batch, {&g.a.batch, &g.b.batch, &g.c.batch, &g.self.batch},
                      [&](const std::array<int64_t, 4>& o) {
    const T* a = A + o[0];
    const T* b = B + o[1];
    T* c = Cp + o[2];
    auto row = [&](int64_t i, std::vector<Acc>& acc) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < g.K; ++k) {
        const Acc av = load(a[i * g.a.rs + k * g.a.cs]);
        const T* brow = b + k * g.b.rs;
        const int64_t bcs = g.b.cs;
        if (bcs == 1) {
          for (int64_t j = 0; j < g.N; ++j)
            acc[size_t(j)] = wrap_add(acc[size_t(j)], wrap_mul(av, load(brow[j])));
        } else {
          for (int64_t j = 0; j < g.N; ++j)
            acc[size_t(j)] = wrap_add(acc[size_t(j)], wrap_mul(av, load(brow[j * bcs])));
        }
      }
      for (int64_t j = 0; j < g.N; ++j) {
        Acc r = wrap_mul(alpha, acc[size_t(j)]);
        if (use_self)
          r = wrap_add(r, wrap_mul(beta, load(S[o[3] + i * g.self.rs + j * g.self.cs])));
        c[i * g.c.rs + j * g.c.cs] = convert_value<T>(r);
      }
    };
    if (parallel) {
#pragma omp parallel
      {
        std::vector<Acc> acc(size_t(g.N));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < g.M; ++i) row(i, acc);
      }
    } else {
      std::vector<Acc> acc(size_t(g.N));
      for (int64_t i = 0; i < g.M; ++i) row(i, acc);
    }
  });
}

// A batch dim over which B is broadcast, and along which A, C (and self) continue row after
// row, is folded into M: x[3, 12, 384] @ W[384, 384] is one [36, 384] product, so B is
// packed once and the kernel gets a taller block (as PyTorch folds it in matmul).
Gemm fold_batch_into_rows(Gemm g) {
  // Batch dims of size 1 ([1, H] of a batch-1 attention) hold nothing to walk: dropped, so
  // the rest can fold or merge (their broadcast strides of 0 would block the merge below).
  for (size_t i = g.batch.size(); i-- > 0;) {
    if (g.batch[i] != 1) continue;
    for (MatOperand* op : {&g.a, &g.b, &g.c, &g.self})
      if (!op->batch.empty()) op->batch.erase(op->batch.begin() + int64_t(i));
    g.batch.erase(g.batch.begin() + int64_t(i));
  }
  while (!g.batch.empty() && g.b.batch.back() == 0) {
    const int64_t M = g.M;
    auto continues = [M](const MatOperand& op) { return M == 1 || op.batch.back() == M * op.rs; };
    if (!continues(g.a) || !continues(g.c) || (g.has_self && !continues(g.self))) break;
    if (M == 1) {
      g.a.rs = g.a.batch.back();
      g.c.rs = g.c.batch.back();
      if (g.has_self) g.self.rs = g.self.batch.back();
    }
    g.M = M * g.batch.back();
    for (MatOperand* op : {&g.a, &g.b, &g.c, &g.self})
      if (!op->batch.empty()) op->batch.pop_back();
    g.batch.pop_back();
  }
  // Adjacent batch dims that every operand walks as one ([B, H] of attention) merge into one,
  // so a batched kernel sees a single batch stride per operand.
  for (size_t i = g.batch.size(); i-- > 1;) {
    bool mergeable = true;
    for (const MatOperand* op : {&g.a, &g.b, &g.c, &g.self})
      if (!op->batch.empty() && op->batch[i - 1] != op->batch[i] * g.batch[i]) mergeable = false;
    if (!mergeable) continue;
    for (MatOperand* op : {&g.a, &g.b, &g.c, &g.self})
      if (!op->batch.empty()) {
        op->batch[i - 1] = op->batch[i];
        op->batch.erase(op->batch.begin() + int64_t(i));
      }
    g.batch[i - 1] *= g.batch[i];
    g.batch.erase(g.batch.begin() + int64_t(i));
  }
  return g;
}

void dispatch_gemm(const OpCall& call, const Gemm& g0, const Scalar& beta, const Scalar& alpha) {
  const Gemm g = fold_batch_into_rows(g0);
  KILN_DISPATCH_ALL(call.outs[0].dtype(), call.op->name.c_str(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) run_gemm<T>(g, beta, alpha);
  });
}

// A bfloat16 left operand whose rows are not contiguous (the transpose of a row-major matrix:
// g.t() @ x, a weight's gradient) as a row-major copy, made with the tiled transposing copy:
// the product kernels (AMX tile strips, oneDNN) gathered its columns element by element.
// [768, 1024]^T x [1024, 3072]: 4.05 ms against 1.51 + 0.05 for the copy; [50257, 1024]^T x
// [1024, 768] (GPT-2's LM head gradient) 69.1 against 23.7 + 7.6 (two threads, decision 0125).
// float32 products gained little or lost (-9% to +7%), so they keep the strided operand.
Tensor row_major_bf16_operand(const Tensor& a, int64_t n) {
  if (a.dtype() != DType::BF16 || a.dim() < 2 || a.strides().back() == 1 || a.size(-1) == 1 ||
      a.numel() * n < (int64_t(1) << 18))
    return a;
  Tensor copy = empty_tensor(a.shape(), a.dtype(), a.device());
  if (!copy_permuted(a, copy)) copy_same_shape(copy, a);
  return copy;
}

// matmul / mm / bmm / dot: out = a @ b with PyTorch's matmul shapes: a 1-D a is one row
// and a 1-D b one column (their dims absent from out); other batch dims broadcast.
void matmul_kernel(OpCall& call) {
  const Tensor a = row_major_bf16_operand(call.inputs[0],
                                          call.inputs[1].dim() == 1 ? 1 : call.inputs[1].size(-1));
  const Tensor& b = call.inputs[1];
  const Tensor& out = call.outs[0];
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  Gemm g;
  g.M = a_vec ? 1 : a.shape()[size_t(a.dim() - 2)];
  g.K = a.shape().back();
  g.N = b_vec ? 1 : b.shape().back();
  size_t nbatch = size_t(out.dim()) - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  g.batch.assign(out.shape().begin(), out.shape().begin() + int64_t(nbatch));
  if (a_vec) {
    g.a.data = static_cast<const char*>(a.raw_data());
    g.a.batch.assign(nbatch, 0);
    g.a.cs = a.strides()[0];
  } else {
    g.a = matrix(a, g.batch);
  }
  if (b_vec) {
    g.b.data = static_cast<const char*>(b.raw_data());
    g.b.batch.assign(nbatch, 0);
    g.b.rs = b.strides()[0];
  } else {
    g.b = matrix(b, g.batch);
  }
  g.c.data = static_cast<const char*>(out.raw_data());
  g.c.batch.assign(out.strides().begin(), out.strides().begin() + int64_t(nbatch));
  g.c.rs = a_vec ? 0 : out.strides()[nbatch];
  g.c.cs = b_vec ? 0 : out.strides().back();
  g.self.batch.assign(nbatch, 0);
  dispatch_gemm(call, g, Scalar(0), Scalar(1));
}

// addmm / baddbmm: inputs {self, a, b}, attrs {beta, alpha}; out = beta*self + alpha*(a@b)
// with self broadcast to out (beta == 0: self is not read, so its NaNs do not propagate).
void addmm_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor a = row_major_bf16_operand(call.inputs[1], call.inputs[2].size(-1));
  const Tensor& b = call.inputs[2];
  const Tensor& out = call.outs[0];
  Gemm g;
  g.batch.assign(out.shape().begin(), out.shape().end() - 2);
  g.M = out.shape()[size_t(out.dim() - 2)];
  g.N = out.shape().back();
  g.K = a.shape().back();
  g.a = matrix(a, g.batch);
  g.b = matrix(b, g.batch);
  g.c.data = static_cast<const char*>(out.raw_data());
  g.c.batch.assign(out.strides().begin(), out.strides().end() - 2);
  g.c.rs = out.strides()[size_t(out.dim() - 2)];
  g.c.cs = out.strides().back();
  g.has_self = true;
  g.self.data = static_cast<const char*>(self.raw_data());
  Strides st = broadcast_strides(self, out.shape());
  g.self.batch.assign(st.begin(), st.end() - 2);
  g.self.rs = st[st.size() - 2];
  g.self.cs = st.back();
  dispatch_gemm(call, g, call.scalar_attr(0), call.scalar_attr(1));
}

}  // namespace

// int_mm: contiguous int8/uint8 [M, K] x int8 [K, N] -> int32 (isa/gemm_s8.h); B either
// contiguous or the transpose of a contiguous [N, K] (W.t() of a Linear weight).
void int_mm_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  const Tensor& c = call.outs[0];
  if (onednn_int_mm(a, b, c)) return;  // tall products (decision 0022)
  const bool b_transposed = !b.is_contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  // A Linear weight (B = W.t()) on the AMX tiles: packed once per weight (decision 0043), from
  // kAmxFewRowsMinS8 rows (isa/gemm_bf16.h). A row-major B is packed once from its second use
  // unchanged with kPackReusedMinRows+ rows, as mm's (decision 0031): packing it on every call
  // was 9% of a 1024^3 product (decision 0119).
  const GemmS8PackedKernel packed_kernel = gemm_s8_packed_kernel();
  const std::string key =
      !packed_kernel ? std::string()
      : b_transposed ? "int_mm|" + std::to_string(N) + "x" + std::to_string(K)
                     : "int_mm rows|" + std::to_string(K) + "x" + std::to_string(N);
  const bool reused_rows = packed_kernel && !b_transposed && M >= kPackReusedMinRows &&
                           operand_seen_unchanged(b, key);
  if (packed_kernel && ((b_transposed && M >= kAmxFewRowsMinS8) || reused_rows)) {
    const auto packed = own_packed_weight(b, key, [&] {
      const int8_t* data = static_cast<const int8_t*>(b.raw_data());
      return b_transposed ? packed_kernel.pack(K, N, data) : packed_kernel.pack_rows(K, N, data);
    });
    packed_kernel.run(M, static_cast<const uint8_t*>(a.raw_data()), a.dtype() == DType::I8,
                      *packed, static_cast<int32_t*>(c.raw_data()));
    return;
  }
  gemm_s8_kernel()(a.size(0), b.size(1), a.size(1), static_cast<const uint8_t*>(a.raw_data()),
                   a.dtype() == DType::I8, static_cast<const int8_t*>(b.raw_data()), b_transposed,
                   static_cast<int32_t*>(c.raw_data()));
}

// The float16 calls of mm / matmul / addmm (a Linear layer with a bias) that
// run_gemv_transposed_f16 takes: the dispatcher leaves them float16
// (dispatch/float16_in_float32.h) instead of widening the weight on every call.
bool float16_gemv_applies(const OpCall& call) {
  const std::string& op = call.op->name;
  const bool addmm = op == "addmm";  // inputs {self, a, b}
  const size_t first = addmm ? 1 : 0;
  if ((op != "mm" && op != "matmul" && !addmm) || call.inputs.size() < first + 2) return false;
  if (addmm && (!call.inputs[0].defined() || call.inputs[0].dtype() != DType::F16 ||
                call.inputs[first].dim() != 2))
    return false;
  const Tensor& a = call.inputs[first];
  const Tensor& b = call.inputs[first + 1];
  const VecMathF32& vm = vec_math_f32();
  if (!vm.dot4_f16 || !a.defined() || !b.defined() || a.dtype() != DType::F16 ||
      b.dtype() != DType::F16 || (a.dim() != 1 && a.dim() != 2) || b.dim() != 2)
    return false;
  const int64_t M = a.dim() == 2 ? a.size(0) : 1;
  return M >= 1 && M < kGemmBlockedMinRows && a.stride(a.dim() - 1) == 1 && b.stride(0) == 1 &&
         b.size(0) > 0 && b.size(1) > 0;
}

void register_linalg_kernels() {
  register_kernel("int_mm", DeviceType::CPU, int_mm_kernel,
                  dtype_bit(DType::I8) | dtype_bit(DType::U8));
  for (const char* name : {"matmul", "mm", "bmm", "dot"})
    register_kernel(name, DeviceType::CPU, matmul_kernel, kNumericDTypes);
  for (const char* name : {"addmm", "baddbmm"})
    register_kernel(name, DeviceType::CPU, addmm_kernel, kNumericDTypes);
}

}  // namespace kiln::cpu
