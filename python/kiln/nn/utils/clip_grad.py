"""clip_grad_norm_ / clip_grad_value_ over kiln::nn::utils (gradients scaled in place);
get_total_norm / clip_grads_with_norm_ (the two halves of clip_grad_norm_, for norms taken
over several groups) composed in Python."""
import math
import warnings

from ... import _C, linalg
from ...autograd import no_grad


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


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all the tensors seen as one vector (the norm of their norms), as a 0-d
    tensor; torch.tensor(0.) for none."""
    tensors = _params(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _C.tensor(0.0)
    with no_grad():
        norms = [linalg.vector_norm(t, norm_type) for t in tensors]
        first_device = tensors[0].device
        total = linalg.vector_norm(_C.stack([n.to(first_device) for n in norms]),
                                      norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients by min(max_norm / (total_norm + 1e-6), 1), total_norm given
    (e.g. from get_total_norm over several groups)."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        scale = _C.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale.to(g.device))


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of clip_grad_norm_ (warns, as torch)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
