"""Adadelta (Zeiler 2012) with weight decay and maximize: torch.optim.Adadelta's
single-tensor update, same order (lr scales the unit-corrected step; torch's default 1.0)."""
from .. import _C
from ._checks import check_in_range, check_non_negative
from .optimizer import Optimizer, _step_tensor, _use_grad

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_non_negative(lr, "learning rate")
        check_in_range(rho, "rho value", 0.0, 1.0)
        check_non_negative(eps, "epsilon value")
        check_non_negative(weight_decay, "weight_decay value")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["square_avg"] = _C.zeros_like(p)
                    state["acc_delta"] = _C.zeros_like(p)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                state["step"] += 1
                grad = p.grad if not group["maximize"] else -p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                # RMS of past updates over RMS of gradients: the step carries the
                # parameter's units.
                delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
        return loss
