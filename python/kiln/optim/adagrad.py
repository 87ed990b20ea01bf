"""Adagrad (lr_decay, weight decay, initial accumulator, maximize): torch.optim.Adagrad's
update; the state is created in the constructor, as torch."""
from .. import _C
from .optimizer import Optimizer, _get_value, _step_tensor, _use_grad

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = _step_tensor()
                state["sum"] = _C.full_like(p, group["initial_accumulator_value"])

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, lr_decay, wd, eps = group["lr"], group["lr_decay"], group["weight_decay"], \
                group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                step_t, state_sum = state["step"], state["sum"]
                step_t += 1
                step = _get_value(step_t)
                grad = p.grad if not group["maximize"] else -p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                clr = lr / (1 + (step - 1) * lr_decay)
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt().add_(eps)
                p.addcdiv_(grad, std, value=-clr)
        return loss
