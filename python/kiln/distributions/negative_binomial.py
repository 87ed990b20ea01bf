"""NegativeBinomial(total_count, probs | logits): failures before total_count successes, with
success probability 1 - probs per trial (torch's convention: probs is the probability of
the counted event). Sampling is a Gamma-Poisson mixture and needs kiln._standard_gamma and
kiln.poisson."""
import kiln

from . import constraints
from ._probs_or_logits import ProbsOrLogits
from .distribution import Distribution
from .gamma import Gamma
from .utils import (_logsigmoid, lazy_property, logits_to_probs,
                    probs_to_logits)

__all__ = ["NegativeBinomial"]


class NegativeBinomial(ProbsOrLogits, Distribution):
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        batch_shape = self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = kiln.Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(NegativeBinomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * kiln.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / kiln.sigmoid(-self.logits)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    @lazy_property
    def _gamma(self):
        # The mixing distribution: Poisson rates ~ Gamma(total_count, rate = (1 - p) / p).
        return Gamma(concentration=self.total_count, rate=kiln.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=kiln.Size()):
        with kiln.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return kiln.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # log p^k (1 - p)^n through logsigmoid of the logits (stable for large |logits|).
        log_unnormalized_prob = (self.total_count * _logsigmoid(-self.logits)
                                 + value * _logsigmoid(self.logits))
        log_normalization = (-kiln.lgamma(self.total_count + value)
                             + kiln.lgamma(1.0 + value) + kiln.lgamma(self.total_count))
        # total_count + value = 0: the only outcome of NB(0, p) is 0, with probability 1.
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized_prob - log_normalization
