#pragma once
// nn::functional::scaled_dot_product_attention, as torch.nn.functional's: a composition of
// kiln ops (matmul, where, softmax, dropout), so autograd differentiates it.
#include <optional>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

// softmax(q @ k^T * scale + bias) @ v over the last two dims; the leading dims broadcast.
//   q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; one floating dtype.
//   attn_mask: bool (true = may attend) or floating (added to the scores, cast to q's
//     dtype first, as PyTorch adds it in place), broadcastable to [..., L, S].
//   is_causal: query i attends keys 0..i (top-left aligned, tril of an L x S matrix as
//     PyTorch); ValueError together with an attn_mask.
//   scale: unset -> 1 / sqrt(E).
//   dropout_p: dropout on the attention weights, always applied when > 0 (as PyTorch:
//     the caller passes 0 in eval mode); gen: the generator it draws from.
//   enable_gqa: k and v may have fewer heads (dim -3) than q, a divisor of q's; each
//     key/value head serves q.size(-3) / k.size(-3) consecutive query heads.
// A query row whose keys are all masked out (bool mask all false, or all -inf) gives 0,
// not NaN, and passes no gradient back, as PyTorch 2.5+ (_safe_softmax).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr, bool enable_gqa = false);

// softmax over dim, except that slices where every input is -inf give 0 instead of NaN
// (and a zero gradient): the softmax attention uses.
Tensor safe_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln::nn::functional
