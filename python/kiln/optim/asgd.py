"""ASGD (averaged SGD, Polyak & Juditsky 1992) with weight decay and maximize:
torch.optim.ASGD's single-tensor update. The averaged parameters are state["ax"].

eta (the decayed step size) and mu (the averaging weight) live in float32 0-d tensors as
torch keeps them, so the parameters of float64 models see the same float32-rounded step
sizes as torch's."""
from .. import _C
from ._checks import check_non_negative
from .optimizer import Optimizer, _get_value, _keep_float32, _step_tensor, _use_grad

__all__ = ["ASGD"]


def _scalar32(value):
    return _C.tensor(value, dtype=_C.float32)


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_non_negative(lr, "learning rate")
        check_non_negative(weight_decay, "weight_decay value")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _after_load_state_dict(self):
        # before the load_state_dict post hooks, so that they see the float32 values
        _keep_float32(self, ("eta", "mu"))

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["eta"] = _scalar32(lr)
                    state["mu"] = _scalar32(1.0)
                    state["ax"] = _C.zeros_like(p)
                grad = p.grad if not group["maximize"] else -p.grad
                state["step"] += 1
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                eta = _get_value(state["eta"])
                p.mul_(1 - lambd * eta)
                p.add_(grad, alpha=-eta)
                mu = _get_value(state["mu"])
                ax = state["ax"]
                if mu != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = _get_value(state["step"])
                state["eta"] = _scalar32(lr / ((1 + lambd * lr * step) ** alpha))
                state["mu"] = _scalar32(1 / max(1, step - t0))
        return loss
