"""Matrix transforms: LowerCholesky (positive diagonal by exp) and PositiveDefinite
(L L^T of the LowerCholesky image)."""
import kiln

from . import constraints
from .transform_base import Transform

__all__ = ["LowerCholeskyTransform", "PositiveDefiniteTransform"]


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal: keeps
    the strict lower triangle and exponentiates the diagonal."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def __hash__(self):
        return hash(LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive definite ones: L L^T of the lower Cholesky
    transform's L."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def __hash__(self):
        return hash(PositiveDefiniteTransform)

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        y = kiln.linalg.cholesky(y)
        return LowerCholeskyTransform().inv(y)
