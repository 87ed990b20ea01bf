"""kiln.masked.maskedtensor: MaskedTensor and its factories.

What a MaskedTensor supports (a plain Python object, not a kiln.Tensor subclass, so kiln
functions such as kiln.exp or kiln.cat do not take it; use its methods):
  - construction: MaskedTensor / masked_tensor (copies, a leaf; requires_grad=...) and
    as_masked_tensor (differentiable); the same checks and messages as torch
  - get_data, get_mask, to_tensor(fill), is_masked_tensor, shape/size/dim/ndim/numel/len,
    dtype, device, item, printing in torch's format
  - elementwise: torch's unary list (exp, log, abs, clamp, pow, ...) and binary list (add,
    mul, div, maximum, comparisons, ...), their in-place forms, and the Python operators
    (binary operands must have equal masks)
  - reductions: sum, mean, prod, amax, amin, argmax, argmin, all, norm, var, std (no
    argument: over everything), and softmax / log_softmax / softmin along a dim
  - shape: indexing, transpose, t, view, reshape, expand, unsqueeze, split, unfold; to,
    float, double, half, int, long, bool, detach, clone, contiguous
  - autograd on the data: requires_grad, is_leaf, grad (a MaskedTensor), backward
Not covered: sparse layouts, kiln.where / kiln.cat / kiln.stack on MaskedTensors.
"""
from .core import MaskedTensor, is_masked_tensor
from .creation import as_masked_tensor, masked_tensor

__all__ = ["MaskedTensor", "as_masked_tensor", "is_masked_tensor", "masked_tensor"]
