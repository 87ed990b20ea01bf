"""Muon (Jordan et al. 2024) as torch.optim.Muon (2.13): momentum (an EMA of the gradient,
Nesterov by default) orthogonalised by a quintic Newton-Schulz iteration, decoupled weight
decay, and a step size rescaled by the matrix's shape. Only 2-D parameters.

The Newton-Schulz iteration runs in bfloat16 exactly as torch's: the input is cast to bfloat16,
normalised by its (bfloat16) Frobenius norm, and every matmul / addmm rounds its result to
bfloat16 (kiln's bfloat16 matmul accumulates in float32 and rounds once, as torch's CPU
kernel does), so the orthogonalised update matches torch's bit for bit on the same input. The
update stays bfloat16 and is added to the parameter in the parameter's dtype."""
import math

from .. import _C
from .optimizer import Optimizer, _lerp_, _use_grad

__all__ = ["Muon"]

# Keller Jordan's coefficients (chosen to maximise the slope at zero) and torch's defaults.
_NS_COEFFICIENTS = (3.4445, -4.775, 2.0315)
_EPS = 1e-7
_NS_STEPS = 5


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps):
    """An approximately orthogonal matrix U S' V^T (S' roughly in [0.5, 1.5]) for grad =
    U S V^T, in bfloat16. The iteration runs on the wide orientation (rows <= cols) so that the
    Gram matrix is the smaller one."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    tall = grad.size(0) > grad.size(1)
    # As torch: bfloat16() returns grad itself when it is already bfloat16, so the division
    # below then writes into it (a bfloat16 parameter's momentum buffer, without Nesterov).
    x = grad.bfloat16()
    if tall:
        x = x.T
    # the Frobenius norm bounds the spectral norm: afterwards every singular value is <= 1
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        # b * A + c * A @ A, then a * X + (that) @ X: each one bfloat16 rounding, as addmm
        poly = _C.addmm(gram, gram, gram, beta=b, alpha=c)
        x = _C.addmm(x, poly, x, beta=a)
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, shape):
    """The step size for an A x B matrix: "original" (Keller Jordan) keeps the update's RMS
    independent of A / B; "match_rms_adamw" (Moonshot) makes it about AdamW's."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:  # only reachable by editing a param group after construction (as torch)
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=_NS_COEFFICIENTS, eps=_EPS, ns_steps=_NS_STEPS,
                 adjust_lr_fn=None):
        if isinstance(lr, _C.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        # As torch: checked once here, after the groups are built (add_param_group does not).
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = group["lr"].item() if isinstance(group["lr"], _C.Tensor) else group["lr"]
            wd, momentum = group["weight_decay"], group["momentum"]
            params = [p for p in group["params"] if p.grad is not None]
            # all checks and state creation first, as torch's _init_group
            for p in params:
                if p.is_complex():
                    raise RuntimeError("Muon does not support complex parameters")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = _C.zeros_like(p.grad)
            for p in params:
                grad = p.grad
                if grad.dim() != 2:
                    raise ValueError("Param gradient must be a 2D matrix")
                buf = self.state[p]["momentum_buffer"]
                # an exponential average of the gradients (not torch.optim.SGD's plain sum)
                _lerp_(buf, grad, 1 - momentum)
                update = _C.lerp(grad, buf, momentum) if group["nesterov"] else buf
                update = _zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                     group["ns_steps"], group["eps"])
                adjusted_lr = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-adjusted_lr)
        return loss
