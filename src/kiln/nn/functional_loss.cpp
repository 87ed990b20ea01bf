// nn::functional losses: nll_loss, cross_entropy, mse, l1, smooth_l1, huber, bce,
// bce_with_logits, kl_div. Compositions of differentiable ops, with PyTorch's semantics;
// nll_loss (and cross_entropy's) is one op where it can be (kiln/ops/nll_loss.h). Under
// autocast they run in float32, as torch's (its CPU autocast lists them all as float32 ops):
// the interceptor sees only ops, so each loss casts its lower-precision inputs itself.
#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/autocast.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/nll_loss.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/ops/cross_entropy_rows.h"

namespace kiln::nn::functional {

namespace {

// t in float32 where autocast is enabled for its device and t holds bfloat16 / float16 values
// (a recorded cast: gradients return in t's dtype); t itself otherwise.
Tensor f32_under_autocast(const Tensor& t) {
  if (!t.defined() || (t.dtype() != DType::BF16 && t.dtype() != DType::F16) ||
      !is_autocast_enabled(t.device().type))
    return t;
  return t.to(DType::F32);
}

Tensor reduce(const Tensor& loss, Reduction r, const char* fn) {
  switch (r) {
    case Reduction::None: return loss;
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
    case Reduction::BatchMean: break;
  }
  KILN_THROW(ValueError, fn, ": reduction BatchMean is only supported by kl_div; use None, Mean "
             "or Sum");
}

void check_pair(const char* fn, const Tensor& input, const Tensor& target) {
  KILN_CHECK(input.defined() && target.defined(), ValueError, fn,
             ": input and target must be defined");
  KILN_CHECK(input.is_floating_point(), Error, fn, ": expected a floating-point input, got ",
             dtype_name(input.dtype()));
  KILN_CHECK(input.shape() == target.shape(), ShapeError, fn, ": target size ",
             shape_str(target.shape()), " is different from the input size ",
             shape_str(input.shape()), " (kiln does not broadcast loss targets)");
}

// Per-class weights shaped [1, C, 1, ...] to broadcast against x [N, C, *] (or [C]).
Tensor class_weight(const Tensor& weight, const Tensor& x, int64_t class_dim) {
  Shape s(size_t(x.dim()), 1);
  s[size_t(class_dim)] = x.size(class_dim);
  return reshape(weight, s);
}

// Class-index targets, checked: the input with a batch dim ([N, C, d...]; an unbatched [C]
// input gets N = 1) and the target as int64 [N, d...].
struct CheckedTarget {
  Tensor input, target;
  bool unbatched = false;
};

CheckedTarget check_index_target(const char* fn, const Tensor& input, const Tensor& target,
                                 const Tensor& weight) {
  KILN_CHECK(input.defined() && target.defined(), ValueError, fn, ": input and target must be defined");
  KILN_CHECK(input.is_floating_point(), Error, fn, ": expected a floating-point input, got ",
             dtype_name(input.dtype()));
  KILN_CHECK(target.dtype() == DType::I64 || target.dtype() == DType::I32, Error, fn,
             ": expected class-index targets of dtype int64, got ", dtype_name(target.dtype()),
             " (class-probability targets must have the input's shape)");
  KILN_CHECK(input.dim() >= 1, ShapeError, fn, ": expected an input [N, C, *] or [C], got a 0-d tensor");
  CheckedTarget r;
  r.unbatched = input.dim() == 1;
  r.input = r.unbatched ? unsqueeze(input, 0) : input;
  Tensor t = target.dtype() == DType::I64 ? target : target.to(DType::I64);
  if (r.unbatched) {
    KILN_CHECK(t.dim() == 0, ShapeError, fn, ": an unbatched input [C] needs a 0-d target, got shape ",
               shape_str(t.shape()));
    t = reshape(t, {1});
  }
  Shape want = r.input.shape();
  want.erase(want.begin() + 1);
  KILN_CHECK(t.shape() == want, ShapeError, fn, ": expected target of shape ", shape_str(want),
             " for input of shape ", shape_str(input.shape()), ", got ", shape_str(target.shape()));
  const int64_t c = r.input.size(1);
  KILN_CHECK(!weight.defined() || weight.shape() == Shape{c}, ShapeError, fn,
             ": expected a weight tensor of shape [", c, "], got ", shape_str(weight.shape()));
  r.target = t;
  return r;
}

// The nll_loss op (one pass over the targets) serves every call but two: BatchMean (an
// error below) and class weights that require grad, which the op gives no gradient (as
// PyTorch) while the composite below does.
bool fused_nll_applies(const Tensor& weight, Reduction reduction) {
  return reduction != Reduction::BatchMean &&
         !(weight.defined() && autograd::is_grad_enabled() && autograd::requires_grad(weight));
}

Tensor fused_nll(const char* fn, const Tensor& input, const Tensor& target, const Tensor& weight,
                 int64_t ignore_index, Reduction reduction) {
  const CheckedTarget ct = check_index_target(fn, input, target, weight);
  const Tensor& x = ct.input;
  const int64_t n = x.size(0), c = x.size(1);
  int64_t d = 1;
  for (int64_t i = 2; i < x.dim(); ++i) d *= x.size(i);
  const auto r = reduction == Reduction::None  ? ops::NllReduction::None
                 : reduction == Reduction::Sum ? ops::NllReduction::Sum
                                               : ops::NllReduction::Mean;
  Tensor loss = ops::nll_loss_op(reshape(x, {n, c, d}), reshape(ct.target, {n, d}),
                                 weight.defined() ? weight.to(x.dtype()) : weight, r,
                                 ignore_index)
                    .first;
  if (reduction != Reduction::None) return loss;
  return ct.unbatched ? reshape(loss, {}) : reshape(loss, ct.target.shape());
}

// Class-index targets prepared for the composite form (label smoothing, weights that
// require grad).
struct IndexTarget {
  Tensor input;   // [N, C, d...] (an unbatched [C] input gets N = 1)
  Tensor target;  // [N, d...] int64
  Tensor valid;   // target != ignore_index
  Tensor weight;  // [N, d...]: weight of the target class, 0 where ignored
  bool unbatched = false;
};

IndexTarget prepare(const char* fn, const Tensor& input, const Tensor& target,
                    const Tensor& weight, int64_t ignore_index) {
  const CheckedTarget ct = check_index_target(fn, input, target, weight);
  IndexTarget r;
  r.unbatched = ct.unbatched;
  r.input = ct.input;
  const int64_t c = r.input.size(1);
  r.valid = ne(ct.target, Scalar(ignore_index));
  r.target = where(r.valid, ct.target, Scalar(int64_t(0)));
  if (r.target.numel() > 0) {
    int64_t lo = amin(r.target).item<int64_t>(), hi = amax(r.target).item<int64_t>();
    KILN_CHECK(lo >= 0 && hi < c, IndexError, fn, ": target ", lo < 0 ? lo : hi,
               " is out of bounds for ", c, " classes");
  }
  // The target class's weight by lookup (a one-hot mask of [N, C, d...] cost a language
  // model's whole vocabulary per token: 411 MB of int64 for 1024 tokens of GPT-2).
  Tensor valid_f = r.valid.to(input.dtype());
  if (weight.defined()) {
    Tensor w = index_select(weight.to(input.dtype()), 0, reshape(r.target, {-1}));
    r.weight = reshape(w, r.target.shape()) * valid_f;
  } else {
    r.weight = valid_f;
  }
  return r;
}

// The loss of class-index targets from log-probabilities (weights and ignore_index applied).
Tensor nll_from(const IndexTarget& it, Reduction reduction, const char* fn) {
  Tensor picked = gather(it.input, 1, unsqueeze(it.target, 1)).squeeze(1);
  Tensor loss = -(picked * it.weight);
  switch (reduction) {
    case Reduction::None: return it.unbatched ? reshape(loss, {}) : loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return sum(loss) / sum(it.weight);
    case Reduction::BatchMean: break;
  }
  return reduce(loss, reduction, fn);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  if (fused_nll_applies(o.weight, o.reduction))
    return fused_nll("nll_loss", input, target, o.weight, o.ignore_index, o.reduction);
  IndexTarget it = prepare("nll_loss", input, target, o.weight, o.ignore_index);
  return nll_from(it, o.reduction, "nll_loss");
}

Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in,
                     const CrossEntropyOptions& o_in) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  CrossEntropyOptions o = o_in;
  o.weight = f32_under_autocast(o.weight);
  const char* fn = "cross_entropy";
  KILN_CHECK(input.defined() && target.defined(), ValueError, fn, ": input and target must be defined");
  KILN_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, ValueError, fn,
             ": label_smoothing must be between 0.0 and 1.0, got ", o.label_smoothing);
  KILN_CHECK(input.dim() >= 1, ShapeError, fn, ": expected an input [N, C, *] or [C], got a 0-d tensor");
  int64_t class_dim = input.dim() == 1 ? 0 : 1;
  int64_t c = input.size(class_dim);
  double ls = o.label_smoothing;
  // Training on [N, C] float32 / bfloat16 CPU logits with class indices: one op that never
  // forms the log-probabilities (decision 0126).
  if (!target.is_floating_point() && ls == 0 && !o.weight.defined() && input.dim() == 2 &&
      input.device().is_cpu() && (input.dtype() == DType::F32 || input.dtype() == DType::BF16) &&
      o.reduction != Reduction::BatchMean && autograd::is_grad_enabled() &&
      autograd::requires_grad(input)) {
    const CheckedTarget ct = check_index_target(fn, input, target, o.weight);
    const auto r = o.reduction == Reduction::None ? ops::NllReduction::None
                   : o.reduction == Reduction::Sum ? ops::NllReduction::Sum
                                                   : ops::NllReduction::Mean;
    return std::get<0>(ops::cross_entropy_rows(input, ct.target, r, o.ignore_index));
  }
  Tensor logp = kiln::log_softmax(input, class_dim);
  if (target.is_floating_point()) {
    // Class probabilities.
    KILN_CHECK(target.shape() == input.shape(), ShapeError, fn, ": class-probability targets "
               "must have the input's shape ", shape_str(input.shape()), ", got ",
               shape_str(target.shape()));
    KILN_CHECK(o.ignore_index < 0, ValueError, fn, ": ignore_index is not supported for "
               "floating point (class-probability) targets");
    KILN_CHECK(!o.weight.defined() || o.weight.shape() == Shape{c}, ShapeError, fn,
               ": expected a weight tensor of shape [", c, "], got ", shape_str(o.weight.shape()));
    Tensor t = ls > 0 ? target * (1 - ls) + ls / double(c) : target;
    Tensor prod = logp * t;
    if (o.weight.defined()) prod = prod * class_weight(o.weight.to(input.dtype()), input, class_dim);
    switch (o.reduction) {
      case Reduction::None: return -sum(prod, {class_dim});
      case Reduction::Sum: return -sum(prod);
      case Reduction::Mean: return -sum(prod) / double(input.numel() / (c == 0 ? 1 : c));
      case Reduction::BatchMean: break;
    }
    return reduce(prod, o.reduction, fn);
  }
  if (ls == 0 && fused_nll_applies(o.weight, o.reduction))
    return fused_nll(fn, logp, target, o.weight, o.ignore_index, o.reduction);
  IndexTarget it = prepare(fn, logp, target, o.weight, o.ignore_index);
  Tensor nll = nll_from(it, o.reduction, fn);
  if (ls == 0) return nll;
  // Label smoothing: the uniform part of the target, -sum_c w_c logp_c per sample.
  Tensor lp = it.input;
  if (o.weight.defined()) lp = lp * class_weight(o.weight.to(input.dtype()), lp, 1);
  Tensor smooth = where(it.valid, -sum(lp, {1}), Scalar(0.0));
  Tensor ret;
  switch (o.reduction) {
    case Reduction::None: ret = it.unbatched ? reshape(smooth, {}) : smooth; break;
    case Reduction::Sum: ret = sum(smooth); break;
    case Reduction::Mean: ret = sum(smooth) / sum(it.weight); break;
    case Reduction::BatchMean: return reduce(smooth, o.reduction, fn);
  }
  return nll * (1 - ls) + ret * (ls / double(c));
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  check_pair("mse_loss", input, target);
  Tensor d = input - target;
  return reduce(d * d, reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  check_pair("l1_loss", input, target);
  return reduce(abs(input - target), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                      double beta) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  check_pair("smooth_l1_loss", input, target);
  KILN_CHECK(beta >= 0, ValueError, "smooth_l1_loss: beta must be non-negative, got ", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  Tensor d = input - target, ad = abs(d);
  Tensor loss = where(lt(ad, Scalar(beta)), d * d * (0.5 / beta), add(ad, Scalar(-0.5 * beta)));
  return reduce(loss, reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                  double delta) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  check_pair("huber_loss", input, target);
  KILN_CHECK(delta > 0, ValueError, "huber_loss: delta must be positive, got ", delta);
  Tensor d = input - target, ad = abs(d);
  Tensor loss = where(lt(ad, Scalar(delta)), d * d * 0.5, add(ad, Scalar(-0.5 * delta)) * delta);
  return reduce(loss, reduction, "huber_loss");
}

Tensor binary_cross_entropy(const Tensor& input_in, const Tensor& target_in,
                            const Tensor& weight_in, Reduction reduction) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  const Tensor weight = f32_under_autocast(weight_in);
  check_pair("binary_cross_entropy", input, target);
  if (input.numel() > 0) {
    double lo = amin(input).item<double>(), hi = amax(input).item<double>();
    KILN_CHECK(lo >= 0 && hi <= 1, ValueError, "binary_cross_entropy: all elements of input "
               "should be between 0 and 1, got values in [", lo, ", ", hi, "]");
  }
  // As PyTorch: each log is clamped at -100 so that p = 0 or 1 gives a finite loss.
  // One op per statement, so temporaries are freed early (see the logits form below).
  Tensor log_p = clamp(log(input), Scalar(-100.0), std::nullopt);
  Tensor log_1mp = clamp(log1p(-input), Scalar(-100.0), std::nullopt);
  Tensor loss = target * log_p;
  log_p = Tensor();
  log_1mp = (1 - target) * log_1mp;
  loss = loss + log_1mp;
  log_1mp = Tensor();
  loss = -loss;
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in,
                                        const BCEWithLogitsOptions& o_in) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  BCEWithLogitsOptions o = o_in;
  o.weight = f32_under_autocast(o.weight);
  o.pos_weight = f32_under_autocast(o.pos_weight);
  check_pair("binary_cross_entropy_with_logits", input, target);
  // log(1 + exp(-|x|)) + max(-x, 0) = -log(sigmoid(x)), computed without overflow. One
  // statement per op (as in binary_cross_entropy and kl_div above), so that each temporary
  // is freed as soon as the next op has read it. Written as one expression, C++ kept all
  // seven alive to its end (28 MB for a [2048, 512] float32 input, more than the L3), and
  // the loss took 3.8 ms against PyTorch's 1.0.
  Tensor log1p_exp = abs(input);
  log1p_exp = neg(log1p_exp);
  log1p_exp = exp(log1p_exp);
  log1p_exp = log1p(log1p_exp);
  // max(x, 0) as maximum with a zero (its derivative at a tie is 1/2, relu's is 0): with
  // |x|'s derivative 0 at 0, the gradient at x = 0 is then sigmoid(0) - target, as PyTorch.
  const Tensor zero = scalar_tensor(0, TensorOptions(input.dtype(), input.device()));
  Tensor loss;
  if (o.pos_weight.defined()) {
    Tensor log_weight = (o.pos_weight - 1) * target + 1;
    Tensor softplus_neg = kiln::maximum(-input, zero);
    softplus_neg = softplus_neg + log1p_exp;
    log1p_exp = Tensor();
    loss = (1 - target) * input;
    loss = loss + log_weight * softplus_neg;
  } else {
    loss = kiln::maximum(input, zero);
    loss = loss - input * target;
    loss = loss + log1p_exp;
  }
  if (o.weight.defined()) loss = loss * o.weight;
  return reduce(loss, o.reduction, "binary_cross_entropy_with_logits");
}

Tensor kl_div(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
              bool log_target) {
  const Tensor input = f32_under_autocast(input_in);
  const Tensor target = f32_under_autocast(target_in);
  check_pair("kl_div", input, target);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 * log 0 = 0 (and a finite gradient there).
    Tensor zero = eq(target, Scalar(0.0));
    Tensor xlogy = where(zero, Scalar(1.0), target);
    xlogy = log(xlogy);
    xlogy = target * xlogy;
    xlogy = where(zero, Scalar(0.0), xlogy);
    loss = target * input;
    loss = xlogy - loss;
  }
  if (reduction == Reduction::BatchMean)
    return input.dim() == 0 ? sum(loss) : sum(loss) / double(input.size(0));
  return reduce(loss, reduction, "kl_div");
}

}  // namespace kiln::nn::functional
