"""Wishart(df, covariance_matrix | precision_matrix | scale_tril): the law of X = sum of df
outer products of N(0, Sigma) vectors (for integer df), with density proportional to
det(X)^((df - p - 1) / 2) exp(-tr(Sigma^-1 X) / 2). Everything is computed from the lower
Cholesky factor L of Sigma. rsample is Bartlett's decomposition, X = (L A)(L A)^T with A lower
triangular, A_ii = sqrt(chi2(df - i)) and N(0, 1) below the diagonal, so it is
reparameterised in L and (through the gamma sampler's implicit gradients) in df."""
import math
import warnings
from numbers import Number

import kiln

from . import constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import _randn, lazy_property, vec_to_tril_matrix

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """d/dx log Gamma_p(x) = sum_{i<p} digamma(x - i / 2)."""
    halves = kiln.arange(p, dtype=x.dtype, device=x.device) / 2
    return kiln.digamma(x.unsqueeze(-1) - halves).sum(-1)


class Wishart(ExponentialFamily):
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None]
        if len(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = kiln.Size(param.shape[:-2])
            self.df = kiln.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = kiln.broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        batch_shape = kiln.Size(batch_shape)
        event_shape = kiln.Size(param.shape[-2:])
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        full = tuple(batch_shape) + (-1, -1)
        if scale_tril is not None:
            self.scale_tril = param.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(full)
        else:
            self.precision_matrix = param.expand(full)
        if bool(self.df.lt(p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = kiln.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._bartlett_chi2(self.df, batch_shape)

    def _bartlett_chi2(self, df, batch_shape):
        """Chi2(df - i), i = 0..p-1: the squared diagonal of Bartlett's factor."""
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        shift = kiln.arange(p, dtype=L.dtype, device=L.device)
        return Chi2(df=df.unsqueeze(-1) - shift.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = kiln.Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._bartlett_chi2(new.df, batch_shape)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape)
                                                     + tuple(self._event_shape))

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = kiln.eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return kiln.cholesky_solve(eye, L).expand(tuple(self._batch_shape)
                                                  + tuple(self._event_shape))

    def _df_matrix(self):
        return self.df.view(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        # (df - p - 1) Sigma, undefined (nan) when df <= p + 1.
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = kiln.where(factor <= 0, math.nan, factor)
        return factor.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=kiln.Size()):
        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt()
        # A zero chi2 draw would make the sample singular.
        diag = diag.clamp(min=kiln.finfo(diag.dtype).eps)
        lower = _randn(tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,),
                       diag)
        noise = kiln.diag_embed(diag) + vec_to_tril_matrix(lower, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=kiln.Size(), max_try_correction=None):
        """Bartlett samples; samples that come out numerically singular (possible when df is
        close to p - 1) are redrawn up to max_try_correction (default 10) times, and may
        remain singular after that (their log_prob is then -inf)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = kiln.Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sampling(sample_shape)
                sample = kiln.where(singular.unsqueeze(-1).unsqueeze(-1), redraw, sample)
                singular = ~self.support.check(sample)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        log_det_L = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = kiln.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(
            dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + log_det_L) - kiln.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * kiln.linalg.slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        log_det_L = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + log_det_L) + kiln.mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-kiln.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + kiln.mvlgamma(y + (p + 1) / 2, p))
