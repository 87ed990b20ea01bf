"""ExponentialFamily: distributions with density exp(<t(x), theta> - F(theta) + k(x)). Their
entropy follows from the log normaliser F by Bregman divergence: H = F(theta) - <theta,
grad F(theta)> - E[k(x)], computed here with autograd, so a subclass only states F."""
import kiln

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        """The natural parameters theta, as a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """The log normaliser F(theta)."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E[k(x)] for the carrier measure k."""
        raise NotImplementedError

    def entropy(self):
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with kiln.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = kiln.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
