"""Functions that exported graphs call besides kiln's own: reading a dynamic size, a runtime
assertion, and the functional forms run_decompositions() substitutes for mutations. Each is
bound as kiln.export.<name>, which is how generated code and saved programs name them."""
from ..fx.node import has_side_effect

__all__ = ["sym_size_int", "_assert_scalar", "copy", "_native_batch_norm_legit_functional"]


def sym_size_int(x, dim):
    """x.size(dim): a dynamic dimension read by the program (torch's aten.sym_size.int)."""
    return x.size(dim)


@has_side_effect
def _assert_scalar(cond, msg):
    """Raises RuntimeError(msg) unless cond: a condition on dynamic sizes that the traced
    program relied on, checked when the exported program runs (torch's aten._assert_scalar)."""
    if not cond:
        raise RuntimeError(msg)


def copy(dst, src):
    """The value dst.copy_(src) gives dst, as a new tensor (torch's aten.copy)."""
    import kiln
    out = kiln.empty_like(dst)
    out.copy_(src)
    return out


def _native_batch_norm_legit_functional(input, weight, bias, running_mean, running_var,
                                        training, momentum, eps):
    """batch_norm in training mode without mutating: (output, batch mean, batch 1/std, new
    running_mean, new running_var), torch's aten._native_batch_norm_legit_functional."""
    import kiln
    from ..nn import functional as F
    new_mean = running_mean.clone()
    new_var = running_var.clone()
    out = F.batch_norm(input, new_mean, new_var, weight, bias, training, momentum, eps)
    dims = [0] + list(range(2, input.dim()))
    save_mean = input.mean(dims)
    save_invstd = kiln.rsqrt(input.var(dims, unbiased=False) + eps)
    return out, save_mean, save_invstd, new_mean, new_var


for _f in (sym_size_int, _assert_scalar, copy, _native_batch_norm_legit_functional):
    _f.__module__ = "kiln.export"
del _f
