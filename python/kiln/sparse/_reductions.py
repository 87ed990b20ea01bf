"""Reductions over sparse tensors: torch.sparse.sum (dense when every sparse dimension is
reduced, else sparse), and torch.sparse.softmax / log_softmax, which normalise over the
stored values only (unstored entries count as -inf, so they stay unstored). Groups of entries
are found by linear position of the other coordinates and reduced with index_add /
scatter_reduce, all differentiable kiln ops."""
import kiln

from . import _base, _index


def _dims(dim, ndim):
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = [_base._canonical_dim(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"sparse.sum: dims {dims} contain a repeated dimension")
    return sorted(out)


def sum(input, dim=None, *, keepdim=False, dtype=None):
    """torch.sparse.sum / Tensor.sum on a sparse tensor."""
    if not isinstance(input, _base.SparseTensor):
        return kiln.sum(input) if dim is None else kiln.sum(input, dim, keepdim=keepdim,
                                                             dtype=dtype)
    values = input._v if dtype is None else input._v.to(dtype)
    if dim is None:
        return values.sum()
    if input.layout is kiln.sparse_csr:
        return _csr_sum(input, dim, keepdim, dtype)
    if keepdim:
        raise NotImplementedError("sparse.sum: keepdim=True is not supported for sparse COO "
                                  "tensors in kiln")
    sd = input.sparse_dim()
    dims = _dims(dim, input.dim())
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dense_dims)
    kept = [d for d in range(sd) if d not in dims]
    dense_shape = [s for d, s in enumerate(input._shape) if d >= sd and d not in dims]
    if not kept:  # every sparse dimension reduced: a dense result
        return values.sum(0)
    from ._coo import SparseCOOTensor
    shape = [input._shape[d] for d in kept] + dense_shape
    if len(kept) == sd:  # only dense dimensions reduced: the same coordinates
        return SparseCOOTensor(input._i, values, shape, input._coalesced)
    indices = input._i.index_select(0, kiln.tensor(kept, device=input._i.device))
    return SparseCOOTensor(indices, values, shape, False).coalesce()


def _csr_sum(input, dim, keepdim, dtype):
    if not keepdim:
        raise RuntimeError("reduction operations on CSR tensors with keepdim=False is "
                           "unsupported")
    dims = _dims(dim, 2)
    if dims == [0, 1]:
        return sum(input, None, dtype=dtype).reshape(1, 1).to_sparse_csr()
    coo = input.to_sparse_coo()
    reduced = sum(coo if dtype is None else coo.to(dtype), dims[0])  # 1-D sparse, coalesced
    from ._coo import SparseCOOTensor
    zeros = kiln.zeros_like(reduced._i)
    pair = [zeros, reduced._i] if dims[0] == 0 else [reduced._i, zeros]
    shape = (1, input.shape[1]) if dims[0] == 0 else (input.shape[0], 1)
    return SparseCOOTensor(kiln.cat(pair), reduced._v, shape, True).to_sparse_csr()


def _softmax(input, dim, dtype, log):
    if not isinstance(input, _base.SparseTensor):
        raise TypeError(f"sparse.{'log_' if log else ''}softmax expects a sparse tensor, got "
                        f"{type(input).__name__}")
    csr = input.layout is kiln.sparse_csr
    s = input.to_sparse_coo().coalesce()
    values = s._v if dtype is None else s._v.to(dtype)
    dim = _base._canonical_dim(dim, s.dim())
    sd = s.sparse_dim()
    if dim >= sd:  # along a dense dimension: an ordinary softmax of each stored slice
        fn = kiln.log_softmax if log else kiln.softmax
        out = fn(values, dim - sd + 1)
    else:
        out = _grouped_softmax(s, values, dim, log)
    r = s._with_values(out)
    return r.to_sparse_csr() if csr else r


def _grouped_softmax(s, values, dim, log):
    sd = s.sparse_dim()
    others = [d for d in range(sd) if d != dim]
    key = _index.linearize(s._i.index_select(0, kiln.tensor(others, dtype=kiln.int64,
                                                             device=s._i.device)),
                           [s._shape[d] for d in others])
    _, group = kiln.unique(key, sorted=True, return_inverse=True)
    ngroups = int(group.max()) + 1 if group.numel() else 0
    flat = values.reshape(values.shape[0], -1)
    spread = group.unsqueeze(1).expand(flat.shape)
    # Subtracting each group's max keeps exp in range; softmax does not depend on the shift,
    # so the max is taken without gradient.
    peak = kiln.full((ngroups, flat.shape[1]), float("-inf"), dtype=flat.dtype,
                     device=flat.device).scatter_reduce(0, spread, flat.detach(), "amax")
    shifted = flat - peak.index_select(0, group)
    e = shifted.exp()
    total = kiln.zeros(ngroups, flat.shape[1], dtype=flat.dtype,
                       device=flat.device).index_add(0, group, e)
    if log:
        out = shifted - total.log().index_select(0, group)
    else:
        out = e / total.index_select(0, group)
    return out.reshape(values.shape)


def softmax(input, dim, *, dtype=None):
    """torch.sparse.softmax: softmax over the stored values along dim."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None):
    """torch.sparse.log_softmax: log-softmax over the stored values along dim."""
    return _softmax(input, dim, dtype, log=True)
