"""CorrCholeskyTransform: unconstrained vectors of length D (D - 1) / 2 to Cholesky factors of
D x D correlation matrices (lower triangular, positive diagonal, rows of unit norm).

Row i of the factor is built by a signed stick breaking over its strictly-lower entries:
r = tanh(x) in (-1, 1) says which fraction of the remaining squared length (the "stick")
entry j takes, with its sign, y_ij = r_ij * sqrt(stick before j); the diagonal takes the rest.
Because y_ij depends on x_ik only for k <= j, the Jacobian of x -> strict lower triangle of y
is triangular, with diagonal (1 - r_ij^2) * sqrt(stick before j). (Domain and codomain have
different dimensions, so log|det J| is that of x against the flattened strict triangle.)"""
import math

import kiln
import kiln.nn.functional as F

from . import constraints
from .transform_base import Transform
from .utils import tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CorrCholeskyTransform"]


class CorrCholeskyTransform(Transform):
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def __hash__(self):
        return hash(CorrCholeskyTransform)

    def _call(self, x):
        eps = kiln.finfo(x.dtype).eps
        # |r| < 1 strictly, so that every remaining stick stays positive.
        r = kiln.tanh(x).clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(r, diag=-1)
        # sqrt of the stick left after entries 0..j of each row (1 above the diagonal,
        # where r = 0), shifted right by one: the stick available to entry j.
        stick_sqrt = (1 - r * r).sqrt().cumprod(-1)
        stick_before = F.pad(stick_sqrt[..., :-1], [1, 0], value=1.0)
        eye = kiln.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        # The diagonal (r_ii = 1 after adding eye) takes all of what is left.
        return (r + eye) * stick_before

    def _inverse(self, y):
        # Stick before entry j: 1 - sum_{k<j} y_ik^2.
        stick_after = 1 - (y * y).cumsum(-1)
        stick_before = F.pad(stick_after[..., :-1], [1, 0], value=1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(stick_before, diag=-1).sqrt()
        return kiln.atanh(t)

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        # Sum over strictly-lower (i, j) of 0.5 log(stick before j): the stick before j is
        # the stick after j - 1, i.e. the entries (i, j - 1) with j - 1 <= i - 2.
        stick_after = 1 - (y * y).cumsum(-1)
        stick_logdet = 0.5 * tril_matrix_to_vec(stick_after, diag=-2).log().sum(-1)
        # log(1 - tanh(x)^2), in the form that stays finite for large |x|.
        tanh_logdet = 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x)).sum(-1)
        return stick_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return kiln.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return kiln.Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))
