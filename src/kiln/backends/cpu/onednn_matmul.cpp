// oneDNN matmul for kiln's float32 / bfloat16 products (see onednn_matmul.h).
// Rule (decision 0017, onednn_takes_product in onednn_runtime.h): products with at least 16
// rows and 2^18 multiply-adds go to oneDNN (its brgemm kernels ran 1.4-1.6x kiln's float32 and
// 1.7-2.5x kiln's bfloat16 blocked kernel at M = 128..1024 on the development machine); fewer
// rows stay on kiln's streaming
// matrix-vector kernels, which read the weight once without packing and match or beat
// oneDNN there. At the AVX-512 levels large float32 products with a row-major A (or a
// row-major B of 2560+ columns) stay on kiln's blocked kernel (decision 0118,
// own_kernel_takes_f32_product). Plans are cached by shape, strides, dtype and alpha.
#include "onednn_matmul.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/tensor/tensor.h"
#include "kiln/tensor/tensor_impl.h"
#include "onednn_packed_weights.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"


namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

bool onednn_matmul(DType, int64_t, int64_t, int64_t, const void*, int64_t, int64_t, const void*,
                   int64_t, int64_t, void*, int64_t, float, bool, const void*, const Tensor*) {
  return false;
}
bool onednn_matmul_batched(DType, int64_t, int64_t, int64_t, int64_t, const void*, int64_t, int64_t,
                           int64_t, const void*, int64_t, int64_t, int64_t, void*, int64_t, int64_t,
                           float) {
  return false;
}

#else

namespace {

using dnnl::memory;

struct MatmulPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory::desc a, b, c, bias;  // b: B as the caller holds it (packed_b: pd's weights differ)
  memory::desc weights, scratchpad;  // pd's, queried once
};

OnednnPlanCache<MatmulPlan> g_plans;

// batch > 1: 3-D descriptors [batch, rows, cols] with the batch strides (B shared: its
// batch dim is 1, which oneDNN broadcasts).
std::shared_ptr<MatmulPlan> plan_for(memory::data_type dt, memory::data_type out_dt, int64_t M,
                                     int64_t N, int64_t K, int64_t a_rs, int64_t a_cs,
                                     int64_t b_rs, int64_t b_cs, int64_t c_rs, float alpha,
                                     bool with_bias, bool packed_b, int64_t batch = 1,
                                     int64_t a_bs = 0, int64_t b_bs = 0, int64_t c_bs = 0) {
  // alpha by its bits (std::to_string of a float goes through printf).
  uint32_t alpha_bits;
  std::memcpy(&alpha_bits, &alpha, sizeof alpha_bits);
  const std::string key =
      onednn_key({int64_t(dt), int64_t(out_dt), with_bias, packed_b, M, N, K, a_rs, a_cs, b_rs,
                  b_cs, c_rs, batch, a_bs, b_bs, c_bs, int64_t(alpha_bits)});
  return g_plans.get(key, [&] {
    auto plan = std::make_shared<MatmulPlan>();
    if (batch > 1) {
      plan->a = memory::desc({batch, M, K}, dt, {a_bs, a_rs, a_cs});
      plan->b = b_bs == 0 ? memory::desc({1, K, N}, dt, {K * N, b_rs, b_cs})
                          : memory::desc({batch, K, N}, dt, {b_bs, b_rs, b_cs});
      plan->c = memory::desc({batch, M, N}, out_dt, {c_bs, c_rs, 1});
    } else {
      plan->a = memory::desc({M, K}, dt, {a_rs, a_cs});
      plan->b = memory::desc({K, N}, dt, {b_rs, b_cs});
      plan->c = memory::desc({M, N}, out_dt, {c_rs, 1});
    }
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (with_bias) plan->bias = memory::desc({1, N}, dt, {N, 1});
    const memory::desc b = packed_b ? memory::desc({K, N}, dt, memory::format_tag::any) : plan->b;
    dnnl::matmul::desc desc = with_bias ? dnnl::matmul::desc(plan->a, b, plan->bias, plan->c)
                                        : dnnl::matmul::desc(plan->a, b, plan->c);
    plan->pd = dnnl::matmul::primitive_desc(desc, attr, onednn_engine());
    plan->prim = dnnl::matmul(plan->pd);
    plan->weights = plan->pd.weights_desc();
    plan->scratchpad = plan->pd.scratchpad_desc();
    return plan;
  });
}

// Products of fewer rows than this get a row-sliced A copied to contiguous rows.
// [M, 1024] (a slice of [M, 1040]) x [1024, 1024]^T float32, two threads, AMX Xeon, GFLOP/s
// with A contiguous / sliced before / sliced now: M = 16 125 / 66 / 117, M = 32 166 / 101 /
// 162, M = 64 261 / 200 / 246, M = 127 276 / 251 / 260; M = 256 277 / 282 (not copied).
// A transposed A is left to oneDNN, which reads it as fast as a contiguous one
// (copied element by element it lost 10-15%).
constexpr int64_t kStridedACopyMaxRows = 128;

// The rows of A[M, K] (row stride a_rs elements, contiguous within a row; elem_size bytes
// each) copied into the calling thread's Source buffer (onednn_thread_buffer), valid until
// its next request for that slot.
const void* contiguous_rows(const void* A, int64_t M, int64_t K, int64_t a_rs,
                            size_t elem_size) {
  const size_t row_bytes = size_t(K) * elem_size;
  auto* dst = static_cast<unsigned char*>(
      onednn_thread_buffer(size_t(M) * row_bytes, OnednnBuffer::Source));
  const auto* src = static_cast<const unsigned char*>(A);
  for (int64_t i = 0; i < M; ++i)
    std::memcpy(dst + size_t(i) * row_bytes, src + size_t(i * a_rs) * elem_size, row_bytes);
  return dst;
}

}  // namespace

bool onednn_matmul(DType dtype, int64_t M, int64_t N, int64_t K, const void* A, int64_t a_rs,
                   int64_t a_cs, const void* B, int64_t b_rs, int64_t b_cs, void* C, int64_t c_rs,
                   float alpha, bool out_f32, const void* bias, const Tensor* b_tensor) {
  if (!onednn_takes_product(M, M * N * K, K)) return false;
  if (dtype != DType::F32 && !(dtype == DType::BF16 && isa_level() >= IsaLevel::Avx512Vnni &&
                               !own_tile_kernels_take_products()))
    return false;
  if (dtype == DType::F32 && own_kernel_takes_f32_product(M * N * K, N, a_cs, b_cs)) return false;
  // A broadcast operand (stride 0) has no oneDNN layout.
  if (a_rs == 0 || a_cs == 0 || b_rs == 0 || b_cs == 0) return false;
  const auto dt = dtype == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
  // A row slice of wider rows, of few rows, is copied to contiguous rows first, as
  // onednn_linear's x (decision 0144): oneDNN 2.6 builds a slower implementation for it.
  if (M < kStridedACopyMaxRows && a_cs == 1 && a_rs != K) {
    A = contiguous_rows(A, M, K, a_rs, dtype == DType::BF16 ? 2 : 4);
    a_rs = K;
  }
  try {
    const auto out_dt = out_f32 ? memory::data_type::f32 : dt;
    // A B reused unchanged is packed once (decision 0031): oneDNN's brgemm given a plain B
    // packs its blocks inside every call, 3-5% of a float32 product at 256^3-2048^3 (bfloat16
    // up to 8%). One-off operands (activations) are left alone: B is packed from its second
    // use with the same storage, offset, layout and version (operand_seen_unchanged), and only
    // for products of kOnednnPackMinRows+ rows.
    const bool reusable = b_tensor && M >= kOnednnPackMinRows && b_tensor->raw_data() == B;
    const std::string layout =
        reusable ? onednn_key({int64_t(dt), K, N, b_rs, b_cs}) : std::string();
    const bool packed_b = reusable && operand_seen_unchanged(*b_tensor, layout);
    std::shared_ptr<MatmulPlan> plan = plan_for(dt, out_dt, M, N, K, a_rs, a_cs, b_rs, b_cs, c_rs,
                                                alpha, bias != nullptr, packed_b);
    dnnl::stream& s = onednn_stream();
    const memory& a = onednn_bound_memory(plan, OnednnArg::Source, plan->a, A);
    PackedWeightMemory packed;
    if (packed_b)
      packed = onednn_packed_weight(*b_tensor, "mm|" + layout, plan->b, plan->weights, s);
    const memory b = packed_b ? packed.memory
                              : onednn_bound_memory(plan, OnednnArg::Weights, plan->b, B);
    const memory& c = onednn_bound_memory(plan, OnednnArg::Destination, plan->c, C);
    const memory& scratch = onednn_bound_scratchpad(plan, plan->scratchpad);
    if (bias) {
      const memory& bias_mem = onednn_bound_memory(plan, OnednnArg::Bias, plan->bias, bias);
      onednn_execute(plan->prim, s,
                     {{DNNL_ARG_SRC, a.get()}, {DNNL_ARG_WEIGHTS, b.get()}, {DNNL_ARG_DST, c.get()},
                      {DNNL_ARG_SCRATCHPAD, scratch.get()}, {DNNL_ARG_BIAS, bias_mem.get()}});
    } else {
      onednn_execute(plan->prim, s,
                     {{DNNL_ARG_SRC, a.get()}, {DNNL_ARG_WEIGHTS, b.get()}, {DNNL_ARG_DST, c.get()},
                      {DNNL_ARG_SCRATCHPAD, scratch.get()}});
    }
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation for this layout: kiln's kernel runs
  }
  return true;
}

bool onednn_matmul_batched(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                           const void* A, int64_t a_bs, int64_t a_rs, int64_t a_cs, const void* B,
                           int64_t b_bs, int64_t b_rs, int64_t b_cs, void* C, int64_t c_bs,
                           int64_t c_rs, float alpha) {
  if (batch < 2 || !onednn_takes_product(M, batch * M * N * K, K)) return false;
  if (dtype != DType::F32 && !(dtype == DType::BF16 && isa_level() >= IsaLevel::Avx512Vnni &&
                               !own_tile_kernels_take_products()))
    return false;
  if (a_rs == 0 || a_cs == 0 || b_rs == 0 || b_cs == 0 || a_bs == 0 || c_bs == 0) return false;
  const auto dt = dtype == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
  try {
    std::shared_ptr<MatmulPlan> plan = plan_for(dt, dt, M, N, K, a_rs, a_cs, b_rs, b_cs, c_rs,
                                                alpha, false, false, batch, a_bs, b_bs, c_bs);
    dnnl::stream& s = onednn_stream();
    const memory& a = onednn_bound_memory(plan, OnednnArg::Source, plan->a, A);
    const memory& b = onednn_bound_memory(plan, OnednnArg::Weights, plan->b, B);
    const memory& c = onednn_bound_memory(plan, OnednnArg::Destination, plan->c, C);
    const memory& scratch = onednn_bound_scratchpad(plan, plan->scratchpad);
    onednn_execute(plan->prim, s, {{DNNL_ARG_SRC, a.get()}, {DNNL_ARG_WEIGHTS, b.get()},
                                   {DNNL_ARG_DST, c.get()}, {DNNL_ARG_SCRATCHPAD, scratch.get()}});
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
