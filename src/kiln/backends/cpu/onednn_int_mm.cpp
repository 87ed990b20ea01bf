// int_mm's oneDNN path (see onednn_int_mm.h). Plans are cached by signedness, shape and B's
// layout; a transposed B (a weight) is packed once per weight tensor, a contiguous B from its
// second use unchanged (decision 0031).
#include "onednn_int_mm.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kiln/backends/cpu/cpu_info.h"
#include "onednn_packed_weights.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"

namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

bool onednn_int_mm(const Tensor&, const Tensor&, const Tensor&) { return false; }

#else

namespace {

using dnnl::memory;

struct IntMmPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory::desc a, b_plain, c;
  memory::desc weights, scratchpad;  // pd's, queried once
};

OnednnPlanCache<IntMmPlan> g_plans;

std::shared_ptr<IntMmPlan> plan_for(bool a_signed, int64_t M, int64_t N, int64_t K,
                                    bool b_transposed, bool packed_b) {
  const std::string key = onednn_key({a_signed, b_transposed, packed_b, M, N, K});
  return g_plans.get(key, [&] {
    auto plan = std::make_shared<IntMmPlan>();
    plan->a = memory::desc({M, K}, a_signed ? memory::data_type::s8 : memory::data_type::u8,
                           memory::format_tag::ab);
    plan->b_plain = memory::desc({K, N}, memory::data_type::s8,
                                 b_transposed ? memory::format_tag::ba : memory::format_tag::ab);
    plan->c = memory::desc({M, N}, memory::data_type::s32, memory::format_tag::ab);
    // A weight (transposed or reused B) in the layout oneDNN picks, packed once; a plain B
    // used once as it lies.
    const memory::desc b_desc =
        packed_b ? memory::desc({K, N}, memory::data_type::s8, memory::format_tag::any)
                 : plan->b_plain;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    plan->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(plan->a, b_desc, plan->c), attr,
                                            onednn_engine());
    plan->prim = dnnl::matmul(plan->pd);
    plan->weights = plan->pd.weights_desc();
    plan->scratchpad = plan->pd.scratchpad_desc();
    return plan;
  });
}

}  // namespace

bool onednn_int_mm(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const bool b_transposed = !b.is_contiguous();
  // A Linear weight (B = W.t()) is packed once and kept, so oneDNN takes it from fewer rows,
  // as fused_linear's (decision 0045).
  if (!(b_transposed ? onednn_takes_linear(M, M * N * K, K)
                     : onednn_takes_product(M, M * N * K, K)))
    return false;
  // Below VNNI oneDNN multiplies with vpmaddubsw, whose int16 pair sums saturate: not exact.
  if (isa_level() < IsaLevel::Avx512Vnni) return false;
  if (own_tile_kernels_take_products()) return false;
  try {
    const std::string b_key =
        "int_mm|" + onednn_key({a.dtype() == DType::I8, N, K, b_transposed});
    const bool packed_b =
        b_transposed || (M >= kOnednnPackMinRows && operand_seen_unchanged(b, b_key));
    std::shared_ptr<IntMmPlan> plan =
        plan_for(a.dtype() == DType::I8, M, N, K, b_transposed, packed_b);
    dnnl::stream& s = onednn_stream();
    PackedWeightMemory packed;
    if (packed_b) packed = onednn_packed_weight(b, b_key, plan->b_plain, plan->weights, s);
    const memory weights =
        packed_b ? packed.memory
                 : onednn_bound_memory(plan, OnednnArg::Weights, plan->b_plain, b.raw_data());
    const memory& src = onednn_bound_memory(plan, OnednnArg::Source, plan->a, a.raw_data());
    const memory& dst = onednn_bound_memory(plan, OnednnArg::Destination, plan->c, c.raw_data());
    const memory& scratch = onednn_bound_scratchpad(plan, plan->scratchpad);
    onednn_execute(plan->prim, s,
                   {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_WEIGHTS, weights.get()},
                    {DNNL_ARG_DST, dst.get()}, {DNNL_ARG_SCRATCHPAD, scratch.get()}});
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation at this ISA cap: kiln's kernel runs
  }
  return true;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
