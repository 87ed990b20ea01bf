"""Building sparse tensors: kiln.sparse_coo_tensor, kiln.sparse_csr_tensor (with torch's
validation messages) and dense -> sparse conversions (Tensor.to_sparse / to_sparse_csr).

Invariant checks (indices in bounds, CSR row pointers consistent, ...) run by default in kiln:
torch skips them unless check_invariants=True, because a bad index there can crash its
kernels; here they are a few vectorised reductions, and a bad index would otherwise surface
later as an obscure index_add error. check_invariants=False skips them."""
import kiln

from . import _index
from ._coo import SparseCOOTensor
from ._csr import SparseCSRTensor


def _as_tensor(x, dtype=None, device=None):
    if isinstance(x, kiln.Tensor):
        return x if dtype is None and device is None else x.to(
            dtype=dtype or x.dtype, device=device or x.device)
    return kiln.tensor(x, dtype=dtype, device=device)


def _values_for(values, dtype, device, requires_grad):
    v = _as_tensor(values, dtype, device)
    if requires_grad:
        # torch's result is then a leaf: gradients stop here, not at the caller's tensor.
        v = v.detach().requires_grad_(True)
    return v


def _check_coo_bounds(indices, shape):
    if indices.numel() == 0:
        return
    low, high = indices.amin(1).tolist(), indices.amax(1).tolist()
    for d, (lo, hi) in enumerate(zip(low, high)):
        if lo < 0:
            raise RuntimeError(f"found negative index {lo} for dim {d}")
        if hi >= shape[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                               f"{shape[d]} but found index {hi}")


def _is_sorted_unique(lin):
    return lin.numel() < 2 or bool((lin[1:] > lin[:-1]).all())


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None):
    """torch.sparse_coo_tensor: indices [sparse_dim, nnz], values [nnz, *dense_shape]."""
    indices = _as_tensor(indices, device=device)
    values = _values_for(values, dtype, device, requires_grad)
    if indices.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices.dtype != kiln.int64:
        indices = indices.to(kiln.int64)
    if values.dim() == 0:
        values = values.reshape(1)
    sd, nnz = indices.shape
    if values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {values.shape[0]}")
    dense_shape = tuple(values.shape[1:])
    check = check_invariants is not False
    if size is None:
        if nnz:
            low = indices.amin(1).tolist()
            for d, lo in enumerate(low):
                if lo < 0:
                    raise RuntimeError(f"found negative index {lo} for dim {d}")
            sparse_shape = tuple(h + 1 for h in indices.amax(1).tolist())
        else:
            sparse_shape = (0,) * sd
        shape = sparse_shape + dense_shape
    else:
        shape = tuple(int(s) for s in size)
        if len(shape) != sd + len(dense_shape):
            raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: "
                               f"len(size) = {len(shape)}, sparse_dim = {sd}, dense_dim = "
                               f"{len(dense_shape)}")
        if shape[sd:] != dense_shape:
            raise RuntimeError(f"values has incorrect size, expected {[nnz, *shape[sd:]]}, got "
                               f"{list(values.shape)}")
        if check:
            _check_coo_bounds(indices, shape)
    # As torch: at most one entry is coalesced; is_coalesced= is trusted (checked below).
    coalesced = nnz < 2 if is_coalesced is None else bool(is_coalesced)
    if is_coalesced and check and not _is_sorted_unique(_index.linearize(indices, shape[:sd])):
        raise RuntimeError("cannot set is_coalesced to true if indices correspond to "
                           "uncoalesced COO tensor")
    return SparseCOOTensor(indices, values, shape, coalesced)


def _check_csr(crow, col, nnz, shape):
    nrows, ncols = shape
    if crow.shape[0] != nrows + 1:
        raise RuntimeError(f"crow_indices.shape[-1] must be equal to the number of rows + 1 "
                           f"(={nrows + 1}), but got {crow.shape[0]}")
    if col.shape[0] != nnz:
        raise RuntimeError(f"col_indices.shape[-1] must be equal to nnz (={nnz}) as defined by "
                           f"values.shape[0], but got {col.shape[0]}")
    if int(crow[0]) != 0:
        raise RuntimeError("`crow_indices[..., 0] == 0` is not satisfied.")
    if int(crow[-1]) != nnz:
        raise RuntimeError("`crow_indices[..., -1] == nnz` is not satisfied.")
    steps = crow[1:] - crow[:-1]
    if nrows and not bool(((steps >= 0) & (steps <= ncols)).all()):
        raise RuntimeError("`0 <= crow_indices[..., 1:] - crow_indices[..., :-1] <= ncols` is "
                           "not satisfied.")
    if nnz == 0:
        return
    if int(col.amin()) < 0 or int(col.amax()) >= ncols:
        raise RuntimeError("`0 <= col_indices < ncols` is not satisfied.")
    rows = _index.rows_from_crow(crow, nrows)
    same_row = rows[1:] == rows[:-1]
    if bool((same_row & (col[1:] <= col[:-1])).any()):
        raise RuntimeError("`col_indices[..., crow_indices[..., i - 1]:crow_indices[..., i]] "
                           "for all i = 1, ..., nrows are sorted and distinct along the last "
                           "dimension values` is not satisfied.")


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None):
    """torch.sparse_csr_tensor for 2-D tensors: crow_indices [nrows + 1], col_indices [nnz],
    values [nnz]. The indices are kept as int64."""
    crow = _as_tensor(crow_indices, device=device)
    col = _as_tensor(col_indices, device=device)
    values = _values_for(values, dtype, device, requires_grad)
    if crow.dtype != col.dtype:
        raise RuntimeError(f"crow_indices and col_indices must have the same dtype, but got "
                           f"{crow.dtype} and {col.dtype}, respectively")
    crow, col = crow.to(kiln.int64), col.to(kiln.int64)
    if crow.dim() != 1 or col.dim() != 1 or values.dim() != 1:
        raise NotImplementedError("sparse_csr_tensor: kiln supports 2-D CSR tensors only "
                                  "(1-D crow_indices, col_indices and values; no batch or "
                                  "dense dimensions)")
    nnz = values.shape[0]
    if size is None:
        ncols = int(col.amax()) + 1 if col.numel() else 0
        shape = (crow.shape[0] - 1, ncols)
    else:
        shape = tuple(int(s) for s in size)
        if len(shape) != 2:
            raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense "
                               f"dimensionalities (=0 + 2 + 0) but got {len(shape)}")
    if check_invariants is not False:
        _check_csr(crow, col, nnz, shape)
    return SparseCSRTensor(crow, col, values, shape)


def dense_to_sparse(t, sparse_dim=None):
    """Tensor.to_sparse(sparse_dim): the nonzero entries (slices, for a hybrid tensor) of a
    dense tensor, coalesced. Differentiable: the values are an index_select of t."""
    ndim = t.dim()
    sd = ndim if sparse_dim is None else int(sparse_dim)
    if not 0 <= sd <= ndim:
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{ndim}] range, "
                           f"but {sd} is given")
    if sd == 0 and ndim > 0:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when "
                           "self.dim()>0")
    sizes = tuple(t.shape[:sd])
    rows = 1
    for s in sizes:
        rows *= s
    flat = t.reshape((rows,) + tuple(t.shape[sd:]))
    nonzero = flat.detach() != 0
    if sd < ndim:
        nonzero = nonzero.reshape(rows, -1).any(1)
    positions = nonzero.nonzero().reshape(-1)
    values = flat.index_select(0, positions)
    return SparseCOOTensor(_index.unravel(positions, sizes), values, tuple(t.shape), True)


def dense_to_sparse_csr(t, dense_dim=None):
    if t.dim() != 2 or dense_dim:
        raise NotImplementedError(f"to_sparse_csr: kiln supports 2-D CSR tensors only, got a "
                                  f"{t.dim()}-D tensor" + (f" and dense_dim={dense_dim}"
                                                           if dense_dim else ""))
    return dense_to_sparse(t).to_sparse_csr()


def tensor_to_sparse(t, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """Tensor.to_sparse on a dense tensor: layout=kiln.sparse_csr gives CSR."""
    if layout is kiln.sparse_csr:
        return dense_to_sparse_csr(t, dense_dim)
    if layout not in (None, kiln.sparse_coo):
        raise NotImplementedError(f"to_sparse: kiln has no {layout} layout")
    return dense_to_sparse(t, sparse_dim)
