"""VonMises(loc, concentration): the circular distribution with density
exp(kappa cos(x - loc)) / (2 pi I0(kappa)) on angles (any real value, read modulo 2 pi).

log I0(kappa) comes from the exponentially scaled Bessel function, log i0e(kappa) + kappa,
exact to rounding and differentiable (torch evaluates a polynomial approximation, about 1e-7
relative). Sampling is the Best-Fisher (1979) rejection sampler, run over the whole batch in
float64 and repeated until every element has accepted, as torch does: in float32 the
proposal degenerates for tiny concentrations and the loop would not end."""
import math

import kiln

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _log_i0(x):
    return kiln.special.i0e(x).log() + x


def _log_i1(x):
    return kiln.special.i1e(x).log() + x


def _rejection_sample(loc, concentration, proposal_r, x):
    """Best-Fisher rejection loop: propose through a wrapped Cauchy envelope, accept by the
    squeeze test or the exact test, keep the first accepted proposal of each element."""
    done = kiln.zeros(tuple(x.shape), dtype=kiln.bool, device=x.device)
    while not bool(done.all()):
        u = kiln.rand((3,) + tuple(x.shape), dtype=loc.dtype, device=loc.device)
        u1, u2, u3 = u.unbind()
        z = kiln.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        # Only elements not yet done take a new value (an accepted value is final).
        take = accept & ~done
        x = kiln.where(take, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    # Centre at loc and wrap into [-pi, pi).
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, kiln.Size(), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, kiln.Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * kiln.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_i0(self.concentration))

    @lazy_property
    def _proposal_r(self):
        """The envelope's parameter r = (1 + rho^2) / (2 rho) (Best-Fisher), in float64;
        1 / kappa + kappa (its expansion at 0) where kappa is tiny and the closed form
        cancels catastrophically."""
        kappa = self.concentration.detach().to(kiln.float64)
        tau = 1 + (1 + 4 * kappa * kappa).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = (1 + rho * rho) / (2 * rho)
        return kiln.where(kappa < 1e-5, 1 / kappa + kappa, r)

    def sample(self, sample_shape=kiln.Size()):
        with kiln.no_grad():
            shape = tuple(self._extended_shape(sample_shape))
            loc = self.loc.to(kiln.float64)
            kappa = self.concentration.to(kiln.float64)
            x = kiln.zeros(shape, dtype=kiln.float64, device=self.loc.device)
            return _rejection_sample(loc, kappa, self._proposal_r, x).to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance 1 - I1(kappa) / I0(kappa)."""
        k = self.concentration
        return 1 - (_log_i1(k) - _log_i0(k)).exp()
