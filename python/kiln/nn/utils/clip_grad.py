"""clip_grad_norm_ / clip_grad_value_ over kiln::nn::utils (gradients scaled in place)."""
import math

from ... import _C


def _params(parameters):
    if isinstance(parameters, _C.Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scales the gradients so that their total norm is at most max_norm; returns the total
    norm before clipping (a 0-d tensor)."""
    norm_type = float(norm_type)
    ps = [p for p in _params(parameters) if p.grad is not None]
    if not ps:
        return _C.tensor(0.0)
    if norm_type == math.inf:
        norm_type = math.inf
    return _C._nn.clip_grad_norm_(ps, float(max_norm), norm_type, bool(error_if_nonfinite))


def clip_grad_value_(parameters, clip_value, foreach=None):
    ps = [p for p in _params(parameters) if p.grad is not None]
    if ps:
        _C._nn.clip_grad_value_(ps, float(clip_value))
