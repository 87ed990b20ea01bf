"""kiln.masked, as torch.masked: reductions and normalizations that only see the elements a
boolean mask selects (the mask broadcasts to the input), and MaskedTensor, data with a mask.

Masked-out elements enter an operation as its identity (0 for sum, 1 for prod, -inf for amax
and softmax, +inf for amin and softmin, NaN for median), so a slice with nothing masked in
reduces to that identity; mean, var and std give NaN there. Only strided (dense) tensors:
kiln has no sparse layouts.

    _mask.py            dims, mask broadcasting, identities, filling (torch's private helpers)
    _reductions.py      sum, prod, amax, amin, argmax, argmin, logsumexp, norm, median, mean
    _var.py             var, std
    _normalizations.py  softmax, log_softmax, softmin, normalize, cumsum, cumprod, logaddexp
    maskedtensor/       MaskedTensor, masked_tensor, as_masked_tensor, is_masked_tensor
"""
from . import maskedtensor  # noqa: F401
from ._mask import (_canonical_dim, _combine_input_and_mask, _input_mask,  # noqa: F401
                    _output_mask, _reduction_identity, _where)
from ._normalizations import (cumprod, cumsum, log_softmax, logaddexp, normalize,  # noqa: F401
                              softmax, softmin)
from ._reductions import (amax, amin, argmax, argmin, logsumexp, mean, median,  # noqa: F401
                          norm, prod, sum)
from ._var import std, var  # noqa: F401
from .maskedtensor import (MaskedTensor, as_masked_tensor, is_masked_tensor,  # noqa: F401
                           masked_tensor)

__all__ = ["amax", "amin", "argmax", "argmin", "as_masked_tensor", "cumprod", "cumsum",
           "is_masked_tensor", "log_softmax", "logaddexp", "logsumexp", "masked_tensor",
           "MaskedTensor", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]
