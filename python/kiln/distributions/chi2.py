"""Chi2(df): Gamma(df / 2, rate 1/2)."""
from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
