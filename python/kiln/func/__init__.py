"""kiln.func: torch.func's function transforms (decision 0082). grad, grad_and_value, vjp,
jacrev and hessian over kiln.autograd.grad; jvp, jacfwd and linearize by the double-backward
trick (two reverse passes: kiln has no forward-mode AD; see _forward.py); vmap as a loop over
the mapped dimension; functional_call from kiln.nn.utils.stateless."""
from ._transforms import grad, grad_and_value, vjp, jacrev, hessian  # noqa: F401
from ._forward import jvp, jacfwd, linearize  # noqa: F401
from ._vmap import vmap  # noqa: F401
from ..nn.utils.stateless import _functional_call

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "hessian", "jvp", "jacfwd", "linearize",
           "vmap", "functional_call"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """module(*args, **kwargs) with the given tensors (a dict, or a list / tuple of dicts with
    distinct keys) in place of its parameters and buffers, for this call only."""
    return _functional_call(module, parameter_and_buffer_dicts, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
