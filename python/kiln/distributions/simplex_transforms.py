"""Transforms onto the simplex: Softmax (not bijective) and StickBreaking."""
import kiln
import kiln.nn.functional as F

from . import constraints
from .utils import _logsigmoid
from .elementwise_transforms import _clipped_sigmoid
from .transform_base import Transform

__all__ = ["SoftmaxTransform", "StickBreakingTransform"]


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex by softmax (not bijective: logits are defined up
    to an additive constant; the inverse returns log y)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def __hash__(self):
        return hash(SoftmaxTransform)

    def _call(self, x):
        logprobs = x
        probs = (logprobs - logprobs.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape


class StickBreakingTransform(Transform):
    """Bijection from R^K to the K+1 simplex by stick breaking: z_k = sigmoid(x_k - log(K -
    k)) is the fraction of the remaining stick taken by coordinate k. The offset makes x = 0
    map to the uniform point of the simplex."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    def __hash__(self):
        return hash(StickBreakingTransform)

    def _call(self, x):
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(y_crop.shape[-1]).cumsum(-1)
        sf = 1 - y_crop.cumsum(-1)
        # The remaining stick can round to 0 at the end; keep the log finite.
        sf = kiln.clamp(sf, min=kiln.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        x = x - offset.log()
        # The Jacobian is triangular with diagonal z_k (1 - z_k) * remaining stick_k; in
        # log space that is -x + logsigmoid(x) + log y_k.
        return (-x + _logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return kiln.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return kiln.Size(tuple(shape[:-1]) + (shape[-1] - 1,))
