"""Transforms: invertible (or at least forward-computable) maps between constrained spaces,
with log |det J| for the change-of-variables formula used by TransformedDistribution.
torch.distributions.transforms' classes and semantics: `t(x)`, `t.inv(y)`, `t.inv` (a
transform itself), `log_abs_det_jacobian(x, y)`, domain / codomain constraints whose
event_dim says how many rightmost dims one Jacobian covers, optional 1-element caching."""
from .transform_base import (Transform, _InverseTransform, ComposeTransform,  # noqa: F401
                             identity_transform, IndependentTransform, ReshapeTransform)
from .elementwise_transforms import (ExpTransform, PowerTransform, SigmoidTransform,  # noqa: F401
                                     SoftplusTransform, TanhTransform, AbsTransform,
                                     AffineTransform, CumulativeDistributionTransform)
from .simplex_transforms import SoftmaxTransform, StickBreakingTransform  # noqa: F401
from .matrix_transforms import LowerCholeskyTransform, PositiveDefiniteTransform  # noqa: F401
from .cat_transform import CatTransform  # noqa: F401
from .corr_cholesky_transform import CorrCholeskyTransform  # noqa: F401
from .stack_transform import StackTransform  # noqa: F401

__all__ = [
    "AbsTransform", "AffineTransform", "ComposeTransform", "CumulativeDistributionTransform",
    "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
    "PositiveDefiniteTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform",
    "SoftplusTransform", "TanhTransform", "SoftmaxTransform", "StickBreakingTransform",
    "Transform", "identity_transform", "CatTransform", "CorrCholeskyTransform",
    "StackTransform",
]
