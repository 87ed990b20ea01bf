// Reductions. Axes are an attribute up to opset 12 (ReduceSum) / 17 (the others) and an
// optional input after; no axes means every axis unless noop_with_empty_axes is set. The
// result keeps the input's element type (kiln widens integer sums to int64).
#include <algorithm>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

struct ReduceArgs {
  Dims dims;      // normalised, sorted; empty = all
  bool keepdim;
  bool noop;      // empty axes with noop_with_empty_axes: the input unchanged
};

ReduceArgs reduce_args(const OpContext& ctx, int64_t axes_input_since) {
  const Tensor& x = ctx.input(0);
  ReduceArgs r;
  r.keepdim = ctx.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes = axes_from(ctx, "axes", 1, axes_input_since);
  r.noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  for (int64_t a : axes) r.dims.push_back(normalize_axis(a, x.dim()));
  std::sort(r.dims.begin(), r.dims.end());
  KILN_CHECK(std::adjacent_find(r.dims.begin(), r.dims.end()) == r.dims.end(), ValueError,
             "axes repeat a dimension");
  if (r.dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) r.dims.push_back(d);
  }
  return r;
}

// A reduction done per dim from the last to the first (for ops kiln reduces one dim at a time).
template <typename F>
Tensor reduce_each(Tensor x, const ReduceArgs& r, F f) {
  for (auto it = r.dims.rbegin(); it != r.dims.rend(); ++it) x = f(x, *it);
  if (!r.keepdim) {
    for (auto it = r.dims.rbegin(); it != r.dims.rend(); ++it) x = squeeze(x, {*it});
  }
  return x;
}

template <int64_t Since, typename F>
std::vector<Tensor> reduce(OpContext& ctx, F body) {
  const Tensor& x = ctx.input(0);
  ReduceArgs r = reduce_args(ctx, Since);
  if (r.noop) return one(x);
  if (x.dim() == 0) return one(body(x, Dims{}, r.keepdim));
  return one(cast(body(x, r.dims, r.keepdim), x.dtype()));
}

Tensor as_float(const Tensor& x) { return is_floating(x.dtype()) ? x : to_dtype(x, DType::F64); }

std::vector<Tensor> op_reduce_sum(OpContext& ctx) {
  return reduce<13>(ctx, [](const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); });
}
std::vector<Tensor> op_reduce_mean(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return mean(as_float(x), d, k); });
}
std::vector<Tensor> op_reduce_max(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return x.dim() ? amax(x, d, k) : x; });
}
std::vector<Tensor> op_reduce_min(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return x.dim() ? amin(x, d, k) : x; });
}
std::vector<Tensor> op_reduce_prod(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) {
    if (!x.dim()) return x;
    ReduceArgs r{d, k, false};
    return reduce_each(x, r, [](const Tensor& t, int64_t dim) { return prod(t, dim, true); });
  });
}
std::vector<Tensor> op_reduce_l1(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return sum(abs(x), d, k); });
}
std::vector<Tensor> op_reduce_l2(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) {
    return sqrt(sum(mul(as_float(x), as_float(x)), d, k));
  });
}
std::vector<Tensor> op_reduce_sum_square(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return sum(mul(x, x), d, k); });
}
std::vector<Tensor> op_reduce_log_sum(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) { return log(sum(as_float(x), d, k)); });
}
std::vector<Tensor> op_reduce_log_sum_exp(OpContext& ctx) {
  return reduce<18>(ctx, [](const Tensor& x, const Dims& d, bool k) {
    return x.dim() ? logsumexp(as_float(x), d, k) : as_float(x);
  });
}

// ArgMax/ArgMin: int64 indices; select_last_index picks the last of equal extremes.
template <bool Max>
std::vector<Tensor> op_arg_extreme(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  const bool keepdim = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  if (!last) return one(Max ? argmax(x, axis, keepdim) : argmin(x, axis, keepdim));
  Tensor flipped = flip(x, {axis});
  Tensor idx = Max ? argmax(flipped, axis, keepdim) : argmin(flipped, axis, keepdim);
  return one(rsub(idx, x.size(axis) - 1));
}

// CumSum: axis is a 0-d input; exclusive shifts by one, reverse sums from the end.
std::vector<Tensor> op_cumsum(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(int64_t(ctx.input_scalar(1)), x.dim());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  Tensor t = reverse ? flip(x, {axis}) : x;
  Tensor y = cast(cumsum(t, axis), x.dtype());
  if (exclusive) y = sub(y, t);
  return one(reverse ? flip(y, {axis}) : y);
}

}  // namespace

void register_reduction_ops(OpTable& t) {
  t.add("ReduceSum", op_reduce_sum);
  t.add("ReduceMean", op_reduce_mean);
  t.add("ReduceMax", op_reduce_max);
  t.add("ReduceMin", op_reduce_min);
  t.add("ReduceProd", op_reduce_prod);
  t.add("ReduceL1", op_reduce_l1);
  t.add("ReduceL2", op_reduce_l2);
  t.add("ReduceSumSquare", op_reduce_sum_square);
  t.add("ReduceLogSum", op_reduce_log_sum);
  t.add("ReduceLogSumExp", op_reduce_log_sum_exp);
  t.add("ArgMax", op_arg_extreme<true>);
  t.add("ArgMin", op_arg_extreme<false>);
  t.add("CumSum", op_cumsum);
}

}  // namespace kiln::onnx
