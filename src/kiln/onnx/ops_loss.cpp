// Loss operators (ONNX functions, computed directly): NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss, with per-class weights, ignore_index and none/sum/mean reduction
// (mean divides by the total weight of the counted targets).
#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

// log_prob [N, C, d...], target [N, d...].
Tensor nll(const OpContext& ctx, const Tensor& log_prob, const Tensor& target_in, const Tensor& weight) {
  KILN_CHECK(log_prob.dim() >= 2 && target_in.dim() == log_prob.dim() - 1, ShapeError, "input ",
             shape_str(log_prob.shape()), " must be [N, C, d...] and target ", shape_str(target_in.shape()),
             " [N, d...]");
  Tensor target = cast(target_in, DType::I64);
  Tensor keep = ones_like(target, DType::Bool);
  if (ctx.has_attr("ignore_index")) keep = ne(target, ctx.attr_int("ignore_index"));
  Tensor safe = where(keep, target, zeros_like(target));
  Tensor picked = squeeze(gather(log_prob, 1, unsqueeze(safe, 1)), {1});
  Tensor w = weight.defined() ? reshape(index_select(weight, 0, reshape(safe, Shape{safe.numel()})), safe.shape())
                              : ones_like(picked);
  w = mul(w, cast(keep, w.dtype()));
  Tensor loss = neg(mul(picked, w));
  const std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  KILN_CHECK(reduction == "mean", ValueError, "reduction must be none, sum or mean, got ", quoted(reduction));
  return div(sum(loss), sum(w));
}

std::vector<Tensor> op_nll_loss(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  return one(cast(nll(ctx, x, ctx.input(1), ctx.has_input(2) ? ctx.input(2) : Tensor()), x.dtype()));
}

std::vector<Tensor> op_softmax_cross_entropy(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor log_prob = log_softmax(x, 1);
  Tensor loss = nll(ctx, log_prob, ctx.input(1), ctx.has_input(2) ? ctx.input(2) : Tensor());
  return {cast(loss, x.dtype()), log_prob};
}

}  // namespace

void register_loss_ops(OpTable& t) {
  t.add("NegativeLogLikelihoodLoss", op_nll_loss);
  t.add("SoftmaxCrossEntropyLoss", op_softmax_cross_entropy);
}

}  // namespace kiln::onnx
