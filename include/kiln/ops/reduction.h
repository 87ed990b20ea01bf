#pragma once
// Reductions over any set of dims (empty dims = all dims), with keepdim, as PyTorch.
#include <optional>
#include <tuple>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

using Dims = std::vector<int64_t>;

// sum/prod of bool and integer tensors give int64, as PyTorch; dtype overrides.
Tensor sum(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x);  // floating inputs only (TypeError otherwise), as PyTorch
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor prod(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// max/min without dim: the value; with dim: (values, indices). NaN propagates.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// var/std with Bessel-style correction (default 1).
Tensor var(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
// p-norm (p = 2 default; inf and -inf supported; p = 0 counts nonzeros).
Tensor norm(const Tensor& x, double p = 2, const Dims& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace kiln
