// Derivatives of the fused normalisations, written with ops (so double backward works) from
// the saved statistics. With xhat = (x - mean) * rstd (layer_norm) or x * rstd (rms_norm) and
// g = grad_y * weight, over the normalised dims:
//   layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
// and dweight = sum over the other dims of grad_y * xhat, dbias = sum of grad_y.
// The statistics are outputs too: in double backward the first backward's graph uses them,
// so gradients arrive for them (zeros otherwise). With n normalised elements,
// d mean / dx = 1 / n and d rstd / dx = -rstd^2 * xhat / n, which fold into the per-row
// brackets of the formulas above at the cost of row-sized ops only.
#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/normalization.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

struct NormDims {
  Dims normalized, leading;
};
NormDims dims_of(const Shape& x, int64_t k) {
  NormDims d;
  const int64_t n = int64_t(x.size());
  for (int64_t i = 0; i < n; ++i) (i >= n - k ? d.normalized : d.leading).push_back(i);
  return d;
}

Tensor sum_leading(const Tensor& t, const NormDims& d) {
  return d.leading.empty() ? t : sum(t, d.leading);
}

// Whether a statistic's gradient holds anything (outputs that receive none arrive as zeros).
bool any_nonzero(const Tensor& g) { return g.defined() && any(g != zeros_like(g)).item<bool>(); }

// The fused backward op (two passes over each row instead of about 13 over whole tensors) on
// the CPU where no graph of the backward is recorded and the statistics receive no gradient;
// the formulas in ops otherwise (double backward).
bool fused_norm_backward(const Tensor& x, const Grads& go) {
  if (is_grad_enabled() || x.device().type != DeviceType::CPU || !go[0].defined() ||
      go[0].shape() != x.shape() || go[0].dtype() != x.dtype() || go[0].device() != x.device())
    return false;
  for (size_t i = 1; i < go.size(); ++i)
    if (any_nonzero(go[i])) return false;
  return true;
}

Tensor weight_of(const GradContext& ctx) {
  return ctx.inputs[1].defined() ? ctx.input(1) : Tensor();
}

Grads d_native_layer_norm(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const NormDims d = dims_of(ctx.input_shapes[0], c.int_attr(0));
  const double n = double(numel_of(ctx.input_shapes[0]) / std::max<int64_t>(1, numel_of(ctx.output(1).shape())));
  Tensor x = ctx.input(0), mean_ = ctx.output(1), rstd = ctx.output(2);
  Grads r(3);
  Tensor gy = go[0];
  if (fused_norm_backward(x, go)) {
    auto [dx, dw, db] =
        native_layer_norm_backward(gy, x, mean_, rstd, weight_of(ctx), c.int_attr(0));
    if (ctx.needs(0)) r[0] = dx;
    if (ctx.needs(1)) r[1] = dw;
    if (ctx.needs(2)) r[2] = db;
    return r;
  }
  Tensor xhat = (x - mean_) * rstd;
  if (ctx.needs(0)) {
    Tensor g = ctx.inputs[1].defined() ? gy * ctx.input(1) : gy;
    Tensor shift = mean(g, d.normalized, true) - go[1] / (rstd * n);
    Tensor scale = mean(g * xhat, d.normalized, true) + go[2] * rstd / n;
    r[0] = rstd * (g - shift - xhat * scale);
  }
  if (ctx.needs(1)) r[1] = sum_leading(gy * xhat, d);
  if (ctx.needs(2)) r[2] = sum_leading(gy, d);
  return r;
}

Grads d_native_rms_norm(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const NormDims d = dims_of(ctx.input_shapes[0], c.int_attr(0));
  const double n = double(numel_of(ctx.input_shapes[0]) / std::max<int64_t>(1, numel_of(ctx.output(1).shape())));
  Tensor x = ctx.input(0), rstd = ctx.output(1);
  Grads r(2);
  Tensor gy = go[0];
  if (fused_norm_backward(x, go)) {
    auto [dx, dw] = native_rms_norm_backward(gy, x, rstd, weight_of(ctx), c.int_attr(0));
    if (ctx.needs(0)) r[0] = dx;
    if (ctx.needs(1)) r[1] = dw;
    return r;
  }
  Tensor xhat = x * rstd;
  if (ctx.needs(0)) {
    Tensor g = ctx.inputs[1].defined() ? gy * ctx.input(1) : gy;
    r[0] = rstd * (g - xhat * (mean(g * xhat, d.normalized, true) + go[1] * rstd / n));
  }
  if (ctx.needs(1)) r[1] = sum_leading(gy * xhat, d);
  return r;
}

// native_batch_norm: per-channel statistics over every dim but 1 (decision 0051). A plain
// backward runs the fused op (two passes); with create_graph the same formulas in ops, so that
// double backward works. The statistics' own gradients (from a double backward) add
// d mean / dx = 1 / n and d var / dx = 2 (x - mean) / n.
Grads d_native_batch_norm(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const double eps = c.double_attr(0);
  const Shape& xs = ctx.input_shapes[0];
  Tensor x = ctx.input(0);
  const DType dt = x.dtype();
  Tensor mean_ = ctx.output(1), var_ = ctx.output(2);
  const Tensor w = ctx.inputs[1].defined() ? ctx.input(1) : Tensor();
  Shape cs(xs.size(), 1);
  cs[1] = xs[1];
  Dims dims{0};
  for (int64_t d = 2; d < int64_t(xs.size()); ++d) dims.push_back(d);
  const double n = double(numel_of(xs) / std::max<int64_t>(1, xs[1]));
  Grads r(3);
  Tensor dx;
  if (!is_grad_enabled()) {
    auto [fdx, dw, db] = native_batch_norm_backward(go[0], x, mean_, var_, w, eps);
    dx = fdx;
    r[1] = dw;
    r[2] = db;
  } else {
    Tensor rstd = reshape(rsqrt(var_ + eps), cs).to(dt);
    Tensor xhat = (x - reshape(mean_, cs).to(dt)) * rstd;
    Tensor g = w.defined() ? go[0] * reshape(w, cs) : go[0];
    dx = rstd * (g - mean(g, dims, true) - xhat * mean(g * xhat, dims, true));
    r[1] = sum(go[0] * xhat, dims);
    r[2] = sum(go[0], dims);
  }
  if (any_nonzero(go[1])) dx = dx + (reshape(go[1], cs) / n).to(dt);
  if (any_nonzero(go[2]))
    dx = dx + (reshape(go[2], cs) * (2.0 / n)).to(dt) * (x - reshape(mean_, cs).to(dt));
  if (ctx.needs(0)) r[0] = dx;
  if (!ctx.needs(1)) r[1] = Tensor();
  if (!ctx.needs(2)) r[2] = Tensor();
  return r;
}

// native_group_norm: the statistics of each (sample, group) row of M = C / G * P values, then a
// per-channel weight and bias. As layer_norm over the [N, G, M] rows with g = grad_y * weight:
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) over each row, plus the statistics' own
// gradients; dweight / dbias sum grad_y * xhat / grad_y over every dim but 1. The fused op
// where no graph of the backward is recorded, the formulas in ops otherwise.
Grads d_native_group_norm(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const int64_t groups = c.int_attr(0);
  const Shape& xs = ctx.input_shapes[0];
  Tensor x = ctx.input(0), mean_ = ctx.output(1), rstd = ctx.output(2);
  const Tensor w = weight_of(ctx);
  Grads r(3);
  if (fused_norm_backward(x, go)) {
    auto [dx, dw, db] = native_group_norm_backward(go[0], x, mean_, rstd, w, groups);
    if (ctx.needs(0)) r[0] = dx;
    if (ctx.needs(1)) r[1] = dw;
    if (ctx.needs(2)) r[2] = db;
    return r;
  }
  const DType dt = x.dtype();
  const int64_t n = xs[0];
  const double m = double(numel_of(xs) / std::max<int64_t>(1, n * groups));
  const Shape rows{n, groups, -1}, stat{n, groups, 1};
  Shape cs(xs.size(), 1);
  cs[1] = xs[1];
  Dims dims{0};
  for (int64_t d = 2; d < int64_t(xs.size()); ++d) dims.push_back(d);
  Tensor mu = reshape(mean_, stat).to(dt), rs = reshape(rstd, stat).to(dt);
  Tensor xhat = (reshape(x, rows) - mu) * rs;
  Tensor gy = go[0];
  if (ctx.needs(0)) {
    Tensor g = reshape(w.defined() ? gy * reshape(w, cs) : gy, rows);
    Tensor shift = mean(g, {2}, true), scale = mean(g * xhat, {2}, true);
    if (go[1].defined()) shift = shift - reshape(go[1], stat).to(dt) / (rs * m);
    if (go[2].defined()) scale = scale + reshape(go[2], stat).to(dt) * rs / m;
    r[0] = reshape(rs * (g - shift - xhat * scale), xs);
  }
  if (ctx.needs(1)) r[1] = sum(gy * reshape(xhat, xs), dims);
  if (ctx.needs(2)) r[2] = sum(gy, dims);
  return r;
}

}  // namespace

void register_norm_derivatives() {
  register_derivative("native_group_norm", d_native_group_norm);
  register_derivative("native_batch_norm", d_native_batch_norm);
  register_derivative("native_layer_norm", d_native_layer_norm);
  register_derivative("native_rms_norm", d_native_rms_norm);
}

}  // namespace kiln::autograd
