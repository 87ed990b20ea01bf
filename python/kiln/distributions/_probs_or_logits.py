"""The probs-or-logits parameterisation shared by Bernoulli, LogitRelaxedBernoulli, Binomial
and NegativeBinomial: exactly one of the two is given and stored (the other is derived lazily
by the family), an optional total_count broadcast with it, and expand() of whichever is set."""
from numbers import Number

import kiln

from .utils import broadcast_all


class ProbsOrLogits:
    def _set_probs_or_logits(self, probs, logits, total_count=None):
        """Stores the given parameter (and total_count); returns the batch shape."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        if total_count is None:
            (param,) = broadcast_all(value)
            shape = kiln.Size() if isinstance(value, Number) else param.size()
        else:
            count, param = broadcast_all(total_count, value)
            self.total_count = count.type_as(param)
            shape = param.size()
        setattr(self, name, param)
        self._param = param
        return shape

    def _expand_probs_or_logits(self, new, batch_shape):
        """Sets new's parameters to this one's expanded to batch_shape."""
        if "total_count" in self.__dict__:
            new.total_count = self.total_count.expand(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)
