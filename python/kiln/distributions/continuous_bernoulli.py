"""ContinuousBernoulli(probs | logits) (Loaiza-Ganem & Cunningham 2019): density
C(p) p^x (1-p)^(1-x) on [0, 1]. The normaliser C(p) = 2 atanh(1 - 2p) / (1 - 2p) is 0/0 at
p = 1/2, so inside (lims[0], lims[1]) around 1/2 every quantity uses its Taylor expansion
instead; outside, p is used as is ("cut" probabilities)."""
import math
from numbers import Number

import kiln

from . import constraints
from .exp_family import ExponentialFamily
from .utils import (_bce_with_logits, _rand, broadcast_all, clamp_probs, lazy_property,
                    logits_to_probs, probs_to_logits)

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # Validated before clamping (which would hide invalid values); as torch, only
            # when validate_args is given explicitly (True or False alike).
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = kiln.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = kiln.Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        # Inside the unstable region, a harmless stand-in value (the where() below discards
        # the result) so that no nan reaches the gradient.
        return kiln.where(self._outside_unstable_region(), self.probs,
                          self._lims[0] * kiln.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p) = log |log1p(-p) - log p| - log |1 - 2p|, or its Taylor series near 1/2."""
        cut_probs = self._cut_probs()
        cut_probs_below_half = kiln.where(cut_probs <= 0.5, cut_probs,
                                          kiln.zeros_like(cut_probs))
        cut_probs_above_half = kiln.where(cut_probs >= 0.5, cut_probs,
                                          kiln.ones_like(cut_probs))
        log_norm = kiln.log(kiln.abs(kiln.log1p(-cut_probs) - kiln.log(cut_probs))) - kiln.where(
            cut_probs <= 0.5, kiln.log1p(-2.0 * cut_probs_below_half),
            kiln.log(2.0 * cut_probs_above_half - 1.0))
        x = kiln.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return kiln.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (
            kiln.log1p(-cut_probs) - kiln.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * kiln.pow(x, 2)) * x
        return kiln.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return kiln.sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        vars_ = cut_probs * (cut_probs - 1.0) / kiln.pow(1.0 - 2.0 * cut_probs, 2) + 1.0 / (
            kiln.pow(kiln.log1p(-cut_probs) - kiln.log(cut_probs), 2))
        x = kiln.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return kiln.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        u = _rand(shape, self.probs)
        with kiln.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        u = _rand(shape, self.probs)
        return self.icdf(u)  # inversion: differentiable in p

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-_bce_with_logits(logits, value)
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (kiln.pow(cut_probs, value) * kiln.pow(1.0 - cut_probs, 1.0 - value)
                + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = kiln.where(self._outside_unstable_region(), cdfs, value)
        return kiln.where(value <= 0.0, kiln.zeros_like(value),
                          kiln.where(value >= 1.0, kiln.ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        return kiln.where(
            self._outside_unstable_region(),
            (kiln.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0))
             - kiln.log1p(-cut_probs)) / (kiln.log(cut_probs) - kiln.log1p(-cut_probs)),
            value)

    def entropy(self):
        log_probs0 = kiln.log1p(-self.probs)
        log_probs1 = kiln.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log C as a function of the natural parameter x = logit(p): log |expm1(x) / x|,
        Taylor series near x = 0."""
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = kiln.where(out_unst_reg, x,
                                    (self._lims[0] - 0.5) * kiln.ones_like(x))
        log_norm = (kiln.log(kiln.abs(kiln.expm1(cut_nat_params)))
                    - kiln.log(kiln.abs(cut_nat_params)))
        taylor = 0.5 * x + kiln.pow(x, 2) / 24.0 - kiln.pow(x, 4) / 2880.0
        return kiln.where(out_unst_reg, log_norm, taylor)
