// fused_linear on the CPU: out = act(x @ weight.T + bias) + residual, one rounding.
// Tall bfloat16 products (without AMX) and float32 ones of 4-31 rows (all rows at the
// baseline level, none at AVX2) go to oneDNN as one matmul with a packed weight and post-ops
// (onednn_linear.cpp). Otherwise kiln's kernels write float32 sums (the streaming
// dot-product kernels for few rows, few_rows_product.h; the blocked GEMM for the rest, with
// the weight packed once where the level has a packed kernel) and one pass per row adds
// the bias, applies the activation (vec_math at AVX2 and up), adds the residual and rounds.
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/linalg.h"
#include "isa/gemm_bf16.h"
#include "isa/gemm_f32.h"
#include "isa/gemm_packed_b.h"
#include "few_rows_product.h"
#include "kiln/backends/cpu/host_memory.h"
#include "isa/vec_math.h"
#include "onednn_linear.h"
#include "own_packed_weights.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

// Adds a row of n values of dtype (float32 or bfloat16) to r.
void add_row(float* r, const void* row, DType dtype, int64_t n) {
  if (dtype == DType::F32) {
    const float* p = static_cast<const float*>(row);
    for (int64_t j = 0; j < n; ++j) r[j] += p[j];
  } else {
    const BFloat16* p = static_cast<const BFloat16*>(row);
    for (int64_t j = 0; j < n; ++j) r[j] += float(p[j]);
  }
}

// The weight packed once per weight tensor for kernel k (own_packed_weights.h, decision 0043).
// A float32 weight with bfloat16 x (autocast's form, decision 0121) is rounded to bfloat16 as
// it is packed: the packed copy is the rounded weight's.
std::shared_ptr<const GemmPackedB> packed_weight(const GemmPackedKernel& k, const Tensor& x,
                                                 const Tensor& w) {
  const int64_t K = x.size(1), N = w.size(0), w_rs = w.stride(0);
  const std::string key = "linear|" + std::string(dtype_name(x.dtype())) + "<" +
                          std::string(dtype_name(w.dtype())) + "|" + std::to_string(N) + "x" +
                          std::to_string(K) + "|" + std::to_string(w_rs);
  return own_packed_weight(w, key, [&] {
    if (w.dtype() == x.dtype()) return k.pack(K, N, w.raw_data(), 1, w_rs);
    const Tensor rounded = w.to(x.dtype());  // contiguous [N, K]
    return k.pack(K, N, rounded.raw_data(), 1, rounded.stride(0));
  });
}

// The blocked product with the packed weight, plus bias (float32 [N], or null) added by the
// kernel as it stores the sums (decision 0119), where the level has a packed kernel for x's
// dtype and the weight is worth packing whole (`reused`: linear_weight_reused); false
// otherwise.
bool packed_weight_sums(const Tensor& x, const Tensor& w, const float* bias, bool reused,
                        float* sums) {
  const GemmPackedKernel k =
      x.dtype() == DType::F32 ? gemm_f32_packed_kernel() : gemm_bf16_packed_kernel();
  if (!k || !reused) return false;
  k.run(x.size(0), x.raw_data(), x.stride(0), x.stride(1), *packed_weight(k, x, w), sums,
        w.size(0), 1.0f, bias);
  return true;
}

// A bfloat16 Linear without activation or residual, on the AMX tiles from kAmxFewRowsMin rows
// (the rows float_sums sends to the packed kernel): the kernel adds the bias and rounds each
// block of sums itself, so no float32 buffer is written and read back (decision 0119). False
// where that does not apply.
bool linear_rounded_in_kernel(const Tensor& x, const Tensor& w, const Tensor& bias,
                              bool reused, const Tensor& out) {
  const GemmPackedKernel k = gemm_bf16_packed_kernel();
  if (x.dtype() != DType::BF16 || out.dtype() != DType::BF16 || !k.run_to_bf16 ||
      x.size(0) < kAmxFewRowsMin || out.stride(1) != 1)
    return false;
  const int64_t N = w.size(0);
  if (!reused) {  // not worth packing whole: the plain tile kernel (decision 0120)
    const GemmBf16ToBf16Fn plain = gemm_bf16_to_bf16_kernel();
    return !bias.defined() && plain && x.size(0) >= kAmxMinRows &&
           plain(x.size(0), N, x.size(1), static_cast<const uint16_t*>(x.raw_data()),
                 x.stride(0), x.stride(1), static_cast<const uint16_t*>(w.raw_data()), 1,
                 w.stride(0), static_cast<uint16_t*>(out.raw_data()), out.stride(0));
  }
  std::vector<float> bias_f32;
  if (bias.defined()) {
    bias_f32.resize(size_t(N));
    add_row(bias_f32.data(), bias.raw_data(), bias.dtype(), N);  // onto zeros: a conversion
  }
  k.run_to_bf16(x.size(0), x.raw_data(), x.stride(0), x.stride(1), *packed_weight(k, x, w),
                static_cast<uint16_t*>(out.raw_data()), out.stride(0),
                bias.defined() ? bias_f32.data() : nullptr);
  return true;
}

// sums[i * N + j] = sum_k x[i, k] * w[j, k] in float32 (x any strides, w unit column stride).
// Returns whether the bias (float32 [N], or null) was added too: the packed kernels add it.
// `reused`: whether the weight is worth packing whole (linear_weight_reused).
bool float_sums(const Tensor& x, const Tensor& w, const float* bias, bool reused,
                float* sums) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  const int64_t a_rs = x.stride(0), a_cs = x.stride(1), w_rs = w.stride(0);
  if (K == 0) {
    std::fill(sums, sums + M * N, 0.0f);
    return false;
  }
  bool few_rows =
      M < (x.dtype() == DType::BF16 ? few_rows_max_bf16() : kFewRowsMax) && a_cs == 1;
  // With AMX, bfloat16 products of kAmxFewRowsMin rows or more take the tiles with the weight
  // packed once (isa/gemm_bf16.h); a weight not packed whole keeps the streaming kernels up to
  // their row limit.
  if (x.dtype() == DType::BF16 && M >= kAmxFewRowsMin && gemm_bf16_packed_kernel() && reused)
    few_rows = false;
  const bool parallel = N * K >= (int64_t(1) << 16);
  if (x.dtype() == DType::F32) {
    const float* A = static_cast<const float*>(x.raw_data());
    const float* W = static_cast<const float*>(w.raw_data());
    const VecDotF32 dot = vec_math_f32().dot;
    if (few_rows && few_rows_times_weight_f32(M, N, K, A, a_rs, W, w_rs, sums, N)) return false;
    if (M == 1 && a_cs == 1 && dot) {  // each output one dot product of two contiguous rows
      parallel_region(parallel, [&] {
#pragma omp for schedule(static)
        for (int64_t j = 0; j < N; ++j) sums[j] = dot(A, W + j * w_rs, K);
      });
      return false;
    }
    if (packed_weight_sums(x, w, bias, reused, sums)) return bias != nullptr;
    gemm_f32_kernel()(M, N, K, A, a_rs, a_cs, W, 1, w_rs, sums, N, 1.0f);
    return false;
  }
  const uint16_t* A = static_cast<const uint16_t*>(x.raw_data());
  const uint16_t* W = static_cast<const uint16_t*>(w.raw_data());
  if (few_rows && few_rows_times_weight_bf16(M, N, K, A, a_rs, W, w_rs, sums, N)) return false;
  if (M == 1 && a_cs == 1 && one_row_times_weight_bf16(N, K, A, W, w_rs, sums)) return false;
  if (packed_weight_sums(x, w, bias, reused, sums)) return bias != nullptr;
  gemm_bf16_kernel()(M, N, K, A, a_rs, a_cs, W, 1, w_rs, sums, N);
  return false;
}

float activation_scalar(LinearActivation act, float v) {
  switch (act) {
    case LinearActivation::None: return v;
    case LinearActivation::Relu: return v > 0.0f || std::isnan(v) ? v : 0.0f;
    case LinearActivation::Gelu: return 0.5f * v * (1.0f + std::erf(v * float(M_SQRT1_2)));
    case LinearActivation::GeluTanh: {
      const float inner = float(M_2_SQRTPI * M_SQRT1_2) * (v + 0.044715f * v * v * v);
      return 0.5f * v * (1.0f + std::tanh(inner));
    }
    case LinearActivation::Silu: return v / (1.0f + std::exp(-v));
  }
  return v;
}

VecUnaryF32 activation_vector(LinearActivation act) {
  const VecMathF32& vm = vec_math_f32();
  switch (act) {
    case LinearActivation::None: return nullptr;
    case LinearActivation::Relu: return vm.relu;
    case LinearActivation::Gelu: return vm.gelu_erf;
    case LinearActivation::GeluTanh: return vm.gelu_tanh;
    case LinearActivation::Silu: return vm.silu;
  }
  return nullptr;
}

// out = act(x @ w.T + bias) + residual. `reused`: whether the weight gets (or has) a whole
// packed copy. A float32 w with bfloat16 x comes here only with `reused` and the AMX tiles
// (fused_linear_kernel), where the packed copy is the only way the weight is read.
void fused_linear_rows(const Tensor& x, const Tensor& w, const Tensor& bias,
                       const Tensor& residual, LinearActivation act, bool reused,
                       const Tensor& out) {
  if (x.device().is_cpu() && w.dtype() == x.dtype() &&
      onednn_linear(x, w, bias, act, residual, reused, out))
    return;
  if (act == LinearActivation::None && !residual.defined() &&
      linear_rounded_in_kernel(x, w, bias, reused, out))
    return;
  const int64_t M = x.size(0), N = w.size(0);
  const bool out_f32 = out.dtype() == DType::F32;
  // A bfloat16 result is summed in float32 first. The buffer is host memory as a tensor's, not
  // a zero-filled vector: the product overwrites it, and a [50176, 256] buffer (a 1x1
  // convolution's) filled on one thread and faulted in 4 KiB pages cost more than the product.
  std::unique_ptr<float, void (*)(void*)> buffer(nullptr, host_free);
  if (!out_f32) {
    buffer.reset(static_cast<float*>(host_allocate(size_t(M * N) * sizeof(float))));
    if (!buffer) throw std::bad_alloc();
  }
  float* sums = out_f32 ? static_cast<float*>(out.raw_data()) : buffer.get();
  // A float32 bias goes to the packed kernels, which add it while the sums are in registers.
  const bool f32_bias = bias.defined() && bias.dtype() == DType::F32 && bias.stride(0) == 1;
  const bool bias_added =
      float_sums(x, w, f32_bias ? static_cast<const float*>(bias.raw_data()) : nullptr,
                 reused, sums);
  const VecUnaryF32 vec_act = activation_vector(act);
  const VecNarrowBf16 narrow = vec_math_f32().narrow_bf16;
  const int64_t res_rs = residual.defined() ? residual.stride(0) : 0;
  const size_t res_elem = residual.defined() ? element_size(residual.dtype()) : 0;
  parallel_region(M * N >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      float* r = sums + i * N;
      if (bias.defined() && !bias_added) add_row(r, bias.raw_data(), bias.dtype(), N);
      if (vec_act) {
        vec_act(r, r, N);
      } else if (act != LinearActivation::None) {
        for (int64_t j = 0; j < N; ++j) r[j] = activation_scalar(act, r[j]);
      }
      if (residual.defined())
        add_row(r, static_cast<const char*>(residual.raw_data()) + size_t(i * res_rs) * res_elem,
                residual.dtype(), N);
      if (!out_f32) {
        uint16_t* o = static_cast<uint16_t*>(out.raw_data()) + i * N;
        if (narrow) {
          narrow(r, o, N);
        } else {
          for (int64_t j = 0; j < N; ++j) {
            const BFloat16 b(r[j]);
            std::memcpy(o + j, &b, sizeof b);
          }
        }
      }
    }
  });
}

// inputs {x [M, K], weight [N, K], bias? [N], residual? [M, N]}, attrs {activation};
// outs {out [M, N]} float32 or bfloat16. The weight has x's dtype, or is float32 with a
// bfloat16 x (autocast's form, decision 0121): the product is then the one with the weight
// rounded to bfloat16, which the AMX tiles keep packed from the float32 weight's second use,
// so that autocast does not round and pack every weight again on every forward.
void fused_linear_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& out = call.outs[0];
  const auto act = LinearActivation(call.int_attr(0));
  if (out.numel() == 0) return;
  // Whether the weight gets (or has) a whole packed copy: kiln memory from its second use
  // unchanged (decision 0120); never below the rows that pack.
  if (w.dtype() != x.dtype()) {
    KILN_CHECK(x.dtype() == DType::BF16 && w.dtype() == DType::F32, Error,
               "fused_linear: expected a weight of the input's dtype, or a float32 weight with "
               "a bfloat16 input; got ", dtype_name(w.dtype()), " with ", dtype_name(x.dtype()));
    // From its second use the weight's rounding is kept: packed for the tiles, else plain
    // (own_packed_weights.h); a first use rounds it for this call.
    const bool reused = linear_weight_reused(w);
    if (reused && x.size(0) >= kAmxFewRowsMin && gemm_bf16_packed_kernel())
      fused_linear_rows(x, w, call.inputs[2], call.inputs[3], act, true, out);
    else if (reused)
      fused_linear_rows(x, own_rounded_weight(w, DType::BF16), call.inputs[2], call.inputs[3],
                        act, x.size(0) >= kLinearPackMinRows, out);
    else
      fused_linear_rows(x, w.to(DType::BF16), call.inputs[2], call.inputs[3], act, false, out);
    return;
  }
  const bool reused = x.size(0) >= kLinearPackMinRows && linear_weight_reused(w);
  fused_linear_rows(x, w, call.inputs[2], call.inputs[3], act, reused, out);
}

}  // namespace

void register_fused_linear_kernel() {
  register_kernel("fused_linear", DeviceType::CPU, fused_linear_kernel,
                  dtype_bit(DType::F32) | dtype_bit(DType::BF16));
}

}  // namespace kiln::cpu
