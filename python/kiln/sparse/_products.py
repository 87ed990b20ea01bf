"""Matrix products with sparse operands (torch.sparse.mm / addmm / sampled_addmm, and what
kiln.mm / kiln.matmul / @ route here). sparse @ dense is a gather of the dense rows named by
the column indices, scaled by the values, then an index_add into the output rows: three
vectorised kiln ops whose autograd gives the values and the dense operand their gradients."""
import kiln

from . import _base, _index


def _is_sparse(x):
    return isinstance(x, _base.SparseTensor)


def _rows_cols(s):
    """Row and column index of each stored entry, and the values (any order, repeats kept)."""
    if s.layout is kiln.sparse_csr:
        return s._row_indices(), s._col, s._v
    return s._i[0], s._i[1], s._v


def _check_matrix(op, s):
    if s.dim() != 2 or s.sparse_dim() != 2:
        raise NotImplementedError(f"{op}: kiln.sparse multiplies 2-D sparse matrices with two "
                                  f"sparse dimensions, got shape {tuple(s.shape)} with "
                                  f"sparse_dim {s.sparse_dim()}")


def _check_dtypes(op, a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got: "
                           f"{a.dtype} != {b.dtype}")


def _sparse_dense(s, dense):
    _check_matrix("mm", s)
    if not isinstance(dense, kiln.Tensor) or dense.dim() != 2:
        raise RuntimeError("mm: the dense operand must be a 2-D kiln.Tensor")
    if dense.shape[0] != s.shape[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, "
                           f"got {dense.shape[0]}")
    _check_dtypes("mm", s, dense)
    if dense.device.type == "cpu":
        values, crow, cols, rows = _csr_arrays(s)
        if not (kiln.is_grad_enabled() and (values.requires_grad or dense.requires_grad)):
            return kiln._C._sparse_csr_mm(crow, cols, values, dense)  # no graph to record
        return _CsrTimesDense.apply(values, crow, cols, rows, dense)
    # other devices: gather, scale, index_add (kiln ops; no compressed-row kernel there)
    rows, cols, values = _rows_cols(s)
    out = kiln.zeros(s.shape[0], dense.shape[1], dtype=dense.dtype, device=dense.device)
    contrib = dense.index_select(0, cols) * values.unsqueeze(1)
    return out.index_add(0, rows, contrib)


def _csr_arrays(s):
    """(values, crow, col, rows) of s in row order: a CSR tensor's own arrays; a COO tensor's
    entries sorted by row (a stable sort when it is not coalesced; repeats stay, the product
    sums them)."""
    if s.layout is kiln.sparse_csr:
        return s._v, s._crow, s._col, s._row_indices()
    rows, cols, values = s._i[0], s._i[1], s._v
    if not s._coalesced:
        order = kiln.sort(rows, stable=True).indices
        rows, cols, values = rows[order], cols[order], values.index_select(0, order)
    return values, _index.crow_from_rows(rows, s.shape[0]), cols, rows


class _CsrTimesDense(kiln.autograd.Function):
    """sparse @ dense through kiln's compressed-row kernel (kiln._C._sparse_csr_mm: one pass
    over the stored entries, rows split over the threads by entries). Backward with kiln ops:
    d values[e] = <grad_out[row e], dense[col e]>, d dense = S^T grad_out as an index_add.
    10000 x 10000 with 100k entries @ [10000, 64] float32, forward (benchmarks/sparse_mm.py,
    2 threads, while a CI build ran): gather + index_add 13-22 ms, this kernel 0.5 ms for CSR
    (torch 1.3-1.6 ms; decision 0108)."""

    @staticmethod
    def forward(ctx, values, crow, cols, rows, dense):
        ctx.save_for_backward(values, cols, rows, dense)
        return kiln._C._sparse_csr_mm(crow, cols, values, dense)

    @staticmethod
    def backward(ctx, grad):
        values, cols, rows, dense = ctx.saved_tensors
        grad_values = grad_dense = None
        g_rows = grad.index_select(0, rows)
        if ctx.needs_input_grad[0]:
            grad_values = (g_rows * dense.index_select(0, cols)).sum(1)
        if ctx.needs_input_grad[4]:
            grad_dense = kiln.zeros_like(dense).index_add(0, cols, g_rows * values.unsqueeze(1))
        return grad_values, None, None, None, grad_dense


def _sparse_sparse(a, b):
    """A join on a's column == b's row: each stored a[i, k] meets every stored b[k, j]."""
    from ._coo import SparseCOOTensor
    _check_matrix("mm", a)
    _check_matrix("mm", b)
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    _check_dtypes("mm", a, b)
    ra, ca, va = _rows_cols(a)
    bc = b.to_sparse_coo().coalesce()  # sorted by row: b's entries of row k are contiguous
    rb, cb, vb = bc._i[0], bc._i[1], bc._v
    starts = _index.crow_from_rows(rb, b.shape[0])
    per_a = (starts[1:] - starts[:-1]).index_select(0, ca)  # matches of each a entry
    a_of = kiln.repeat_interleave(kiln.arange(ca.shape[0], device=ca.device), per_a)
    first = per_a.cumsum(0) - per_a  # where each a entry's run of matches starts
    offset = kiln.arange(a_of.shape[0], device=ca.device) - first.index_select(0, a_of)
    b_of = starts.index_select(0, ca.index_select(0, a_of)) + offset
    indices = kiln.stack([ra.index_select(0, a_of), cb.index_select(0, b_of)])
    values = va.index_select(0, a_of) * vb.index_select(0, b_of)
    r = SparseCOOTensor(indices, values, (a.shape[0], b.shape[1]), False).coalesce()
    return r.to_sparse_csr() if a.layout is kiln.sparse_csr else r


def mm(mat1, mat2):
    """torch.sparse.mm: sparse @ dense -> dense, sparse @ sparse -> sparse (mat1's layout),
    dense @ sparse -> dense."""
    if _is_sparse(mat1):
        return _sparse_sparse(mat1, mat2) if _is_sparse(mat2) else _sparse_dense(mat1, mat2)
    if _is_sparse(mat2):
        if not isinstance(mat1, kiln.Tensor) or mat1.dim() != 2:
            raise RuntimeError("mm: the dense operand must be a 2-D kiln.Tensor")
        # (d @ s) == (s^T @ d^T)^T; s^T is an index swap for COO.
        return _sparse_dense(mat2.to_sparse_coo().t(), mat1.t()).t()
    return kiln._C.mm(mat1, mat2)


def matmul(a, b):
    """@ with a sparse operand: 2-D products as mm, and a 1-D dense operand as a vector."""
    if isinstance(b, kiln.Tensor) and b.dim() == 1 and _is_sparse(a):
        return mm(a, b.unsqueeze(1)).squeeze(1)
    if isinstance(a, kiln.Tensor) and a.dim() == 1 and _is_sparse(b):
        return mm(a.unsqueeze(0), b).squeeze(0)
    for x in (a, b):
        if not isinstance(x, (kiln.Tensor, _base.SparseTensor)):
            return NotImplemented
        if x.dim() != 2:
            raise NotImplementedError("matmul: kiln.sparse supports 2-D sparse @ 1-D or 2-D "
                                      f"operands, got a {x.dim()}-D operand")
    return mm(a, b)


def addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.addmm: beta * input + alpha * (mat1 @ mat2), mat1 sparse."""
    product = mm(mat1, mat2)
    if _is_sparse(product):
        raise NotImplementedError("addmm: kiln.sparse.addmm takes a dense mat2")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product  # input is ignored, NaN included, as torch's
    if _is_sparse(input):
        input = input.to_dense()
    return product + (input if beta == 1 else input * beta)


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.sampled_addmm: beta * input + alpha * (mat1 @ mat2) at input's stored
    positions only (input sparse CSR, mat1 / mat2 dense). Each output entry is one row-column
    dot product, so the dense product is never formed."""
    if not _is_sparse(input) or input.layout is not kiln.sparse_csr:
        raise RuntimeError("sampled_addmm: Expected input to be a sparse CSR tensor")
    if mat1.dim() != 2 or mat2.dim() != 2 or mat1.shape[1] != mat2.shape[0] or \
            (mat1.shape[0], mat2.shape[1]) != tuple(input.shape):
        raise RuntimeError(f"sampled_addmm: shapes do not match: input {tuple(input.shape)}, "
                           f"mat1 {tuple(mat1.shape)}, mat2 {tuple(mat2.shape)}")
    rows, cols, values = _rows_cols(input)
    dots = (mat1.index_select(0, rows) * mat2.t().index_select(0, cols)).sum(1)
    out = dots * alpha if alpha != 1 else dots
    if beta != 0:
        out = out + (values * beta if beta != 1 else values)
    return input._with_values(out)
