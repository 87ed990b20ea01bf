"""Multinomial(total_count, probs | logits): counts of each of K categories in total_count
independent Categorical draws."""
import kiln

from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    total_count: int

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._categorical._new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=kiln.Size()):
        sample_shape = kiln.Size(sample_shape)
        # total_count category indices per draw, then counted per category.
        samples = self._categorical.sample(kiln.Size((self.total_count,)) + sample_shape)
        # samples: (total_count, *sample_shape, *batch); move the trial dim last.
        shifted_idx = list(range(samples.dim()))
        shifted_idx.append(shifted_idx.pop(0))
        samples = samples.permute(*shifted_idx)
        counts = kiln.zeros(tuple(self._extended_shape(sample_shape)), dtype=samples.dtype,
                            device=samples.device)
        counts = counts.scatter_add(-1, samples, kiln.ones_like(samples))
        return counts.type_as(self.probs)

    def entropy(self):
        n = kiln.tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - kiln.lgamma(n + 1)
        # E[sum_k log x_k!] over each marginal Binomial(n, p_k), by enumeration.
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = kiln.exp(self._binomial.log_prob(support))
        weights = kiln.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = kiln.lgamma(value.sum(-1) + 1)
        log_factorial_xs = kiln.lgamma(value + 1).sum(-1)
        # A category with probability 0 that is never drawn contributes 0 * (-inf): make it 0.
        logits = kiln.where((value == 0) & (logits == -float("inf")),
                            kiln.zeros_like(logits), logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
