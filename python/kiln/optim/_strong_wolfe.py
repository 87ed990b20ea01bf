"""The strong-Wolfe line search of LBFGS(line_search_fn="strong_wolfe"): torch.optim.lbfgs's
bracketing-then-zoom search (after minFunc), with its cubic interpolation, its constants
and its comparisons in the same order, so that the steps it picks are torch's.

Scalars stay what torch has them be: losses are Python floats, directional derivatives
(g . d) are 0-d tensors of the parameters' dtype, step lengths are either."""
import math

from .._C import Tensor

__all__ = ["strong_wolfe"]


def _sqrt(x):
    return x.sqrt() if isinstance(x, Tensor) else math.sqrt(x)


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to
    bounds (default: between x1 and x2); the bounds' midpoint when the cubic has none."""
    if bounds is not None:
        low, high = bounds
    else:
        low, high = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if not d2_square >= 0:
        return (low + high) / 2.0
    d2 = _sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, low), high)


class _Trial:
    """One evaluated step length: t, the loss f, the flat gradient g and gtd = g . d."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                 max_ls=25):
    """obj_func(x, t, d) -> (loss, flat gradient) at x + t d. Returns (loss, flat gradient,
    step length, number of evaluations)."""
    d_norm = d.abs().max()
    start = _Trial(0, f, g.clone(), gtd)

    def evaluate(step):
        loss, grad = obj_func(x, step, d)
        return _Trial(step, loss, grad, grad.dot(d))

    def sufficient_decrease(trial):
        return not trial.f > (f + c1 * trial.t * gtd)

    def curvature_holds(trial):
        return abs(trial.gtd) <= -c2 * gtd

    # Phase 1: grow the step until an interval that must hold a Wolfe point is found.
    new, evals, ls_iter, done = evaluate(t), 1, 0, False
    prev, bracket = start, None
    while ls_iter < max_ls:
        if not sufficient_decrease(new) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, _Trial(new.t, new.f, new.g.clone(), new.gtd)]
            break
        if curvature_holds(new):
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, _Trial(new.t, new.f, new.g.clone(), new.gtd)]
            break
        step = _cubic_minimum(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                              bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev = _Trial(new.t, new.f, new.g.clone(), new.gtd)
        new = evaluate(step)
        evals += 1
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = [_Trial(0, f, g, None), _Trial(new.t, new.f, new.g, None)]

    # Phase 2: shrink the interval (cubic steps kept off its ends) to a Wolfe point.
    insufficient_progress = False
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        step = _cubic_minimum(bracket[0].t, bracket[0].f, bracket[0].gtd,
                              bracket[1].t, bracket[1].f, bracket[1].gtd)
        top, bottom = max(bracket[0].t, bracket[1].t), min(bracket[0].t, bracket[1].t)
        margin = 0.1 * (top - bottom)
        if min(top - step, step - bottom) < margin:
            if insufficient_progress or step >= top or step <= bottom:
                step = top - margin if abs(step - top) < abs(step - bottom) else bottom + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        new = evaluate(step)
        evals += 1
        ls_iter += 1
        kept = _Trial(new.t, new.f, new.g.clone(), new.gtd)
        if not sufficient_decrease(new) or new.f >= bracket[low].f:
            bracket[high] = kept
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if curvature_holds(new):
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = kept
    best = bracket[low]
    return best.f, best.g, best.t, evals
