"""Closed-form KL divergences between different families (KL(p || q) = -H(p) - E_p log q(x),
with E_p of q's sufficient statistics in closed form), and between full- and low-rank
multivariate normals. Where part of p's support lies outside q's the value is inf.
Same pairs as torch.distributions.kl; x log x is taken as 0 at x = 0 (torch gives nan there,
e.g. for a Uniform starting at 0), and the ContinuousBernoulli-Uniform pairs are infinite
only when the supports strictly fail to nest (torch also at equal bounds)."""
import math

import kiln

from .bernoulli import Bernoulli
from .beta import Beta
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import _batch_trace_XXT, register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import (LowRankMultivariateNormal, _batch_lowrank_logdet,
                                          _batch_lowrank_mahalanobis)
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform
from .utils import euler_constant

_INF = math.inf


def _x_log_x(x):
    return kiln.xlogy(x, x)


def _inf_where(mask, result):
    return kiln.where(mask, _INF, result)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - kiln.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    a, b = p.concentration1, p.concentration0
    # E log x = digamma(a) - digamma(a + b).
    e_log_x = a.digamma() - (a + b).digamma()
    log_norm_q = q.concentration.lgamma() - q.concentration * q.rate.log()
    return -p.entropy() + log_norm_q - (q.concentration - 1) * e_log_x + q.rate * a / (a + b)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean = p.mean
    var_q = q.scale.pow(2)
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean.pow(2)
    e_sq = 0.5 * second_moment - q.loc * mean + 0.5 * q.loc.pow(2)  # E (x - mu)^2 / 2
    return -p.entropy() + 0.5 * (2 * math.pi * var_q).log() + e_sq / var_q


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > p.support.lower_bound) | (q.high < p.support.upper_bound),
                      result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).square()) + q.scale.log()
    t3 = (p.variance + p.mean.square() - 2.0 * q.loc * p.mean) / (2.0 * q.scale.square())
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > p.support.lower_bound) | (q.high < p.support.upper_bound),
                      result)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = rate_scale.log() - 1
    # E exp(-(x - mu) / beta) under the exponential: its Laplace transform at 1 / beta.
    t2 = loc_scale.exp() * rate_scale / (rate_scale + 1)
    return t1 - loc_scale + t2 + rate_scale.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_q = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    t1 = 0.5 * (rate_sq * var_q * 2 * math.pi).log()
    # E x^2 / 2 - mu E x + mu^2 / 2 with E x = 1 / rate, E x^2 = 2 / rate^2.
    e_sq = rate_sq.reciprocal() - q.loc / p.rate + 0.5 * q.loc.pow(2)
    return t1 - 1 + e_sq / var_q


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a = p.concentration
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (a - 1) * a.digamma() - a.lgamma() - a
    t2 = rate_scale.log() + a / rate_scale
    # E exp(-x / beta) for x ~ Gamma(a, rate) = (1 + 1 / (rate beta))^(-a).
    t3 = loc_scale.exp() * (1 + rate_scale.reciprocal()).pow(-a) - loc_scale
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a = p.concentration
    var_q = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    t1 = 0.5 * (rate_sq * var_q * 2 * math.pi).log() - a - a.lgamma()
    e_sq = 0.5 * (a.pow(2) + a) / rate_sq - q.loc * a / p.rate + 0.5 * q.loc.pow(2)
    return t1 + (a - 1) * a.digamma() + e_sq / var_q


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5).pow(2) / 3  # variance pi^2 beta^2 / 6, over 2 sigma^2
    t3 = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (euler_constant + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_q = q.scale.pow(2)
    ratio_sq = p.scale.pow(2) / var_q
    t1 = 0.5 * (2 * ratio_sq / math.pi).log()
    e_sq = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + ratio_sq + e_sq / var_q - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_scale = q.loc / q.scale
    t1 = var_ratio.log() * 0.5
    t2 = mean_scale - loc_scale
    # E exp(-(x - mu_q) / beta) under the normal: a lognormal mean.
    t3 = (-mean_scale + 0.5 * var_ratio + loc_scale).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    t1 = (p.alpha / scale_rate).log()
    t3 = p.alpha * scale_rate / (p.alpha - 1)
    result = t1 - p.alpha.reciprocal() + t3 - 1
    return _inf_where(p.alpha <= 1, result)  # infinite mean


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    # E log x = log scale + 1 / alpha.
    e_log_x = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - e_log_x
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * e_log_x
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    two_var = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)   # the variance
    t4 = (p.alpha * common - q.loc).pow(2)          # squared mean offset
    result = t1 - p.alpha.reciprocal() + (t3 + t4) / two_var - 1
    return _inf_where(p.alpha <= 2, result)  # infinite variance


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    # E log x and E log(1 - x) under the uniform, by the antiderivative x log x - x.
    e_log_x = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    e_log_1mx = -(_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    log_beta = (q.concentration1.lgamma() + q.concentration0.lgamma()
                - (q.concentration1 + q.concentration0).lgamma())
    result = (-width.log() - (q.concentration1 - 1) * e_log_x
              - (q.concentration0 - 1) * e_log_1mx + log_beta)
    return _inf_where((p.high > q.support.upper_bound) | (p.low < q.support.lower_bound),
                      result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - kiln.log1p(-q.probs) - q._cont_bern_log_norm()
    return _inf_where((p.high > q.support.upper_bound) | (p.low < q.support.lower_bound),
                      result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(p.low < q.support.lower_bound, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    return _inf_where(p.low < q.support.lower_bound, -width.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high_z = (p.high - q.loc) / q.scale
    low_z = (p.low - q.loc) / q.scale
    t1 = common.log() + 0.5 * (high_z + low_z)
    t2 = common * ((-high_z).exp() - (-low_z).exp())
    return t1 - t2


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width  # E log x
    return _inf_where(p.low < q.support.lower_bound, t2 * (q.alpha + 1) - t1)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")
    term1 = (_batch_lowrank_logdet(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                   q._capacitance_tril)
             - 2 * p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                       q.loc - p.loc, q._capacitance_tril)
    # tr(Sq^-1 Lp Lp^T) with Sq^-1 = Dq^-1 - A^T A (Woodbury, A = Cq^-1 Wq^T Dq^-1).
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    A = kiln.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)
    term21 = _batch_trace_XXT(p._unbroadcasted_scale_tril
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(kiln.matmul(A, p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")
    term1 = (2 * q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
             - _batch_lowrank_logdet(p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                                     p._capacitance_tril))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    # tr(Sq^-1 (Wp Wp^T + Dp)) = |Lq^-1 Wp|_F^2 + |Lq^-1 Dp^1/2|_F^2.
    batch = tuple(kiln.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2],
                                        p._unbroadcasted_cov_factor.shape[:-2]))
    n = p.event_shape[0]
    q_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_diag = kiln.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _batch_trace_XXT(kiln.linalg.solve_triangular(q_tril, p_factor, upper=False))
    term22 = _batch_trace_XXT(kiln.linalg.solve_triangular(q_tril, p_diag, upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])
