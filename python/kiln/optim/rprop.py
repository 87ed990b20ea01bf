"""Rprop (resilient backpropagation, Riedmiller & Braun 1993) with maximize:
torch.optim.Rprop's single-tensor update. Only the sign of the gradient is used; each
element's step size grows by etaplus while the sign holds and shrinks by etaminus when it
flips, and after a flip the element does not move (its remembered gradient becomes 0)."""
from .. import _C
from ._checks import check_non_negative
from .optimizer import Optimizer, _step_tensor, _use_grad

__all__ = ["Rprop"]


def _sign_factors(sign, etaminus, etaplus):
    """etaplus where sign > 0, etaminus where < 0, 1 where 0; NaN stays NaN as in torch."""
    unchanged = _C.where(sign.eq(0), 1.0, sign)
    return _C.where(sign.gt(0), etaplus, _C.where(sign.lt(0), etaminus, unchanged))


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_non_negative(lr, "learning rate")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]} "
                             "(expected 0 < etaminus < 1 < etaplus)")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["prev"] = _C.zeros_like(p)
                    state["step_size"] = _C.full_like(p, group["lr"])
                prev, step_size = state["prev"], state["step_size"]
                state["step"] += 1
                grad = p.grad if not group["maximize"] else -p.grad
                sign = grad.mul(prev).sign()
                step_size.mul_(_sign_factors(sign, etaminus, etaplus))
                step_size.clamp_(step_size_min, step_size_max)
                grad = _C.where(sign.lt(0), 0.0, grad)
                p.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss
