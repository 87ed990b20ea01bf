"""KL pairs that are infinite for every parameter value: p puts mass where q has none
(p's support is not inside q's), e.g. a Normal (all of R) against a Beta (on [0, 1]) or an
Exponential against a Pareto (which has no mass below its scale > 0). Same registrations as
torch."""
import math

import kiln

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import register_kl
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform


def _infinite_like(tensor):
    return kiln.full_like(tensor, math.inf)


def _register_all(type_p, types_q, param):
    """Register KL(type_p || q) = inf (shaped like p.<param>) for every q type."""
    def fun(p, q):
        return _infinite_like(getattr(p, param))
    fun.__name__ = f"_kl_{type_p.__name__.lower()}_infinity"
    for type_q in types_q:
        register_kl(type_p, type_q)(fun)


# A bounded or half-line support cannot contain p's larger one (a Pareto's support starts at
# its scale > 0, so it excludes [0, scale) that the Beta / Exponential / Gamma ... cover).
_register_all(Beta, [Pareto], "concentration1")
_register_all(ContinuousBernoulli, [Pareto], "probs")
_register_all(Exponential, [Beta, ContinuousBernoulli, Pareto, Uniform], "rate")
_register_all(Gamma, [Beta, ContinuousBernoulli, Pareto, Uniform], "concentration")
_register_all(Gumbel, [Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform], "loc")
_register_all(Laplace, [Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform], "loc")
_register_all(Normal, [Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform], "loc")
_register_all(Pareto, [Beta, ContinuousBernoulli, Uniform], "scale")
# Counts are unbounded under a Poisson, bounded under a Bernoulli / Binomial.
_register_all(Poisson, [Bernoulli, Binomial], "rate")
