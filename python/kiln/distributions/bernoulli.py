"""Bernoulli(probs | logits): 1 with probability p, 0 otherwise."""
import math

import kiln

from . import constraints
from ._probs_or_logits import ProbsOrLogits
from .exp_family import ExponentialFamily
from .utils import (_bce_with_logits, broadcast_all, lazy_property, logits_to_probs,
                    probs_to_logits)

__all__ = ["Bernoulli"]


class Bernoulli(ProbsOrLogits, ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        batch_shape = self._set_probs_or_logits(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = kiln.Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return kiln.where(self.probs == 0.5, math.nan, mode)  # a tie has no unique mode

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        with kiln.no_grad():
            return kiln.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # -BCE-with-logits = v log sigmoid(l) + (1 - v) log sigmoid(-l), stable for any l.
        return -_bce_with_logits(logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = kiln.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (kiln.logit(self.probs),)

    def _log_normalizer(self, x):
        return kiln.log1p(kiln.exp(x))
