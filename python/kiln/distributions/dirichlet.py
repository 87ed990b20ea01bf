"""Dirichlet(concentration): a point on the simplex with density prod x_k^(a_k - 1) / B(a).
rsample normalises independent Gamma(a_k, 1) draws; each draw carries its implicit-
reparameterisation gradient and the normalisation is an ordinary differentiable map, so
the pathwise gradient of the result is exact."""

import kiln
import kiln.nn.functional as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import _clamp_tiny_st

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape)
                                                      + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        concentration = self.concentration.expand(shape)
        gammas = _clamp_tiny_st(kiln._standard_gamma(concentration))
        return _clamp_tiny_st(gammas / gammas.sum(-1, True))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (kiln.xlogy(self.concentration - 1.0, value).sum(-1)
                + kiln.lgamma(self.concentration.sum(-1))
                - kiln.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # All a_k < 1: the density peaks at the vertices; torch reports the vertex of the
        # largest a_k.
        mask = (self.concentration < 1).all(dim=-1, keepdim=True)
        vertex = F.one_hot(self.concentration.argmax(-1),
                           concentrationm1.shape[-1]).to(mode.dtype)
        return kiln.where(mask, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (kiln.lgamma(self.concentration).sum(-1) - kiln.lgamma(a0)
                - (k - a0) * kiln.digamma(a0)
                - ((self.concentration - 1.0) * kiln.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - kiln.lgamma(x.sum(-1))


