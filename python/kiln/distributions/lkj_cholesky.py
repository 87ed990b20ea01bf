"""LKJCholesky(dim, concentration eta): a law over Cholesky factors L of dim x dim
correlation matrices, with density of L L^T proportional to det(L L^T)^(eta - 1)
(eta = 1: uniform over correlation matrices).

Sampling is the onion method of Lewandowski, Kurowicka and Joe (2009, sec. 3.2), vectorised
over rows: row i (i >= 1) is sqrt(y_i) times a uniform direction in its first i coordinates,
with y_i ~ Beta(i / 2, eta + (dim - 2) / 2 - (i - 1) / 2), and the diagonal takes the rest of
the unit norm. Row 0 is e_0 (its Beta draw is unused; it keeps the rows aligned)."""
import math

import kiln

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import _randn, broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError("Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = kiln.Size((dim, dim))
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = kiln.arange(self.dim - 1, dtype=self.concentration.dtype,
                             device=self.concentration.device)
        offset = kiln.cat([offset.new_zeros((1,)), offset])
        # Row i >= 1: y_i ~ Beta(i / 2, eta + (dim - 2) / 2 - (i - 1) / 2) (offset_i = i - 1).
        # torch 2.13 uses offset + 0.5 for the first concentration, i.e. (i - 1/2) instead of
        # i / 2: the same for row 1 but too concentrated near 1 from row 2 on, so its rows
        # >= 2 have too large correlations (their marginals are not the LKJ one).
        self._beta = Beta(0.5 * offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(kiln.Size(tuple(batch_shape) + (self.dim,)))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=kiln.Size()):
        with kiln.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = _randn(self._extended_shape(sample_shape), y).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            # Row 0 has no strictly-lower entries (norm 0): its direction is the zero vector.
            first_row = (kiln.arange(self.dim, device=u.device) == 0).unsqueeze(-1)
            direction = kiln.where(first_row, kiln.zeros_like(u), u / norm)
            w = y.sqrt() * direction
            # The diagonal completes each row to unit norm (clamped: rounding can leave a
            # tiny negative remainder).
            tiny = kiln.finfo(w.dtype).tiny
            diag = (1 - (w * w).sum(-1)).clamp(min=tiny).sqrt()
            return w + kiln.diag_embed(diag)

    def log_prob(self, value):
        # Density of L: det(L L^T)^(eta - 1) = prod L_ii^(2 eta - 2), times the Jacobian of
        # L -> L L^T on correlation matrices, prod_i L_ii^(dim - i - 1) (i from 0): together
        # prod_{i>=1} L_ii^(2 (eta - 1) + dim - i - 1) (L_00 = 1).
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = kiln.arange(2, self.dim + 1, dtype=self.concentration.dtype,
                            device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        # Normaliser (Lewandowski et al. 2009, p. 1999) through the multivariate gamma:
        # its pi constant is (d-1)(d-2)/4 log pi, the normaliser's d(d-1)/4 log pi, so add
        # the difference (d - 1) / 2 log pi.
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = kiln.lgamma(alpha) * dm1
        numerator = kiln.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized - (pi_constant + numerator - denominator)
