// Reductions (sum, mean, prod, max/min, argmax/argmin, amax/amin, all/any): definitions and
// public functions. The public functions apply PyTorch's dtype rules (converting the input
// to the result dtype first), the meta functions validate dims and compute shapes, and one
// CPU kernel per op reduces any strided input (see backends/cpu/reduction_kernels.cpp).
#include "kiln/ops/reduction.h"

#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "op_helpers.h"
#include "reduction_util.h"

namespace kiln {

namespace {

AttrValue dims_attr(const Dims& d) { return AttrValue(std::vector<int64_t>(d)); }

// sum/prod/cumsum/cumprod: bool and integer inputs accumulate into int64 unless a dtype is
// given.
DType accumulate_dtype(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_integral(x.dtype(), /*include_bool=*/true) ? DType::I64 : x.dtype();
}

Tensor reduce(const char* op, const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op(get_op(op), {x}, {dims_attr(dims), keepdim});
}

// Reductions without an identity over all elements need a non-empty input. PyTorch raises
// RuntimeError for max/min/amax/amin and IndexError for argmax/argmin; kiln does the same.
void check_numel_for_full(const char* name, const Tensor& x) {
  if (x.numel() != 0) return;
  std::string op = name;
  if (op == "argmax" || op == "argmin")
    KILN_THROW(IndexError, name,
               "(): Expected reduction dim to be specified for input.numel() == 0.");
  KILN_THROW(Error, name,
             "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
             "reduction dim with the 'dim' argument.");
}

}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) { return sum(x, Dims{}, false, dtype); }

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  const DType acc = accumulate_dtype(x, dtype);
  if (!is_integral(acc, /*include_bool=*/true))
    return call_op(KILN_OP("sum"), {to_dtype(x, acc)}, {dims_attr(dims), keepdim});
  // The op sums bool and integer inputs into int64 itself (reduce_sum_meta): a widened copy
  // cost 8 bytes per element written and read again (count_nonzero 1.5-2x PyTorch's time).
  // Other integer dtypes asked for narrow the int64 sum, which wraps as their own sum would.
  const Tensor in = is_integral(x.dtype(), /*include_bool=*/true) ? x : to_dtype(x, acc);
  Tensor s = call_op(KILN_OP("sum"), {in}, {dims_attr(dims), keepdim});
  return acc == DType::I64 ? s : to_dtype(s, acc);
}

namespace {
void check_mean_dtype(const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), Error,
             "mean(): could not infer output dtype. Input dtype must be either a floating "
             "point or complex dtype. Got: ", ops::torch_type_name(x.dtype()));
}
}  // namespace

Tensor mean(const Tensor& x) { return mean(x, Dims{}, false); }

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  check_mean_dtype(x);
  return call_op(KILN_OP("mean"), {x}, {dims_attr(dims), keepdim});
}

Tensor prod(const Tensor& x, std::optional<DType> dtype) {
  return call_op(KILN_OP("prod"), {to_dtype(x, accumulate_dtype(x, dtype))},
                 {dims_attr({}), false});
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  return call_op(KILN_OP("prod"), {to_dtype(x, accumulate_dtype(x, dtype))},
                 {dims_attr({dim}), keepdim});
}

Tensor max(const Tensor& x) {
  check_numel_for_full("max", x);
  return reduce("amax", x, {}, false);
}
Tensor min(const Tensor& x) {
  check_numel_for_full("min", x);
  return reduce("amin", x, {}, false);
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto outs = call_op_multi(KILN_OP("max.dim"), {x}, {dims_attr({dim}), keepdim});
  return {outs[0], outs[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto outs = call_op_multi(KILN_OP("min.dim"), {x}, {dims_attr({dim}), keepdim});
  return {outs[0], outs[1]};
}

namespace {
// argmax/argmin without a dim index the flattened input; with keepdim the result has a
// size-1 dim for every input dim, as PyTorch.
Tensor arg_reduce(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) check_numel_for_full(op, x);
  return reduce(op, x, dim ? Dims{*dim} : Dims{}, keepdim);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmin", x, dim, keepdim);
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  if (dims.empty()) check_numel_for_full("amax", x);
  return reduce("amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  if (dims.empty()) check_numel_for_full("amin", x);
  return reduce("amin", x, dims, keepdim);
}

namespace {
// all / any of a complex tensor: of its elements' truth (nonzero real or imaginary part).
Tensor truth(const Tensor& x) { return is_complex(x.dtype()) ? ne(x, 0) : x; }
}  // namespace

Tensor all(const Tensor& x) { return reduce("all", truth(x), {}, false); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce("all", truth(x), {dim}, keepdim);
}
Tensor any(const Tensor& x) { return reduce("any", truth(x), {}, false); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce("any", truth(x), {dim}, keepdim);
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op(KILN_OP("cumsum"), {to_dtype(x, accumulate_dtype(x, dtype))}, {dim});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op(KILN_OP("cumprod"), {to_dtype(x, accumulate_dtype(x, dtype))}, {dim});
}

namespace ops {
void register_reduction_stat_ops();
void register_softmax_ops();

void register_reduction_ops() {
  const std::string dims = "(Tensor self, int[] dim, bool keepdim=False)";
  register_op("sum", "sum" + dims + " -> Tensor", reduce_sum_meta);
  for (const char* name : {"mean", "prod"})
    register_op(name, std::string(name) + dims + " -> Tensor", reduce_meta);
  for (const char* name : {"amax", "amin"})
    register_op(name, std::string(name) + dims + " -> Tensor", reduce_nonempty_meta);
  for (const char* name : {"all", "any"})
    register_op(name, std::string(name) + dims + " -> Tensor", reduce_bool_meta);
  for (const char* name : {"argmax", "argmin"})
    register_op(name, std::string(name) + dims + " -> Tensor", reduce_index_meta);
  register_op("max.dim", "max.dim" + dims + " -> (Tensor values, Tensor indices)",
              reduce_value_index_meta);
  register_op("min.dim", "min.dim" + dims + " -> (Tensor values, Tensor indices)",
              reduce_value_index_meta);
  for (const char* name : {"cumsum", "cumprod"})
    register_op(name, std::string(name) + "(Tensor self, int dim) -> Tensor", along_dim_meta);
  register_reduction_stat_ops();
  register_softmax_ops();
}
}  // namespace ops

}  // namespace kiln
