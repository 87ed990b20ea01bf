// nn::functional: the activations and small layers of functional_activation.h, as
// compositions of kiln ops (autograd differentiates them). Formulas follow PyTorch's kernels
// so that forward values agree to rounding and gradients to the same rules.
#include "kiln/nn/functional_activation.h"

#include "kiln/autograd/autograd.h"
#include "kiln/core/shape.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/hard_sigmoid_family.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/pointwise_program.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::nn::functional {
namespace {

const Scalar kZero(0.0);

// min(x, 0): the argument of the exponential branches, which never overflows there.
Tensor nonpositive(const Tensor& x) { return clamp(x, std::nullopt, kZero); }

// x + 3, clamped to [0, 6], optionally times x, over 6: hardsigmoid and hardswish as one
// pass (pointwise_program, bit for bit the op sequence) when there is no gradient to record
// and the program takes x (float32 on the CPU or xpu), else as the ops. [16, 64, 56, 56] float32,
// two threads, no grad (same process, two rounds): hardswish as ops 814-846 us, as the
// program 243-244 (PyTorch 183-188); hardsigmoid 520-530 -> 202 (PyTorch 192-204).
Tensor hard_sigmoid_family(const Tensor& x, bool times_x) {
  const bool records = autograd::is_grad_enabled() && autograd::requires_grad(x);
  PointwiseProgram p;
  p.registers = 2;
  p.scalars = {3.0f, 0.0f, 6.0f};
  using Op = PointwiseOp;
  using Kind = PointwiseOperand;
  p.steps.push_back({Op::Add, 1, 0, Kind::Scalar, 0, false});
  p.steps.push_back({Op::Clamp, 1, 1, Kind::Scalar, 1, false});
  if (times_x) p.steps.push_back({Op::Mul, 1, 0, Kind::Register, 1, false});
  p.steps.push_back({Op::Div, 1, 1, Kind::Scalar, 2, false});
  if (!records && pointwise_program_supported(x, p)) return pointwise_program(x, p);
  // Recorded on the CPU: the ops with their one-pass derivatives (hard_sigmoid_family.h).
  if (x.device().is_cpu() && (x.dtype() == DType::F32 || x.dtype() == DType::F64))
    return times_x ? hardswish_op(x) : hardsigmoid_op(x);
  const Tensor c = clamp(add(x, Scalar(3.0)), kZero, Scalar(6.0));
  return div(times_x ? mul(x, c) : c, Scalar(6.0));
}

// bfloat16 / float16 inputs computed in float32 and rounded once, as PyTorch's kernels do:
// each op of a composition would round to the 16-bit type (hardswish in bfloat16 was one ulp
// off PyTorch's for a fifth of the values, selu for three quarters).
template <typename Fn>
Tensor rounded_once(const Tensor& x, Fn fn) {
  if (x.dtype() != DType::BF16 && x.dtype() != DType::F16) return fn(x);
  return fn(x.to(DType::F32)).to(x.dtype());
}

void check_floating(const Tensor& x, const char* name) {
  KILN_CHECK(x.defined(), ValueError, name, ": expected a tensor, got an undefined one");
  KILN_CHECK(is_floating(x.dtype()), TypeError, name, ": expected a floating-point input, got ",
             x.dtype());
}

}  // namespace

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  KILN_CHECK(min_val <= max_val, ValueError, "hardtanh: min_val (", min_val,
             ") cannot be greater than max_val (", max_val, ")");
  return clamp(x, Scalar(min_val), Scalar(max_val));
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

// bfloat16 with a gradient to record on the CPU: the op itself, which computes in float32 and
// rounds once (the conversions around it made four more passes).
bool records_bf16_op(const Tensor& x) {
  return x.dtype() == DType::BF16 && x.device().is_cpu() && autograd::is_grad_enabled() &&
         autograd::requires_grad(x);
}

Tensor hardsigmoid(const Tensor& x) {
  check_floating(x, "hardsigmoid");
  if (records_bf16_op(x)) return hardsigmoid_op(x);
  return rounded_once(x, [](const Tensor& v) { return hard_sigmoid_family(v, false); });
}

Tensor hardswish(const Tensor& x) {
  check_floating(x, "hardswish");
  if (records_bf16_op(x)) return hardswish_op(x);
  return rounded_once(x, [](const Tensor& v) { return hard_sigmoid_family(v, true); });
}

Tensor elu(const Tensor& x, double alpha) {
  check_floating(x, "elu");
  return where(gt(x, kZero), x, mul(expm1(nonpositive(x)), Scalar(alpha)));
}

Tensor selu(const Tensor& x) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return rounded_once(x, [&](const Tensor& v) { return mul(elu(v, kAlpha), Scalar(kScale)); });
}

Tensor celu(const Tensor& x, double alpha) {
  check_floating(x, "celu");
  KILN_CHECK(alpha != 0.0, ValueError, "celu: alpha must be non-zero, got 0");
  return where(gt(x, kZero), x,
               mul(expm1(div(nonpositive(x), Scalar(alpha))), Scalar(alpha)));
}

Tensor mish(const Tensor& x) {
  check_floating(x, "mish");
  return rounded_once(x, [](const Tensor& v) { return mul(v, kiln::tanh(softplus(v))); });
}

Tensor logsigmoid(const Tensor& x) {
  check_floating(x, "logsigmoid");
  // min(x, 0) as minimum with a zero, whose derivative at the tie is 1/2 (clamp's is 1): the
  // gradient at x = 0 is then 1/2, as PyTorch's (|x|'s derivative there is 0).
  return rounded_once(x, [](const Tensor& v) {
    const Tensor zero = scalar_tensor(0, TensorOptions(v.dtype(), v.device()));
    return sub(minimum(v, zero), log1p(exp(neg(abs(v)))));
  });
}

Tensor softsign(const Tensor& x) {
  check_floating(x, "softsign");
  return div(x, add(abs(x), Scalar(1.0)));
}

Tensor tanhshrink(const Tensor& x) {
  check_floating(x, "tanhshrink");
  return sub(x, kiln::tanh(x));
}

Tensor softshrink(const Tensor& x, double lambd) {
  check_floating(x, "softshrink");
  KILN_CHECK(lambd >= 0, ValueError,
             "softshrink: lambda must be greater or equal to 0, but found to be ", lambd);
  // x * 0 between the bounds, not 0: a NaN stays NaN, as in PyTorch's kernel.
  const Tensor below = where(lt(x, Scalar(-lambd)), add(x, Scalar(lambd)), mul(x, kZero));
  return where(gt(x, Scalar(lambd)), sub(x, Scalar(lambd)), below);
}

Tensor hardshrink(const Tensor& x, double lambd) {
  check_floating(x, "hardshrink");
  return where(logical_and(ge(x, Scalar(-lambd)), le(x, Scalar(lambd))), kZero, x);
}

Tensor threshold(const Tensor& x, double threshold, double value) {
  return where(le(x, Scalar(threshold)), Scalar(value), x);  // NaN stays NaN, as PyTorch
}

Tensor glu(const Tensor& x, int64_t dim) {
  check_floating(x, "glu");
  KILN_CHECK(x.dim() > 0, ShapeError, "glu: does not support scalars (0-d tensors)");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  KILN_CHECK(d >= 0 && d < x.dim(), IndexError, "glu: dim ", dim, " is out of range for a ",
             x.dim(), "-d input");
  const int64_t n = x.size(d);
  KILN_CHECK(n % 2 == 0, ShapeError, "glu: halving dimension must be even, but dimension ", d,
             " is size ", n);
  return rounded_once(x, [&](const Tensor& v) {
    return mul(narrow(v, d, 0, n / 2), kiln::sigmoid(narrow(v, d, n / 2, n / 2)));
  });
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_floating(x, "prelu");
  KILN_CHECK(weight.defined(), ValueError, "prelu: weight must be defined");
  KILN_CHECK(x.dim() > 0, ShapeError, "prelu: zero-dim input tensors are not allowed");
  const int64_t c = x.dim() >= 2 ? x.size(1) : 1;
  KILN_CHECK(weight.dim() <= 1 && (weight.numel() == 1 || weight.numel() == c), ShapeError,
             "prelu: expected a weight of 1 value or one per channel (", c,
             ", the input's dim 1), got shape ", shape_str(weight.shape()));
  Shape s;  // one slope: a 0-d weight; one per channel: [C, 1, ...] against [N, C, ...]
  if (weight.numel() != 1) {
    s.assign(size_t(x.dim() - 1), 1);
    s[0] = c;
  }
  return where(gt(x, kZero), x, mul(reshape(weight, s), x));
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training, Generator* gen) {
  check_floating(x, "rrelu");
  KILN_CHECK(lower <= upper, ValueError, "rrelu: lower bound (", lower,
             ") must not exceed the upper bound (", upper, ")");
  if (!training) return leaky_relu(x, (lower + upper) / 2);
  Tensor slopes = empty_like(x);
  {
    autograd::NoGradGuard no_grad;
    uniform_(slopes, lower, upper, gen);
  }
  return where(ge(x, kZero), x, mul(x, slopes));
}

Tensor softmin(const Tensor& x, int64_t dim) { return kiln::softmax(neg(x), dim); }

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  check_floating(x, "normalize");
  return div(x, clamp(norm(x, p, {dim}, true), Scalar(eps), std::nullopt));
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  check_floating(x1, "cosine_similarity");
  check_floating(x2, "cosine_similarity");
  const Shape s = broadcast_shapes(x1.shape(), x2.shape());
  const Tensor a = x1.expand(s), b = x2.expand(s);
  // Each norm clamped at eps in value only: PyTorch clamps them in place without recording
  // it, so the gradient is that of the unclamped norm.
  auto clamped = [&](const Tensor& t) {
    const Tensor n = norm(t, 2.0, {dim}, true);
    return add(n, autograd::detach(sub(clamp(n, Scalar(eps), std::nullopt), n)));
  };
  return sum(mul(div(a, clamped(a)), div(b, clamped(b))), {dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps,
                         bool keepdim) {
  check_floating(x1, "pairwise_distance");
  KILN_CHECK(x1.dim() > 0 || x2.dim() > 0, ShapeError,
             "pairwise_distance: expected inputs with at least one dim, got two 0-d tensors");
  return norm(add(sub(x1, x2), Scalar(eps)), p, {-1}, keepdim);
}

namespace {

// x [*, C, H, W] with its last three dims split into the five `split`, those five reordered
// by `order` and merged into the three `merged`: the pixel shuffles' view changes.
Tensor regroup_last_three(const Tensor& x, std::initializer_list<int64_t> split,
                          std::initializer_list<int64_t> order,
                          std::initializer_list<int64_t> merged) {
  const int64_t b = x.dim() - 3;
  Shape split_shape(x.shape().begin(), x.shape().end() - 3), out(split_shape);
  split_shape.insert(split_shape.end(), split);
  out.insert(out.end(), merged);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t i : order) perm.push_back(b + i);
  return reshape(permute(reshape(x, split_shape), perm), out);
}

}  // namespace

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3, ShapeError,
             "pixel_shuffle: expected an input [*, C, H, W] with at least 3 dims, got shape ",
             shape_str(x.shape()));
  KILN_CHECK(r > 0, ValueError, "pixel_shuffle: upscale_factor must be positive, got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(c % (r * r) == 0, ShapeError, "pixel_shuffle: expected the channel dim (", c,
             ") to be divisible by the square of upscale_factor (", r * r, ")");
  // [C', r, r, H, W] -> [C', H, r, W, r]
  return regroup_last_three(x, {c / (r * r), r, r, h, w}, {0, 3, 1, 4, 2},
                            {c / (r * r), h * r, w * r});
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3, ShapeError,
             "pixel_unshuffle: expected an input [*, C, H, W] with at least 3 dims, got shape ",
             shape_str(x.shape()));
  KILN_CHECK(r > 0, ValueError, "pixel_unshuffle: downscale_factor must be positive, got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(h % r == 0 && w % r == 0, ShapeError, "pixel_unshuffle: expected height (", h,
             ") and width (", w, ") divisible by downscale_factor (", r, ")");
  // [C, H', r, W', r] -> [C, r, r, H', W']
  return regroup_last_three(x, {c, h / r, r, w / r, r}, {0, 2, 4, 1, 3},
                            {c * r * r, h / r, w / r});
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  check_floating(x, "instance_norm");
  KILN_CHECK(x.dim() >= 3, ShapeError,
             "instance_norm: expected an input [N, C, *] with at least 3 dims, got shape ",
             shape_str(x.shape()));
  const int64_t n = x.size(0), c = x.size(1), spatial = x.numel() / std::max<int64_t>(n * c, 1);
  KILN_CHECK(running_mean.defined() == running_var.defined(), ValueError,
             "instance_norm: running_mean and running_var must be given together");
  if (!use_input_stats) {
    KILN_CHECK(running_mean.defined(), ValueError,
               "instance_norm: use_input_stats=False needs running_mean and running_var");
    return batch_norm(x, running_mean, running_var, weight, bias, false, momentum, eps);
  }
  KILN_CHECK(spatial > 1, ValueError,
             "instance_norm: expected more than 1 spatial element when training, got input "
             "shape ", shape_str(x.shape()));
  if (!running_mean.defined()) return group_norm(x, c, weight, bias, eps);
  // PyTorch's rule: the batch norm of x viewed as [1, N C, *], the running statistics
  // repeated per sample, then each running statistic set to the mean over the samples.
  Shape folded = x.shape();
  folded.erase(folded.begin());
  folded[0] = n * c;
  folded.insert(folded.begin(), 1);
  Tensor mean_rep = repeat(running_mean, {n}), var_rep = repeat(running_var, {n});
  const Tensor w = weight.defined() ? repeat(weight, {n}) : Tensor();
  const Tensor b = bias.defined() ? repeat(bias, {n}) : Tensor();
  Tensor y = batch_norm(reshape(x, folded), mean_rep, var_rep, w, b, true, momentum, eps);
  {
    autograd::NoGradGuard no_grad;
    Tensor rm = running_mean, rv = running_var;
    rm.copy_(mean(reshape(mean_rep, {n, c}), {0}));
    rv.copy_(mean(reshape(var_rep, {n, c}), {0}));
  }
  return reshape(y, x.shape());
}

Tensor feature_dropout(const Tensor& x, double p, bool training, int64_t feature_dims,
                       const char* name, Generator* gen) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, ValueError, name,
             ": dropout probability has to be between 0 and 1, but got ", p);
  // dropout2d reads a 3-d input as [N, C, L] (channel-wise 1-d dropout), as PyTorch does.
  const bool batched = x.dim() == feature_dims + 2 || (feature_dims == 2 && x.dim() == 3);
  KILN_CHECK(batched || x.dim() == feature_dims + 1, ShapeError, name, ": expected a ",
             feature_dims + 1, "-d (unbatched) or ", feature_dims + 2,
             "-d (batched) input, got shape ", shape_str(x.shape()));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, kZero);
  Shape mask_shape(size_t(x.dim()), 1);
  mask_shape[0] = x.size(0);
  if (batched) mask_shape[1] = x.size(1);
  Tensor mask;
  {
    autograd::NoGradGuard no_grad;
    mask = div(bernoulli(full(mask_shape, Scalar(1.0 - p), TensorOptions(x.dtype(), x.device())),
                         gen),
               Scalar(1.0 - p));
  }
  return mul(x, mask);
}

}  // namespace kiln::nn::functional
