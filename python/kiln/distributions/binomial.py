"""Binomial(total_count, probs | logits): successes in total_count Bernoulli trials.
Sampling needs kiln.binomial (the C++ sampler)."""
import kiln

from . import constraints
from ._probs_or_logits import ProbsOrLogits
from .distribution import Distribution
from .utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    """max(x, 0) whose gradient at 0 is 1/2 (not 0 or 1), as torch."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(ProbsOrLogits, Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        batch_shape = self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = kiln.Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(Binomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

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
        shape = tuple(self._extended_shape(sample_shape))
        with kiln.no_grad():
            return kiln.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = kiln.lgamma(self.total_count + 1)
        log_factorial_k = kiln.lgamma(value + 1)
        log_factorial_nmk = kiln.lgamma(self.total_count - value + 1)
        # n log(1 + e^l) written as n (max(l, 0) + log1p(e^-|l|)), which cannot overflow;
        # then log p^k (1-p)^(n-k) = k l - n log(1 + e^l).
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * kiln.log1p(kiln.exp(-kiln.abs(self.logits)))
                          - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self):
        total_count = int(self.total_count.max())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(kiln.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = int(self.total_count.max())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`.")
        values = kiln.arange(1 + total_count, dtype=self._param.dtype,
                             device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
