#pragma once
// Indexing and shape-building ops. Out-of-range indices are IndexError, never a read or
// write outside a tensor.
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Two positions along dim blended: out.select(dim, j) = lerp(x.select(dim, index0[j]),
// x.select(dim, index1[j]), weight[j]) for int64 index vectors and a weight vector of x's
// (floating) dtype, all of one length; PyTorch's lerp formula. One pass for what
// lerp(index_select(x, dim, index0), index_select(x, dim, index1), weight) computes in three
// (interpolate's linear modes). Differentiable in x.
Tensor index_lerp(const Tensor& x, int64_t dim, const Tensor& index0, const Tensor& index1,
                  const Tensor& weight);
// index_lerp along dim, then along dim + 1 (index2, index3, weight2), in one pass and with
// the same values as the two calls on x widened to float32 (16-bit floats: blended in float32,
// rounded once): the intermediate rows stay in registers and a per-thread row instead of a
// tensor. Both weight vectors are of x's computation dtype (float64 for float64, else
// float32). CPU only, and not differentiable: bilinear interpolation without a gradient.
Tensor index_lerp2(const Tensor& x, int64_t dim, const Tensor& index0, const Tensor& index1,
                   const Tensor& weight, const Tensor& index2, const Tensor& index3,
                   const Tensor& weight2);
// index_lerp's gradient with respect to x (of size `size` along dim): zeros with
// grad.select(dim, j) added at index0[j] times 1 - weight[j] and at index1[j] times weight[j],
// summed in the computation type (float32 for 16-bit floats). CPU only, not differentiable:
// autograd's first derivative of index_lerp.
Tensor index_lerp_backward(const Tensor& grad, int64_t dim, int64_t size, const Tensor& index0,
                           const Tensor& index1, const Tensor& weight);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// reduce: "sum", "prod", "mean", "amax", "amin"
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
// Advanced indexing: indices[i] indexes dim i (undefined = take the whole dim, like ':');
// integer (int64/int32) or bool (mask) tensors, broadcast together, as x[i0, i1, ...].
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);  // [n, ndim] int64

Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});
// pad: pairs (last dim first) as torch.nn.functional.pad; mode "constant", "reflect", "replicate".
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode = "constant",
           double value = 0);
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

// Sorting and selection.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
// unique (sorted): values, inverse indices and counts (the latter two empty when not asked).
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true,
                                          bool return_inverse = false, bool return_counts = false,
                                          std::optional<int64_t> dim = std::nullopt);

}  // namespace kiln
