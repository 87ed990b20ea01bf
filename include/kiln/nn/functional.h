#pragma once
// nn::functional: the stateless forms of the layers and the losses, as
// torch.nn.functional. Each is a composition of kiln ops, so autograd differentiates it;
// the numerically stable forms are used (log_softmax inside cross_entropy, the
// max(x, 0) - x*y + log1p(exp(-|x|)) form of BCE with logits).
//
// Unlike PyTorch, the elementwise losses (mse, l1, smooth_l1, huber, bce, bce_with_logits,
// kl_div) require target and input to have the same shape instead of broadcasting them with
// a warning: a [N, 1] vs [N] mix-up is a ShapeError, not a silently wrong loss.
#include <optional>
#include <string>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

// How a loss reduces its per-element values. BatchMean (sum / input.size(0)) is accepted
// by kl_div only.
enum class Reduction { None, Mean, Sum, BatchMean };

// --- layers ------------------------------------------------------------------------------
// x @ weight.T + bias; weight [out, in], bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// y[..., k] = x1[..., :] . weight[k] . x2[..., :] + bias[k]; weight [out, in1, in2].
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight,
                const Tensor& bias = Tensor());
// Rows of weight [num, dim] picked by integer indices (any shape) -> [..., dim]. The row
// padding_idx (negative counts from the end) gets no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);
// Normalises over the trailing dims given by normalized_shape (biased variance).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x / sqrt(mean(x^2 over the trailing dims) + eps) * weight; eps unset: the machine epsilon
// of x's dtype, as PyTorch.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// x [N, C, *] normalised over groups of C / num_groups channels; weight, bias [C].
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x [N, C, *]. training: normalise with the batch statistics (biased variance) and, when
// running_mean/var are defined, update them in place with
// running = (1 - momentum) * running + momentum * batch_stat (unbiased variance);
// otherwise normalise with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// --- activations -------------------------------------------------------------------------
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// --- losses ------------------------------------------------------------------------------
struct NLLLossOptions {
  Tensor weight{};             // [C] per-class weights, or undefined
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// input: log-probabilities [N, C, d1...] or [C]; target: int64 class indices [N, d1...] or
// []. loss_i = -weight[t_i] * input[i, t_i] (0 where t_i == ignore_index); Mean divides
// the sum by the sum of weight[t_i] over the targets not ignored (NaN when all are).
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

struct CrossEntropyOptions {
  Tensor weight{};             // [C] per-class weights, or undefined
  int64_t ignore_index = -100;  // class-index targets only
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};
// input: logits [N, C, d1...] or [C]. target: either int64 class indices ([N, d1...]) or
// class probabilities of the input's shape. PyTorch's semantics throughout, including
// label smoothing and the weighted mean (index targets: divided by the sum of the target
// weights; probability targets: divided by the number of samples).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::Mean, double beta = 1.0);
// 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
// input: probabilities in [0, 1] (ValueError otherwise); the logs are clamped at -100 as in
// PyTorch. weight (optional) broadcasts to the input.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const Tensor& weight = Tensor(), Reduction reduction = Reduction::Mean);
struct BCEWithLogitsOptions {
  Tensor weight{};      // broadcasts to the input
  Tensor pos_weight{};  // weight of the positive term, broadcasts along the last (class) dim
  Reduction reduction = Reduction::Mean;
};
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});
// input: log-probabilities; target: probabilities (or log-probabilities with log_target).
// pointwise target * (log target - input) (0 where target is 0). Reduction::BatchMean
// gives the true KL divergence per sample; Mean averages over all elements (as PyTorch).
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);

}  // namespace kiln::nn::functional
