#pragma once
// nn::functional: the rest of torch.nn.functional's activations, and the small layers built
// from them (normalize, cosine similarity, pairwise distance, pixel shuffles, instance norm,
// channel dropout). Each is a composition of kiln ops, so autograd differentiates it; the
// forms are PyTorch's (its formulas, thresholds and defaults), so results agree with
// torch.nn.functional to rounding. Branches that are not taken never reach an infinity
// (expm1 of min(x, 0)), so their zero gradients stay zero instead of becoming NaN.
#include <optional>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

// --- activations -------------------------------------------------------------------------
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);                       // hardtanh(x, 0, 6)
Tensor hardsigmoid(const Tensor& x);                 // clamp(x / 6 + 1 / 2, 0, 1)
Tensor hardswish(const Tensor& x);                   // x * hardsigmoid(x)
Tensor elu(const Tensor& x, double alpha = 1.0);     // x > 0 ? x : alpha (e^x - 1)
Tensor selu(const Tensor& x);                        // scale * elu(x, alpha), fixed constants
Tensor celu(const Tensor& x, double alpha = 1.0);    // x > 0 ? x : alpha (e^(x / alpha) - 1)
Tensor mish(const Tensor& x);                        // x tanh(softplus(x))
Tensor logsigmoid(const Tensor& x);                  // min(x, 0) - log1p(e^-|x|)
Tensor softsign(const Tensor& x);                    // x / (1 + |x|)
Tensor tanhshrink(const Tensor& x);                  // x - tanh(x)
Tensor softshrink(const Tensor& x, double lambd = 0.5);  // ValueError for lambd < 0
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
// x > threshold ? x : value
Tensor threshold(const Tensor& x, double threshold, double value);
// a * sigmoid(b) for the two halves a, b of x along dim (its size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// x > 0 ? x : weight * x; weight [1] or [C] (C = x.size(1), the channel dim).
Tensor prelu(const Tensor& x, const Tensor& weight);
// Randomised leaky ReLU: in training, each negative element's slope is drawn uniformly from
// [lower, upper]; in eval, the slope is (lower + upper) / 2.
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3,
             bool training = false, Generator* gen = nullptr);
Tensor softmin(const Tensor& x, int64_t dim);        // softmax(-x, dim)

// --- small layers ------------------------------------------------------------------------
// x / max(||x||_p over dim, eps)
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// sum over dim of (x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)), x1 and x2 broadcast.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);
// [*, C r^2, H, W] -> [*, C, H r, W r], and back.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// x [N, C, *] normalised per sample and channel over *. With running statistics and
// use_input_stats, they are updated with the mean of the per-sample statistics (PyTorch's
// rule); without use_input_stats, the running statistics normalise (they must be given).
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
// Zeroes whole channels (x [N, C, *] or [C, *]) with probability p in training, scaling the
// others by 1 / (1 - p): dropout1d / dropout2d / dropout3d, which differ only in the ranks
// they accept (feature_dims: 1, 2 or 3 dims after the channel).
Tensor feature_dropout(const Tensor& x, double p, bool training, int64_t feature_dims,
                       const char* name, Generator* gen = nullptr);

}  // namespace kiln::nn::functional
