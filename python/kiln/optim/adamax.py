"""Adamax (Adam with the infinity norm, Kingma & Ba 2014 section 7) with weight decay and
maximize: torch.optim.Adamax's single-tensor update, same order."""
from .. import _C
from ._checks import check_betas, check_non_negative
from .optimizer import Optimizer, _get_value, _lerp_, _step_tensor, _use_grad

__all__ = ["Adamax"]


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_non_negative(lr, "learning rate")
        check_non_negative(eps, "epsilon value")
        check_betas(betas)
        check_non_negative(weight_decay, "weight_decay value")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["exp_avg"] = _C.zeros_like(p)
                    state["exp_inf"] = _C.zeros_like(p)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                grad = p.grad if not group["maximize"] else -p.grad
                state["step"] += 1
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                _lerp_(exp_avg, grad, 1 - beta1)
                # The decayed running maximum of |grad|; eps keeps it away from 0 (it
                # divides), added to |grad| before the maximum as torch does.
                exp_inf.mul_(beta2)
                exp_inf.copy_(_C.maximum(exp_inf, grad.abs().add_(eps)))
                step_size = lr / (1 - beta1 ** _get_value(state["step"]))
                p.addcdiv_(exp_avg, exp_inf, value=-step_size)
        return loss
