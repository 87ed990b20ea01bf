"""Helpers shared by the distributions: parameter broadcasting, probs <-> logits, lazily
computed attributes (torch.distributions.utils' names and behaviour)."""
import numbers
from functools import update_wrapper

import kiln
import kiln.nn.functional as F

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs",
           "lazy_property", "euler_constant"]

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant


def broadcast_all(*values):
    """Broadcast tensors and Python numbers to one shape. Numbers become tensors of the dtype
    and device of the first tensor argument (the default dtype when there is none), so
    Normal(0., scale64) stays float64 as in torch."""
    if not all(isinstance(v, (kiln.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "kiln.Tensor or objects implementing __torch_function__.")
    if all(isinstance(v, numbers.Number) for v in values):
        dtype = kiln.get_default_dtype()
        values = [kiln.tensor(float(v), dtype=dtype) for v in values]
    else:
        ref = next(v for v in values if isinstance(v, kiln.Tensor))
        values = [v if isinstance(v, kiln.Tensor)
                  else kiln.tensor(float(v), dtype=ref.dtype, device=ref.device)
                  for v in values]
    return tuple(kiln.broadcast_tensors(*values))


def _sum_rightmost(value, dim):
    """Sum over the `dim` rightmost dimensions (dim = 0 returns value)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Logits to probabilities: a sigmoid for binary (Bernoulli-like) logits, a softmax over
    the last dimension for categorical ones (logits are unnormalised log-probabilities)."""
    if is_binary:
        return kiln.sigmoid(logits)
    return kiln.softmax(logits, -1)


def clamp_probs(probs):
    """Keep probabilities within [eps, 1 - eps] so that log(p) and log1p(-p) stay finite."""
    eps = kiln.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Probabilities to logits: log(p) - log1p(-p) for binary, log(p) for categorical."""
    p = clamp_probs(probs)
    if is_binary:
        return kiln.log(p) - kiln.log1p(-p)
    return kiln.log(p)


class lazy_property:
    """An attribute computed on first access and then stored on the instance (a plain
    attribute from then on). Used for the parameter that was not given (probs when logits
    were, covariance_matrix when scale_tril was), so it costs nothing unless used. Computed
    with gradients enabled so that it stays differentiable even when first touched under
    no_grad (e.g. inside sample())."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with kiln.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What the class attribute looks like: both a lazy_property (so Distribution's
    validation can tell it was not given) and a property (so documentation tools see it)."""

    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def _rand(shape, like):
    """Uniform [0, 1) draws of `shape` with the dtype and device of `like`."""
    return kiln.rand(tuple(shape), dtype=like.dtype, device=like.device)


def _randn(shape, like):
    """Standard normal draws of `shape` with the dtype and device of `like`."""
    return kiln.randn(tuple(shape), dtype=like.dtype, device=like.device)


def _empty(shape, like):
    return kiln.empty(tuple(shape), dtype=like.dtype, device=like.device)


def _clamp_tiny_st(value):
    """Clamp a sample to at least the smallest normal number of its dtype (a gamma draw can
    underflow to 0, outside the support) without cutting the gradient: the clamp is added as
    a detached correction, so d value / d parameter stays the pathwise derivative (what torch
    gets from clamping the detached storage in place)."""
    tiny = kiln.finfo(value.dtype).tiny
    return value + (value.detach().clamp(min=tiny) - value.detach())


def _logsigmoid(x):
    """log sigmoid(x), elementwise (kiln.nn.functional.logsigmoid, stable in both tails)."""
    return F.logsigmoid(x)


def _bce_with_logits(logits, target):
    """Elementwise binary cross-entropy with logits, softplus(l) - t l, i.e.
    -(t log sigmoid(l) + (1 - t) log sigmoid(-l)); logits and target of one shape."""
    return F.binary_cross_entropy_with_logits(logits, target, reduction="none")



def _tril_positions(n, diag):
    """Flat row-major positions i * n + j of the entries j <= i + diag of an n x n matrix: the
    order torch.distributions.utils uses for its vec <-> tril conversions."""
    return [i * n + j for i in range(n) for j in range(n) if j <= i + diag]


def vec_to_tril_matrix(vec, diag=0):
    """A vector of a lower triangle's entries (row-major, entries j <= i + diag) to n x n
    matrices with zeros elsewhere. Built by index_select from the vector with a zero
    prepended, so it stays differentiable without a masked assignment."""
    length = vec.shape[-1]
    # n from the triangle's size: the positive root of the quadratic in n.
    c = 1 + 2 * diag
    n_float = (-c + (c * c + 8 * length + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    n = round(n_float)
    if abs(n - n_float) > kiln.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {length} which cannot be expressed as "
                         "the lower triangular part of a square D x D matrix.")
    source = [0] * (n * n)  # 0 picks the prepended zero
    for k, p in enumerate(_tril_positions(n, diag)):
        source[p] = k + 1
    index = kiln.tensor(source, dtype=kiln.int64, device=vec.device)
    padded = kiln.cat([vec.new_zeros(tuple(vec.shape[:-1]) + (1,)), vec], -1)
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))


def tril_matrix_to_vec(mat, diag=0):
    """The entries j <= i + diag of the trailing n x n matrices, row-major, as a vector."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    index = kiln.tensor(_tril_positions(n, diag), dtype=kiln.int64, device=mat.device)
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,)).index_select(-1, index)
