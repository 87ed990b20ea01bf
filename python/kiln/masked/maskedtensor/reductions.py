"""Reductions of MaskedTensor: sum, mean, amin, amax, argmin, argmax, prod, all, norm, var,
std. Each runs the kiln.masked function of the same name on (data, mask); the result is a
MaskedTensor whose elements are specified where at least one reduced element was (with no
argument: everything reduced, specified if any element is). Plus the normalizations
softmax / log_softmax / softmin along a dim, which keep the mask."""
import kiln

from .. import _normalizations, _reductions, _var
from .._mask import _canonical_dim


def _any_over(mask, dim, keepdim):
    """Where the reduction of mask over dim has at least one True."""
    for d in reversed(_canonical_dim(dim, mask.dim())):
        mask = mask.any(dim=d, keepdim=keepdim)
    return mask


def _masked_all(data, mask, dim=None, keepdim=False):
    """all() that skips masked-out elements (they count as True)."""
    filled = data.masked_fill(~mask, True)
    if dim is None:
        return filled.all()
    return kiln.all(filled, dim=dim, keepdim=keepdim)


class ReductionOps:
    """Mixin of MaskedTensor: the reductions."""

    def _reduced(self, result, dim, keepdim):
        return self._wrap(result, _any_over(self._masked_mask, dim, keepdim))

    def _reduce(self, fn, dim, keepdim, dtype, **kwargs):
        result = fn(self._masked_data, dim, keepdim=keepdim, dtype=dtype,
                    mask=self._masked_mask, **kwargs)
        return self._reduced(result, dim, keepdim)

    def sum(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.sum, dim, keepdim, dtype)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.mean, dim, keepdim, dtype)

    def prod(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.prod, dim, keepdim, dtype)

    def amax(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.amax, dim, keepdim, dtype)

    def amin(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.amin, dim, keepdim, dtype)

    def argmax(self, dim=None, keepdim=False, dtype=None):
        """Index (cast to dtype, default the data's) of the largest specified element."""
        return self._reduce(_reductions.argmax, dim, keepdim, dtype)

    def argmin(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(_reductions.argmin, dim, keepdim, dtype)

    def all(self, dim=None, keepdim=False):
        result = _masked_all(self._masked_data, self._masked_mask, dim, keepdim)
        return self._reduced(result, dim, keepdim)

    def norm(self, p=2.0, dim=None, keepdim=False, dtype=None):
        """The vector p-norm of the specified elements (torch's MaskedTensor.norm fails)."""
        result = _reductions.norm(self._masked_data, p, dim, keepdim=keepdim, dtype=dtype,
                                  mask=self._masked_mask)
        return self._reduced(result, dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, dtype=None):
        """Variance of the specified elements, with Tensor.var's argument order (torch's
        MaskedTensor reads var(dim, x) as keepdim=x)."""
        result = _var.var(self._masked_data, dim, unbiased, correction=correction,
                          keepdim=keepdim, dtype=dtype, mask=self._masked_mask)
        return self._reduced(result, dim, keepdim)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, dtype=None):
        result = _var.std(self._masked_data, dim, unbiased, correction=correction,
                          keepdim=keepdim, dtype=dtype, mask=self._masked_mask)
        return self._reduced(result, dim, keepdim)

    def softmax(self, dim, dtype=None):
        """softmax over the specified elements along dim; the mask is kept."""
        return self._wrap(_normalizations.softmax(self._masked_data, dim, dtype=dtype,
                                                  mask=self._masked_mask), self._masked_mask)

    def log_softmax(self, dim, dtype=None):
        return self._wrap(_normalizations.log_softmax(self._masked_data, dim, dtype=dtype,
                                                      mask=self._masked_mask),
                          self._masked_mask)

    def softmin(self, dim, dtype=None):
        return self._wrap(_normalizations.softmin(self._masked_data, dim, dtype=dtype,
                                                  mask=self._masked_mask), self._masked_mask)
