"""Distribution: the abstract base class of every distribution (torch.distributions'
interface). Subclasses set arg_constraints / support and implement what they can of
rsample / sample, log_prob, cdf, icdf, entropy, mean, mode, variance, enumerate_support."""
import warnings

import kiln

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    # torch's default is __debug__ (True unless python -O): invalid parameters raise.
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn validation of parameters and of log_prob's value on or off for every
        distribution constructed afterwards without an explicit validate_args."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=kiln.Size(), event_shape=kiln.Size(), validate_args=None):
        self._batch_shape = kiln.Size(batch_shape)
        self._event_shape = kiln.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with "
                              "`validate_args=False` to turn off validation.")
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # cannot be checked by itself
                if param not in self.__dict__ and isinstance(
                        getattr(type(self), param), lazy_property):
                    continue  # the alternative parametrisation that was not given
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {repr(self)} to satisfy the "
                        f"constraint {repr(constraint)}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution whose batch dimensions are expanded to batch_shape (parameters
        are expanded views, no copies). Subclasses implement it."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=kiln.Size()):
        """Samples without gradients; by default a detached rsample."""
        with kiln.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=kiln.Size()):
        """Reparameterised samples: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning)
        return self.sample(kiln.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return kiln.exp(self.entropy())

    def _extended_shape(self, sample_shape=kiln.Size()):
        """sample_shape + batch_shape + event_shape: the shape of sample(sample_shape)."""
        if not isinstance(sample_shape, kiln.Size):
            sample_shape = kiln.Size(sample_shape)
        return kiln.Size(tuple(sample_shape) + tuple(self._batch_shape)
                         + tuple(self._event_shape))

    def _validate_sample(self, value):
        """Checks log_prob's (cdf's, ...) argument: a tensor, whose trailing dimensions are
        the event shape and whose other dimensions broadcast with the batch shape, and that
        lies in the support."""
        if not isinstance(value, kiln.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {tuple(self._event_shape)}.")
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.")
            return
        assert support is not None
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({repr(support)}) "
                f"of the distribution {repr(self)}, "
                f"but found invalid values:\n{value}")

    def _expanded(self, cls, batch_shape, _instance, names):
        """expand() of a family `cls` whose parameters `names` all have the batch shape: a
        new instance (or _instance) with each parameter expanded, not validated again."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = kiln.Size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        super(cls, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        param_names = [k for k, _ in self.arg_constraints.items() if k in self.__dict__]
        args_string = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in param_names)
        return self.__class__.__name__ + "(" + args_string + ")"
