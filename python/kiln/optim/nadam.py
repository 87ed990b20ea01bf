"""NAdam (Nesterov-accelerated Adam, Dozat 2016) with momentum_decay, weight decay (L2 or
decoupled, as AdamW) and maximize: torch.optim.NAdam's single-tensor update, same order.

The momentum schedule mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay)) enters through
the running product mu_1 * ... * mu_t, kept as a float32 0-d tensor like torch's, so that
its rounding (and so the update) is torch's in float32 and float64 alike."""
from .. import _C
from ._checks import check_betas, check_non_negative
from .optimizer import (Optimizer, _get_value, _keep_float32, _lerp_, _step_tensor,
                        _use_grad)

__all__ = ["NAdam"]


def _momentum_at(beta1, momentum_decay, step):
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_non_negative(lr, "learning rate")
        check_non_negative(eps, "epsilon value")
        check_betas(betas)
        check_non_negative(weight_decay, "weight_decay value")
        check_non_negative(momentum_decay, "momentum_decay value")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _after_load_state_dict(self):
        # before the load_state_dict post hooks, so that they see the float32 values
        _keep_float32(self, ("mu_product",))

    @_use_grad
    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group)
        return loss

    def _update(self, p, group):
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _step_tensor()
            state["mu_product"] = _C.tensor(1.0, dtype=_C.float32)
            state["exp_avg"] = _C.zeros_like(p)
            state["exp_avg_sq"] = _C.zeros_like(p)
        exp_avg, exp_avg_sq, mu_product = state["exp_avg"], state["exp_avg_sq"], \
            state["mu_product"]
        grad = p.grad if not group["maximize"] else -p.grad
        state["step"] += 1
        step = _get_value(state["step"])
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        mu = _momentum_at(beta1, group["momentum_decay"], step)
        mu_next = _momentum_at(beta1, group["momentum_decay"], step + 1)
        mu_product *= mu
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(1 - beta2 ** step).sqrt().add_(eps)
        product = _get_value(mu_product)
        # The Nesterov look-ahead: this step's gradient weighted with mu_t, the running
        # average with mu_{t+1}, each over its own bias correction.
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
        p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - product * mu_next))
