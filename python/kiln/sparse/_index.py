"""Index arithmetic shared by the sparse layouts: coordinates <-> linear positions, CSR row
pointers <-> row indices. Every helper is a handful of vectorised kiln ops (no Python loop
over nonzeros; the loops below run over dimensions)."""
import math

import kiln


def linearize(indices, sizes):
    """Row-major linear position of each column of `indices` ([len(sizes), nnz], int64) in a
    tensor of shape `sizes`. Positions of distinct coordinates are distinct, and sorting them
    sorts the coordinates lexicographically, which is what coalesce needs."""
    if math.prod(sizes) >= 2 ** 63:
        raise RuntimeError(f"sparse: the sparse dimensions {tuple(sizes)} have more elements "
                           "than an int64 position can address")
    nnz = indices.shape[1]
    lin = kiln.zeros(nnz, dtype=kiln.int64, device=indices.device)
    for d, size in enumerate(sizes):
        lin = lin * size + indices[d]
    return lin


def unravel(lin, sizes):
    """The inverse of linearize: [len(sizes), nnz] coordinates of the positions `lin`."""
    rows = []
    for size in reversed(sizes):
        rows.append(lin % size)
        lin = lin // size
    if not rows:
        return kiln.zeros(0, lin.shape[0], dtype=kiln.int64, device=lin.device)
    return kiln.stack(rows[::-1])


def rows_from_crow(crow, nrows):
    """The row index of each stored entry of a CSR tensor: row r repeated crow[r+1]-crow[r]
    times."""
    counts = crow[1:] - crow[:-1]
    return kiln.repeat_interleave(kiln.arange(nrows, device=crow.device), counts)


def crow_from_rows(rows, nrows):
    """CSR row pointers of entries sorted by row: 0 followed by the running count per row."""
    counts = kiln.bincount(rows, minlength=nrows) if rows.numel() else \
        kiln.zeros(nrows, dtype=kiln.int64, device=rows.device)
    head = kiln.zeros(1, dtype=kiln.int64, device=rows.device)
    return kiln.cat([head, counts.cumsum(0)])
