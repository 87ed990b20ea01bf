"""Adafactor (Shazeer & Stern 2018) as torch.optim.Adafactor: the second moment of a parameter
with 2 or more dims is kept factored, as a row and a column running mean of grad^2 over its last
two dims (their outer product over the mean row value estimates it); a 0-d or 1-d parameter keeps
it whole. The step size is relative to the parameter's RMS (at least eps2), the update is clipped
to RMS d, and the running means decay with 1 - step^beta2_decay. Single-tensor update in torch's
operation order (foreach=True computes the same)."""
from .. import _C
from .._composite_factory import finfo
from .optimizer import Optimizer, _lerp_, _step_tensor, _use_grad

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, _C.Tensor) and lr.numel() != 1:
            raise ValueError(f"Tensor lr must be 1-element, got {lr.numel()} elements")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = group["lr"].item() if isinstance(group["lr"], _C.Tensor) else group["lr"]
            beta2_decay, d, wd = group["beta2_decay"], group["d"], group["weight_decay"]
            eps1, eps2 = group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters (got a "
                                       f"{p.dtype} parameter)")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    if p.grad.dim() > 1:
                        # the row means keep the last dim as 1, the column means the one before
                        row_shape = list(p.grad.shape)
                        row_shape[-1] = 1
                        state["row_var"] = _C.zeros(row_shape, dtype=p.grad.dtype,
                                                    device=p.grad.device)
                        col_shape = list(p.grad.shape)
                        col_shape[-2] = 1
                        state["col_var"] = _C.zeros(col_shape, dtype=p.grad.dtype,
                                                    device=p.grad.device)
                    else:
                        state["variance"] = _C.zeros_like(p.grad)
                grad = p.grad if not group["maximize"] else -p.grad
                if eps1 is None:
                    # As torch: the first parameter's dtype sets eps1 for the rest of the group.
                    eps1 = finfo(p.dtype).eps
                step_t = state["step"]
                step_t += 1
                step = step_t.item()
                one_minus_beta2 = step ** beta2_decay
                rho = min(lr, 1 / (step ** 0.5))
                alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho
                if wd != 0:
                    p.mul_(1 - lr * wd)
                if grad.dim() > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    # mean of grad^2 along a dim, as a squared norm over the dim's length
                    row_mean = _C.norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1))
                    _lerp_(row_var, row_mean, one_minus_beta2)
                    col_mean = _C.norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2))
                    _lerp_(col_var, col_mean, one_minus_beta2)
                    var_estimate = row_var @ col_var
                    var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                else:
                    variance = state["variance"]
                    _lerp_(variance, grad * grad, one_minus_beta2)
                    var_estimate = variance.clone()  # the update below must not write into it
                # eps1 squared: the square root is taken next
                update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
                update.mul_(grad)
                denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
                p.add_(update, alpha=-alpha / denom)
        return loss
