// The float16 calls the CPU runs in float16 itself: the dispatcher otherwise runs the ops of
// dispatch/float16_in_float32.cpp on float32 copies. Claimed here: products of a few rows
// with a transposed float16 weight (linalg_kernels.cpp), and elementwise ops whose kernels
// take float16 blocks through the float32 vector functions (float16_blocks.h, decision 0066),
// reductions whose fast path reads float16 itself (reduction_fast.cpp, decision 0067) and
// softmax rows widened in groups (softmax_kernels.cpp, decision 0068): all give the float32
// kernel's values bit for bit in one pass over memory.
#include <set>
#include <string_view>
#include <unordered_set>

#include "float16_blocks.h"
#include "isa/reduce_vec.h"
#include "kiln/dispatch/float16_in_float32.h"
#include "kiln/dispatch/registry.h"

namespace kiln::cpu {

bool float16_gemv_applies(const OpCall& call);  // linalg_kernels.cpp

namespace {

// Unary ops whose kernels put dense float16 tensors through a float32 vector function
// (unary_kernels.cpp, run_vectorised_fn).
bool vector_unary_op(std::string_view name) {
  static const std::unordered_set<std::string_view> ops = {
      "exp",  "exp2", "log",     "log2",    "log1p", "expm1",      "sqrt",
      "rsqrt", "sin", "cos",     "tan",     "tanh",  "sigmoid",    "relu",
      "silu", "erf",  "reciprocal", "gelu", "softplus", "leaky_relu", "clamp"};
  return ops.count(name) != 0;
}

// Both one dense block in the same element order (contiguous, or channels-last alike), the
// output the input itself or apart from it: the unary vector path's condition.
bool dense_alike(const Tensor& in, const Tensor& out) {
  if (in.shape() != out.shape()) return false;
  const bool layout = (in.is_contiguous() && out.is_contiguous()) ||
                      (in.strides() == out.strides() &&
                       in.is_contiguous(MemoryFormat::ChannelsLast));
  return layout && (in.raw_data() == out.raw_data() || !in.shares_storage_with(out));
}

bool comparison_op(std::string_view name) {
  return name == "eq" || name == "ne" || name == "lt" || name == "le" || name == "gt" ||
         name == "ge";
}

bool float16_elementwise_applies(const OpCall& call) {
  if (!float16_blocks_available()) return false;
  for (const Tensor& t : call.inputs)
    if (!t.defined() || t.dtype() != DType::F16) return false;
  const std::string& name = call.op->name;
  // float16_compare_blocks: two float16 inputs in any layout, a bool output.
  const bool compare = comparison_op(name);
  for (const Tensor& t : call.outs)
    if (!t.defined() || t.dtype() != (compare ? DType::Bool : DType::F16)) return false;
  if (compare) return call.inputs.size() == 2;
  if (call.inputs.size() == 1 && vector_unary_op(name)) {
    const Tensor& in = call.inputs[0];
    // An output the dispatcher allocates has the input's layout (contiguous or channels-last).
    if (call.outs.empty())
      return in.is_contiguous() || in.is_contiguous(MemoryFormat::ChannelsLast);
    return call.outs.size() == 1 && dense_alike(in, call.outs[0]);
  }
  // float16_muladd_blocks: value 1 (eval-mode batch norm's shift + x * scale).
  if (name == "addcmul" && call.inputs.size() == 3) return call.scalar_attr(0).to<double>() == 1.0;
  if (call.inputs.size() != 2) return false;
  // float16_binary_blocks: any layout (runs it cannot block convert element by element).
  if (name == "add" || name == "sub") return call.scalar_attr(0).to<double>() == 1.0;
  if (name == "div") return call.string_attr(0).empty();
  return name == "mul" || name == "maximum" || name == "minimum";
}

// Reductions of a contiguous float16 tensor that reduction_fast.cpp's layouts take: the
// reduced dims are the last ones (runs), or the last dim is kept (rows; not var / std,
// which have the runs layout only). Others would take the generic strided loop.
bool float16_reduction_applies(const OpCall& call) {
  const std::string& name = call.op->name;
  const bool stats = name == "var" || name == "std";
  if (!(stats || name == "sum" || name == "mean" || name == "amax" || name == "amin") ||
      !reduce_vec().sum_f16 || call.inputs.size() != 1)
    return false;
  const Tensor& in = call.inputs[0];
  if (!in.defined() || in.dtype() != DType::F16 || in.dim() == 0 || !in.is_contiguous())
    return false;
  for (const Tensor& t : call.outs)
    if (!t.defined() || t.dtype() != DType::F16 || !t.is_contiguous()) return false;
  const int64_t n = in.dim();
  std::set<int64_t> reduced;
  for (int64_t d : call.ints_attr(0)) {
    if (d < -n || d >= n) return false;  // the op reports it
    reduced.insert(d < 0 ? d + n : d);
  }
  if (reduced.empty())
    for (int64_t d = 0; d < n; ++d) reduced.insert(d);
  const bool suffix = *reduced.begin() == n - int64_t(reduced.size()) && reduced.count(n - 1);
  return suffix || (!stats && !reduced.count(n - 1));
}

// softmax / log_softmax of a contiguous float16 tensor: groups of rows (or tiles of columns)
// widened into L1 and put through the float32 path's functions (softmax_kernels.cpp).
bool float16_softmax_applies(const OpCall& call) {
  const std::string& name = call.op->name;
  if ((name != "softmax" && name != "log_softmax") || call.inputs.size() != 1 ||
      !float16_blocks_available())
    return false;
  const Tensor& in = call.inputs[0];
  if (!in.defined() || in.dtype() != DType::F16 || !in.is_contiguous() || in.dim() == 0)
    return false;
  for (const Tensor& t : call.outs)
    if (!t.defined() || t.dtype() != DType::F16 || !t.is_contiguous()) return false;
  return true;
}

bool cpu_runs_float16(const OpCall& call) {
  return float16_elementwise_applies(call) || float16_reduction_applies(call) ||
         float16_softmax_applies(call) || float16_gemv_applies(call);
}

}  // namespace

void register_float16_native() { set_float16_native(cpu_runs_float16); }

}  // namespace kiln::cpu
