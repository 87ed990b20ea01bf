// Dense layers, the softmax family and normalisations.
#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

std::vector<Tensor> op_matmul(OpContext& ctx) { return one(matmul(ctx.input(0), ctx.input(1))); }

std::vector<Tensor> op_gemm(OpContext& ctx) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  if (ctx.attr_int("transA", 0)) a = transpose(a, 0, 1);
  if (ctx.attr_int("transB", 0)) b = transpose(b, 0, 1);
  const double alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  Tensor y = matmul(a, b);
  if (alpha != 1.0) y = mul(y, scalar_like(y, alpha));
  if (ctx.has_input(2) && beta != 0.0) {
    const Tensor& c = ctx.input(2);
    y = add(y, beta == 1.0 ? c : mul(c, scalar_like(c, beta)));
  }
  return one(y);
}

// Before opset 13 the softmax family works on the input flattened to 2-d at axis (default
// 1); from 13 on a single axis (default -1).
template <typename F>
std::vector<Tensor> softmax_family(OpContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  if (ctx.opset() >= 13) return one(f(x, normalize_axis(ctx.attr_int("axis", -1), x.dim())));
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 1), x.dim());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  Tensor y = f(reshape(x, Shape{outer, x.numel() / std::max<int64_t>(outer, 1)}), 1);
  return one(reshape(y, x.shape()));
}

std::vector<Tensor> op_softmax(OpContext& ctx) {
  return softmax_family(ctx, [](const Tensor& x, int64_t d) { return softmax(x, d); });
}
std::vector<Tensor> op_log_softmax(OpContext& ctx) {
  return softmax_family(ctx, [](const Tensor& x, int64_t d) { return log_softmax(x, d); });
}
std::vector<Tensor> op_hardmax(OpContext& ctx) {
  return softmax_family(ctx, [](const Tensor& x, int64_t d) {
    Tensor idx = argmax(x, d, true);
    Shape s(size_t(x.dim()), 1);
    s[size_t(d)] = x.size(d);
    Tensor positions = reshape(arange(x.size(d), TensorOptions(DType::I64, x.device())), s);
    return cast(eq(positions, idx), x.dtype());
  });
}

// [C] -> [1, C, 1, ...] for an input of rank `rank`.
Tensor per_channel(const Tensor& v, int64_t rank) {
  Shape s(size_t(rank), 1);
  s[1] = v.numel();
  return reshape(v, s);
}

Dims non_channel_dims(int64_t rank) {
  Dims d{0};
  for (int64_t i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

std::vector<Tensor> op_batch_norm(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t r = x.dim();
  KILN_CHECK(r >= 2, ShapeError, "input must have at least 2 dims, got ", shape_str(x.shape()));
  Tensor scale = per_channel(ctx.input(1), r), bias = per_channel(ctx.input(2), r);
  // Before opset 7, is_test=0 (the default) asked for training mode; before 9, spatial=0
  // asked for statistics per activation instead of per channel.
  const bool training = (ctx.opset() >= 14 && ctx.attr_int("training_mode", 0) != 0) ||
                        (ctx.opset() < 7 && ctx.attr_int("is_test", 0) == 0);
  KILN_CHECK(ctx.opset() >= 9 || ctx.attr_int("spatial", 1) != 0, NotImplementedError,
             "spatial=0 (per-activation statistics) is not supported");
  if (!training) {
    // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a: the per-channel
    // work is on [C] vectors, leaving two passes over x instead of four.
    Tensor mean = per_channel(ctx.input(3), r), var = per_channel(ctx.input(4), r);
    Tensor a = div(scale, sqrt(add(var, scalar_like(var, eps))));
    Tensor b = sub(bias, mul(mean, a));
    return one(cast(add(mul(x, a), b), x.dtype()));
  }
  const double momentum = ctx.attr_float("momentum", 0.9f);
  Dims dims = non_channel_dims(r);
  Tensor mean = kiln::mean(x, dims, true);
  Tensor var = kiln::var(x, dims, 0, true);
  Tensor y = add(mul(div(sub(x, mean), sqrt(add(var, scalar_like(var, eps)))), scale), bias);
  Tensor flat_mean = reshape(mean, Shape{-1}), flat_var = reshape(var, Shape{-1});
  Tensor run_mean = add(mul(ctx.input(3), scalar_like(flat_mean, momentum)),
                        mul(flat_mean, scalar_like(flat_mean, 1 - momentum)));
  Tensor run_var = add(mul(ctx.input(4), scalar_like(flat_var, momentum)),
                       mul(flat_var, scalar_like(flat_var, 1 - momentum)));
  return {y, run_mean, run_var};
}

std::vector<Tensor> op_instance_norm(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t r = x.dim();
  Dims dims;
  for (int64_t i = 2; i < r; ++i) dims.push_back(i);
  Tensor mean = kiln::mean(x, dims, true);
  Tensor var = kiln::var(x, dims, 0, true);
  Tensor y = div(sub(x, mean), sqrt(add(var, scalar_like(var, eps))));
  return one(add(mul(y, per_channel(ctx.input(1), r)), per_channel(ctx.input(2), r)));
}

std::vector<Tensor> op_layer_norm(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), x.dim());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  Dims dims;
  for (int64_t i = axis; i < x.dim(); ++i) dims.push_back(i);
  Tensor xf = cast(x, is_floating(x.dtype()) && x.dtype() != DType::F16 && x.dtype() != DType::BF16
                          ? x.dtype() : DType::F32);
  Tensor mean = kiln::mean(xf, dims, true);
  Tensor var = kiln::var(xf, dims, 0, true);
  Tensor inv_std = rsqrt(add(var, scalar_like(var, eps)));
  Tensor y = cast(mul(sub(xf, mean), inv_std), x.dtype());
  y = mul(y, ctx.input(1));
  if (ctx.has_input(2)) y = add(y, ctx.input(2));
  return {y, mean, inv_std};
}

std::vector<Tensor> op_mean_variance_norm(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Dims dims;
  for (int64_t a : ctx.attr_ints("axes", std::vector<int64_t>{0, 2, 3})) dims.push_back(normalize_axis(a, x.dim()));
  Tensor mean = kiln::mean(x, dims, true);
  Tensor centered = sub(x, mean);
  Tensor std = sqrt(kiln::mean(mul(centered, centered), dims, true));
  return one(div(centered, add(std, scalar_like(std, 1e-9))));
}

// Local response normalisation across channels: each channel divided by
// (bias + alpha / size * sum of squares over its neighbourhood) ^ beta.
std::vector<Tensor> op_lrn(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t size = ctx.attr_int("size");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f),
               bias = ctx.attr_float("bias", 1.0f);
  KILN_CHECK(x.dim() >= 3 && size >= 1, ShapeError, "LRN needs an input [N, C, ...] and size >= 1");
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Tensor sq = mul(x, x);
  // Pad the channel dim (dim 1) with zeros, then add the size shifted windows.
  Tensor moved = movedim(sq, 1, -1);
  Tensor padded = pad(moved, {before, after}, "constant", 0);
  Tensor acc = zeros_like(moved);
  for (int64_t i = 0; i < size; ++i) acc = add(acc, narrow(padded, -1, i, x.size(1)));
  Tensor sum = movedim(acc, -1, 1);
  Tensor denom = pow(add(mul(sum, scalar_like(sum, alpha / double(size))), scalar_like(sum, bias)),
                     scalar_like(sum, beta));
  return one(div(x, denom));
}

}  // namespace

void register_nn_ops(OpTable& t) {
  t.add("MatMul", op_matmul);
  t.add("Gemm", op_gemm);
  t.add("Softmax", op_softmax);
  t.add("LogSoftmax", op_log_softmax);
  t.add("Hardmax", op_hardmax);
  t.add("BatchNormalization", op_batch_norm);
  t.add("InstanceNormalization", op_instance_norm);
  t.add("LayerNormalization", op_layer_norm);
  t.add("MeanVarianceNormalization", op_mean_variance_norm);
  t.add("LRN", op_lrn);
}

}  // namespace kiln::onnx
