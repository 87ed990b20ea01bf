"""kiln.linalg's factorisations (C++ ops over OpenBLAS's LAPACK) and what is composed of them
(python/kiln/_linalg_*.py), with the torch.* and Tensor forms, against PyTorch 2.13:
values in float32 / float64 (batches, batch dims broadcast between A and B, empty batches,
0x0 matrices, transposed and sliced inputs), gradients in float64, the exceptions torch
raises, and a batch of 64 matrices plus one 300x300 matrix (the threaded paths).

torch uses MKL and kiln OpenBLAS, so results agree to rounding only: every tolerance is
C * eps(dtype) * kappa, kappa being an estimate of the condition of the problem (the
matrices are generated with a known spectrum for that), relative to the result's scale.
Eigenvectors, singular vectors and Q are unique up to the sign of each column: they are
compared sign-aligned, and the columns that are not unique at all (the complement in
full_matrices / mode='complete') through their projector."""
import math

import numpy as np
import pytest
import torch

import kiln
import oracle

# torch warns on every call of its deprecated forms (torch.cholesky, torch.qr, torch.lu, ...),
# which this module calls on purpose to compare the legacy API
pytestmark = [pytest.mark.filterwarnings("ignore:.*is deprecated:UserWarning"),
              pytest.mark.filterwarnings("ignore:torch.linalg.solve_triangular has its argu")]

FP = ["float32", "float64"]
EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}
# Rounding of a LAPACK result is a few eps * kappa per entry; 64 covers the growth over the
# small sizes used here (n <= 6, or kappa carries the size) without hiding an O(1) error.
C = 64.0


def _rng(*parts):
    return np.random.default_rng(oracle._seed("linalg", *parts))


# ---------------------------------------------------------------------------------------
# Inputs: numpy float64 arrays of known condition, made into kiln / torch tensors of the
# same values and layout.

def orthogonal(rng, batch, n):
    q, r = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def general(rng, batch, n):
    """Strictly diagonally dominant (|a_ii| >= 2 - 1/n, off-diagonal row sums < 1) with
    random diagonal signs, so both signs of det occur: cond_inf(A) < 3."""
    a = rng.uniform(-1, 1, (*batch, n, n)) / max(n, 1)
    d = 2.0 * rng.choice([-1.0, 1.0], (*batch, n))
    return a + d[..., None] * np.eye(n)


def pivoting(rng, a):
    """a with its rows in a random order (a permutation of >= 3 rows is rarely its own
    inverse), so partial pivoting swaps rows: P, pivots and lu_unpack are exercised."""
    n = a.shape[-2]
    return a[..., rng.permutation(n), :]


def spd(rng, batch, n):
    """M M^T + I with ||M||_2 <= 2: eigenvalues in [1, 5]."""
    m = rng.uniform(-1, 1, (*batch, n, n)) / max(n, 1)
    return m @ np.swapaxes(m, -1, -2) * 2 + np.eye(n)


def spectral(rng, batch, m, n, s=None):
    """U diag(s) V^T with random orthogonal U, V; s defaults to well separated values in
    [1, 3] (gaps >= 1/(2k)), so singular vectors are well defined."""
    k = min(m, n)
    if s is None:
        s = np.linspace(3.0, 1.0, k) if k > 1 else np.full(k, 2.0)
        s = s + rng.uniform(0, 0.5 / max(k, 1), (*batch, k))
    u = orthogonal(rng, batch, m)[..., :, :k]
    v = orthogonal(rng, batch, n)[..., :, :k]
    return (u * np.asarray(s)[..., None, :]) @ np.swapaxes(v, -1, -2)


def symmetric(rng, batch, n):
    """Q diag(l) Q^T with eigenvalues of both signs, gaps >= 0.5: |l| in [0.5, 3]."""
    base = np.linspace(-3.0, 3.0, n) if n > 1 else np.full(n, 1.0)
    base = np.where(np.abs(base) < 0.5, 0.5, base) if n % 2 else base
    lam = base + rng.uniform(-0.1, 0.1, (*batch, n))
    q = orthogonal(rng, batch, n)
    return (q * lam[..., None, :]) @ np.swapaxes(q, -1, -2)


def both(a, dtype, layout="c", grad=False):
    """(kiln, torch) tensors of a's values: contiguous ("c"), a transposed view ("t") or every
    other column of a wider tensor ("s"). With grad, also the leaves: (k, t, k_leaf, t_leaf)."""
    a = np.asarray(a, dtype=np.float64)
    if layout == "t":
        store = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    elif layout == "s":
        store = np.repeat(a, 2, axis=-1)
    else:
        store = a
    kb = kiln.tensor(store.astype(dtype), dtype=getattr(kiln, dtype))
    tb = torch.tensor(store.astype(dtype), dtype=getattr(torch, dtype))
    if grad:
        kb.requires_grad_(True)
        tb.requires_grad_(True)
    k, t = kb, tb
    if layout == "t":
        k, t = kb.transpose(-1, -2), tb.transpose(-1, -2)
    elif layout == "s":
        k, t = kb[..., ::2], tb[..., ::2]
    if layout != "c" and a.size > 1 and a.shape[-1] > 1:   # (an empty view is contiguous)
        assert not k.is_contiguous() and not t.is_contiguous()
    return (k, t, kb, tb) if grad else (k, t)


# ---------------------------------------------------------------------------------------
# Comparison

def _np(x):
    return x.detach().cpu().numpy().astype(np.float64) if x.dtype.is_floating_point \
        else x.detach().cpu().numpy()


def close_np(kv, tv, dtype, kappa, where):
    tol = C * EPS[dtype] * kappa
    scale = float(np.max(np.abs(tv))) if tv.size and np.isfinite(tv).all() else 1.0
    np.testing.assert_allclose(kv, tv, rtol=tol, atol=tol * max(scale, 1e-30),
                               equal_nan=True, err_msg=where)


def same(k, t, dtype, kappa=1.0, where=""):
    """kiln's result k equals torch's t: type, dtype, shape, values (floats within the
    tolerance for kappa, integers exactly); tuples field by field."""
    if isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor), f"{where}: kiln gave {type(k).__name__}"
        assert oracle.dtype_name(k.dtype) == oracle.dtype_name(t.dtype), \
            f"{where}: dtype kiln {k.dtype} vs torch {t.dtype}"
        assert tuple(k.shape) == tuple(t.shape), \
            f"{where}: shape kiln {tuple(k.shape)} vs torch {tuple(t.shape)}"
        if t.dtype.is_floating_point:
            close_np(_np(k), _np(t), dtype, kappa, where)
        else:
            np.testing.assert_array_equal(_np(k), _np(t), err_msg=where)
    elif isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t), f"{where}: {k!r} vs {t!r}"
        if hasattr(t, "_fields") or type(t).__module__ == "torch.return_types":
            # named results: the same field names, as torch.return_types
            t_fields = [f for f in dir(t) if not f.startswith("_") and f not in (
                "count", "index", "n_fields", "n_sequence_fields", "n_unnamed_fields")]
            for f in t_fields:
                assert hasattr(k, f), f"{where}: kiln's result has no field {f}"
        for i, (a, b) in enumerate(zip(k, t)):
            same(a, b, dtype, kappa, f"{where}[{i}]")
    else:
        assert k == t, f"{where}: kiln {k!r} vs torch {t!r}"
    oracle.record(None)


def run(fn, *ins, dtype, kappa=1.0, where=""):
    """fn(L, *inputs) on both libraries (ins: (kiln, torch) pairs), compared."""
    t = fn(torch, *[p[1] for p in ins])
    k = fn(kiln, *[p[0] for p in ins])
    same(k, t, dtype, kappa, where)
    return k, t


def signs(k_cols, t_cols):
    """Per-column signs d with k_cols * d ~ t_cols (numpy, columns on the last axis)."""
    d = np.sign(np.sum(k_cols * t_cols, axis=-2, keepdims=True))
    return np.where(d == 0, 1.0, d)


# torch's matrix_exp picks a Taylor degree per norm that leaves about 1e3 eps in float64
# (e.g. 3.5e-13 for a 4x4 of norm 0.05, measured against expm_reference); kiln's Pade 13 is
# compared against that reference at the usual tolerance, and against torch with this slack.
TORCH_EXPM_SLACK = {"float32": 1.0, "float64": 100.0}


def expm_reference(a):
    """exp(a) by scaling and squaring of a 30-term Taylor series in long double."""
    n = a.shape[-1]
    if a.size == 0:
        return a
    x = a.astype(np.longdouble)
    norm = float(np.abs(a).sum(-2).max())
    sq = max(0, math.ceil(math.log2(norm))) + 4 if norm > 0 else 0
    x = x / (2.0 ** sq)
    r = term = np.broadcast_to(np.eye(n, dtype=np.longdouble), x.shape)
    for k in range(1, 30):
        term = term @ x / k
        r = r + term
    for _ in range(sq):
        r = r @ r
    return r.astype(np.float64)


def projector(v):
    return v @ np.swapaxes(v, -1, -2)


# Square cases: (batch, n, layout). 0x0 matrices, empty batches and both kinds of views.
SQUARE = [((), 4, "c"), ((3,), 4, "t"), ((2, 2), 3, "s"), ((0,), 3, "c"), ((2,), 0, "c"),
          ((), 1, "c"), ((), 6, "t")]


# ---------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("dtype", FP)
def test_cholesky(dtype):
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("chol", dtype, ci)
        a = spd(rng, batch, n)
        A = both(a, dtype, lay)
        w = f"cholesky {batch} {n} {lay}"
        kap = 5 * max(n, 1)
        run(lambda L, x: L.linalg.cholesky(x), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.linalg.cholesky(x, upper=True), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.linalg.cholesky_ex(x), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.linalg.cholesky_ex(x, upper=True, check_errors=True), A,
            dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: (L.cholesky(x), x.cholesky(upper=True), x.cholesky()), A,
            dtype=dtype, kappa=kap, where=w + " legacy")
        # Only the named triangle is read: garbage in the other gives the same factor.
        g = rng.uniform(5, 9, a.shape)
        lower_only = both(np.tril(a) + np.triu(g, 1), dtype, lay)
        kl, _ = run(lambda L, x: L.linalg.cholesky(x), lower_only, dtype=dtype, kappa=kap,
                    where=w + " lower triangle")
        close_np(_np(kl), np.linalg.cholesky(a) if n else np.zeros(a.shape), dtype, kap, w)
        # cholesky_solve / cholesky_inverse from either factor; B broadcast over A's batch
        B = both(rng.uniform(-1, 1, (2, *batch, n, 2)), dtype)
        Lf = both(np.linalg.cholesky(a) if n else np.zeros(a.shape), dtype, lay)
        Uf = both(np.swapaxes(np.linalg.cholesky(a), -1, -2) if n else np.zeros(a.shape),
                  dtype, lay)
        run(lambda L, b, f: L.cholesky_solve(b, f), B, Lf, dtype=dtype, kappa=kap, where=w)
        run(lambda L, b, f: b.cholesky_solve(f, upper=True), B, Uf, dtype=dtype, kappa=kap,
            where=w)
        run(lambda L, f: (L.cholesky_inverse(f), f.cholesky_inverse()), Lf, dtype=dtype,
            kappa=kap, where=w)
        run(lambda L, f: L.cholesky_inverse(f, upper=True), Uf, dtype=dtype, kappa=kap,
            where=w)
    # info of cholesky_ex: the order of the first minor that is not positive-definite
    a = spd(_rng("chol_info", dtype), (3,), 4)
    a[1, 2, 2] = -50.0
    run(lambda L, x: L.linalg.cholesky_ex(x).info, both(a, dtype), dtype=dtype,
        where="cholesky_ex info")


def test_cholesky_upper_reads_upper_triangle():
    """linalg.cholesky(A, upper=True) reads only A's upper triangle (LAPACK potrf 'U')."""
    a = np.array([[4.0, 1.0], [100.0, 3.0]])   # upper triangle: [[4, 1], [1, 3]], SPD
    run(lambda L, x: L.linalg.cholesky(x, upper=True), both(a, "float64"), dtype="float64",
        where="cholesky upper=True with garbage below the diagonal")


@pytest.mark.parametrize("dtype", FP)
def test_lu(dtype):
    cases = SQUARE + [((), (5, 3), "c"), ((2,), (3, 5), "t"), ((0,), (2, 4), "c"),
                      ((), (0, 3), "c"), ((), (3, 0), "c")]
    for ci, (batch, n, lay) in enumerate(cases):
        rng = _rng("lu", dtype, ci)
        m, n = n if isinstance(n, tuple) else (n, n)
        a = pivoting(rng, general(rng, batch, max(m, n)))[..., :m, :n]
        A = both(a, dtype, lay)
        w = f"lu {batch} {m}x{n} {lay}"
        kap = 3 * max(m, n, 1)
        run(lambda L, x: L.linalg.lu_factor(x), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.linalg.lu_factor_ex(x), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.linalg.lu(x), A, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x: L.lu_unpack(*L.linalg.lu_factor(x)), A, dtype=dtype, kappa=kap,
            where=w)
        run(lambda L, x: L.lu_unpack(*L.linalg.lu_factor(x), unpack_data=False)[0], A,
            dtype=dtype, where=w)
        run(lambda L, x: (L.lu(x), x.lu(get_infos=True)), A, dtype=dtype, kappa=kap,
            where=w + " legacy")
        if m != n:
            continue
        B = both(rng.uniform(-1, 1, (2, *batch, n, 3)), dtype)   # broadcast over A's batch
        Br = both(rng.uniform(-1, 1, (*batch, 3, n)), dtype, "t" if lay == "t" else "c")
        for kw in ({}, {"adjoint": True}):
            run(lambda L, x, b: L.linalg.lu_solve(*L.linalg.lu_factor(x), b, **kw), A, B,
                dtype=dtype, kappa=kap, where=f"{w} lu_solve {kw}")
            run(lambda L, x, b: L.linalg.lu_solve(*L.linalg.lu_factor(x), b, left=False, **kw),
                A, Br, dtype=dtype, kappa=kap, where=f"{w} lu_solve left=False {kw}")
        run(lambda L, x, b: (L.lu_solve(b, *L.lu(x)), b.lu_solve(*x.lu())), A, B,
            dtype=dtype, kappa=kap, where=w + " legacy lu_solve")


@pytest.mark.parametrize("dtype", FP)
def test_solve_inv(dtype):
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("solve", dtype, ci)
        A = both(pivoting(rng, general(rng, batch, n)), dtype, lay)
        kap = 3 * max(n, 1)
        w = f"solve {batch} {n} {lay}"
        B = both(rng.uniform(-1, 1, (*batch, n, 2)), dtype, "t" if lay == "t" else "c")
        Bb = both(rng.uniform(-1, 1, (3, *batch, n, 2)), dtype)   # B's batch broadcasts A's
        Bv = both(rng.uniform(-1, 1, (*batch, n)), dtype)          # vector right-hand sides
        Br = both(rng.uniform(-1, 1, (*batch, 2, n)), dtype, "s" if lay == "s" else "c")
        for b in (B, Bb, Bv):
            run(lambda L, x, y: L.linalg.solve(x, y), A, b, dtype=dtype, kappa=kap, where=w)
            run(lambda L, x, y: L.linalg.solve_ex(x, y), A, b, dtype=dtype, kappa=kap, where=w)
        run(lambda L, x, y: L.linalg.solve(x, y, left=False), A, Br, dtype=dtype, kappa=kap,
            where=w + " left=False")
        run(lambda L, x, y: L.linalg.solve_ex(x, y, left=False, check_errors=True), A, Br,
            dtype=dtype, kappa=kap, where=w + " left=False")
        run(lambda L, x: (L.linalg.inv(x), L.linalg.inv_ex(x), L.inverse(x), x.inverse()), A,
            dtype=dtype, kappa=kap, where=w + " inv")
    # A broadcast against B's batch, and a vector B with a batched A
    rng = _rng("solve_bcast", dtype)
    A = both(general(rng, (2, 1), 3), dtype)
    run(lambda L, x, y: L.linalg.solve(x, y), A, both(rng.uniform(-1, 1, (4, 3, 2)), dtype),
        dtype=dtype, kappa=9, where="solve broadcast")
    run(lambda L, x, y: L.linalg.solve(x, y), both(general(rng, (2,), 3), dtype),
        both(rng.uniform(-1, 1, (3,)), dtype), dtype=dtype, kappa=9, where="solve vector b")


@pytest.mark.parametrize("dtype", FP)
def test_solve_triangular(dtype):
    # mixed float dtypes: torch solves in A's dtype (solve and lstsq refuse them)
    rng = _rng("trsm_promote", dtype)
    other = "float64" if dtype == "float32" else "float32"
    run(lambda L, x, b: L.linalg.solve_triangular(x, b.to(getattr(L, other)), upper=True),
        both(np.triu(general(rng, (), 3)), dtype), both(rng.uniform(-1, 1, (3, 2)), dtype),
        dtype="float32", kappa=9, where="solve_triangular mixed dtypes")
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("trsm", dtype, ci)
        a = general(rng, batch, n)
        # garbage on the other side (and the diagonal): only one triangle may be read
        g = rng.uniform(50, 90, a.shape)
        kap = 3 * max(n, 1)
        B = both(rng.uniform(-1, 1, (2, *batch, n, 3)), dtype)
        Br = both(rng.uniform(-1, 1, (*batch, 3, n)), dtype, lay)
        for upper in (False, True):
            tri = np.triu(a) if upper else np.tril(a)
            other = np.tril(g, -1) if upper else np.triu(g, 1)
            A = both(tri + other, dtype, lay)
            diag = g * np.eye(n) if n else g
            unit = both(tri - tri * np.eye(n) + other + diag, dtype, lay)
            w = f"solve_triangular {batch} {n} {lay} upper={upper}"
            run(lambda L, x, b: L.linalg.solve_triangular(x, b, upper=upper), A, B,
                dtype=dtype, kappa=kap, where=w)
            kx, _ = run(lambda L, x, b: L.linalg.solve_triangular(x, b, upper=upper,
                                                                   left=False), A, Br,
                        dtype=dtype, kappa=kap, where=w + " left=False")
            run(lambda L, x, b: L.linalg.solve_triangular(x, b, upper=upper,
                                                           unitriangular=True), unit, B,
                dtype=dtype, kappa=kap * 10, where=w + " unitriangular")
            # and the garbage really was ignored: X A_tri = B
            close_np(_np(kx) @ tri, _np(Br[0]), dtype, kap, w + " residual")
            for transpose in (False, True):
                run(lambda L, b, x: L.triangular_solve(b, x, upper=upper, transpose=transpose),
                    B, A, dtype=dtype, kappa=kap, where=w + f" legacy transpose={transpose}")
            run(lambda L, b, x: b.triangular_solve(x, upper, unitriangular=True), B, unit,
                dtype=dtype, kappa=kap * 10, where=w + " Tensor.triangular_solve")


@pytest.mark.parametrize("dtype", FP)
def test_det(dtype):
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("det", dtype, ci)
        a = pivoting(rng, general(rng, batch, n))
        kap = 3 * max(n, 1)
        w = f"det {batch} {n} {lay}"
        A = both(a, dtype, lay)
        run(lambda L, x: (L.linalg.det(x), L.linalg.slogdet(x), L.det(x), x.det(),
                          L.slogdet(x), x.slogdet(), L.logdet(x), x.logdet()), A,
            dtype=dtype, kappa=kap, where=w)
        # positive determinants for logdet's finite branch
        P = both(spd(rng, batch, n), dtype, lay)
        run(lambda L, x: (L.logdet(x), L.linalg.slogdet(x).logabsdet), P, dtype=dtype,
            kappa=5 * max(n, 1), where=w + " spd")
    # singular: an exact zero row gives det 0, slogdet (0, -inf), logdet -inf
    a = general(_rng("det_singular", dtype), (2,), 3)
    a[1, 1] = 0
    run(lambda L, x: (L.linalg.det(x), L.linalg.slogdet(x), L.logdet(x)), both(a, dtype),
        dtype=dtype, kappa=9, where="det singular")


def _check_qr(kq, kr, tq, tr, a, dtype, kap, w, mode):
    """Q, R sign-aligned on the first k = min(m, n) columns; the complement columns of a
    complete Q through their projector; and Q R = A."""
    m, n = a.shape[-2:]
    k = min(m, n)
    kq, kr, tq, tr = _np(kq), _np(kr), _np(tq), _np(tr)
    dk = np.sign(np.diagonal(kr[..., :k, :k], axis1=-2, axis2=-1))
    dt = np.sign(np.diagonal(tr[..., :k, :k], axis1=-2, axis2=-1))
    d = np.where(dk * dt == 0, 1.0, dk * dt)
    close_np(kr[..., :k, :] * d[..., :, None], tr[..., :k, :], dtype, kap, w + " R")
    close_np(kr[..., k:, :], tr[..., k:, :], dtype, kap, w + " R rows below k")
    if mode == "r":
        return
    close_np(kq[..., :, :k] * d[..., None, :], tq[..., :, :k], dtype, kap, w + " Q")
    close_np(projector(kq[..., :, k:]), projector(tq[..., :, k:]), dtype, kap,
             w + " complement")
    close_np(kq @ kr, a, dtype, kap, w + " QR = A")


@pytest.mark.parametrize("dtype", FP)
def test_qr(dtype):
    cases = [((), (5, 3), "c"), ((2,), (3, 5), "t"), ((), (4, 4), "s"), ((2, 2), (4, 2), "c"),
             ((0,), (3, 2), "c"), ((), (0, 0), "c"), ((), (0, 3), "c"), ((2,), (3, 0), "c")]
    for ci, (batch, (m, n), lay) in enumerate(cases):
        rng = _rng("qr", dtype, ci)
        a = spectral(rng, batch, m, n)
        A = both(a, dtype, lay)
        kap = 3 * max(m, n, 1)
        for mode in ("reduced", "complete", "r"):
            w = f"qr {batch} {m}x{n} {lay} {mode}"
            tq, tr = torch.linalg.qr(A[1], mode=mode)
            kq, kr = kiln.linalg.qr(A[0], mode=mode)
            same(kq.detach()[..., :0], tq[..., :0], dtype, where=w + " Q shape")
            assert tuple(kq.shape) == tuple(tq.shape) and tuple(kr.shape) == tuple(tr.shape), w
            assert type(kiln.linalg.qr(A[0], mode=mode)).__name__ == "linalg_qr"
            _check_qr(kq, kr, tq, tr, a, dtype, kap, w, mode)
        for some in (True, False):
            w = f"legacy qr {batch} {m}x{n} {lay} some={some}"
            tq, tr = torch.qr(A[1], some=some)
            kq, kr = kiln.qr(A[0], some=some)
            assert tuple(kq.shape) == tuple(tq.shape) and tuple(kr.shape) == tuple(tr.shape), w
            _check_qr(kq, kr, tq, tr, a, dtype, kap, w, "complete")
            kq2, kr2 = A[0].qr(some)
            close_np(_np(kq2), _np(kq), dtype, 1, w + " Tensor.qr")
            close_np(_np(kr2), _np(kr), dtype, 1, w + " Tensor.qr")


@pytest.mark.parametrize("dtype", FP)
def test_eigh(dtype):
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("eigh", dtype, ci)
        a = symmetric(rng, batch, n)
        # the gap between eigenvalues is >= 0.4, their size <= 3.1
        kap = 10 * max(n, 1)
        g = rng.uniform(5, 9, a.shape)
        for uplo in ("L", "U"):
            keep = np.tril(a) + np.triu(g, 1) if uplo == "L" else np.triu(a) + np.tril(g, -1)
            A = both(keep, dtype, lay)
            w = f"eigh {batch} {n} {lay} {uplo}"
            run(lambda L, x: L.linalg.eigvalsh(x, UPLO=uplo), A, dtype=dtype, kappa=kap,
                where=w)
            tl, tv = torch.linalg.eigh(A[1], UPLO=uplo)
            kres = kiln.linalg.eigh(A[0], UPLO=uplo)
            assert type(kres).__name__ == "linalg_eigh" and kres._fields == (
                "eigenvalues", "eigenvectors")
            kl, kv = kres
            same(kl, tl, dtype, kap, w + " eigenvalues")
            assert tuple(kv.shape) == tuple(tv.shape) and kv.dtype == getattr(kiln, dtype), w
            kv, tv = _np(kv), _np(tv)
            close_np(kv * signs(kv, tv), tv, dtype, kap, w + " eigenvectors")
            # only the UPLO triangle was read: V diag(l) V^T rebuilds the symmetric a
            close_np((kv * _np(kl)[..., None, :]) @ np.swapaxes(kv, -1, -2), a, dtype, kap,
                     w + " reconstruction")


@pytest.mark.parametrize("dtype", FP)
def test_svd(dtype):
    cases = [((), (5, 3), "c"), ((2,), (3, 5), "t"), ((), (4, 4), "s"), ((2, 2), (3, 2), "c"),
             ((0,), (3, 2), "c"), ((), (0, 0), "c"), ((), (0, 3), "c"), ((2,), (3, 0), "c"),
             ((), (1, 1), "c")]
    for ci, (batch, (m, n), lay) in enumerate(cases):
        rng = _rng("svd", dtype, ci)
        a = spectral(rng, batch, m, n)
        A = both(a, dtype, lay)
        k = min(m, n)
        kap = 10 * max(m, n, 1)   # singular value gaps >= 1/(2k), values <= 3.5
        run(lambda L, x: L.linalg.svdvals(x), A, dtype=dtype, kappa=kap, where="svdvals")
        for full in (True, False):
            w = f"svd {batch} {m}x{n} {lay} full_matrices={full}"
            tu, ts, tvh = torch.linalg.svd(A[1], full_matrices=full)
            kres = kiln.linalg.svd(A[0], full_matrices=full)
            assert kres._fields == ("U", "S", "Vh"), w
            ku, ks, kvh = kres
            same(ks, ts, dtype, kap, w + " S")
            for kx, tx in ((ku, tu), (kvh, tvh)):
                assert tuple(kx.shape) == tuple(tx.shape), f"{w}: {kx.shape} vs {tx.shape}"
            ku, kv, tu, tv = _np(ku), np.swapaxes(_np(kvh), -1, -2), _np(tu), \
                np.swapaxes(_np(tvh), -1, -2)
            d = signs(ku[..., :, :k], tu[..., :, :k])
            close_np(ku[..., :, :k] * d, tu[..., :, :k], dtype, kap, w + " U")
            close_np(kv[..., :, :k] * d, tv[..., :, :k], dtype, kap, w + " V")
            close_np(projector(ku[..., :, k:]), projector(tu[..., :, k:]), dtype, kap, w)
            close_np(projector(kv[..., :, k:]), projector(tv[..., :, k:]), dtype, kap, w)
            close_np((ku[..., :, :k] * _np(ks)[..., None, :]) @ np.swapaxes(kv[..., :, :k],
                                                                           -1, -2),
                     a, dtype, kap, w + " U S Vh = A")
        for some in (True, False):
            w = f"legacy svd {batch} {m}x{n} {lay} some={some}"
            tu, ts, tv = torch.svd(A[1], some=some)
            ku, ks, kv = kiln.svd(A[0], some=some)
            _, _, kv2 = A[0].svd(some=some)
            same((ku.detach()[..., :0], ks, kv.detach()[..., :0]),
                 (tu[..., :0], ts, tv[..., :0]), dtype, kap, w)
            assert tuple(ku.shape) == tuple(tu.shape) and tuple(kv.shape) == tuple(tv.shape), w
            ku, kv, tu, tv = _np(ku), _np(kv), _np(tu), _np(tv)
            d = signs(ku[..., :, :k], tu[..., :, :k])
            close_np(kv[..., :, :k] * d, tv[..., :, :k], dtype, kap, w + " V (not Vh)")
            close_np(_np(kv2), kv, dtype, 1, w + " Tensor.svd")
        # compute_uv=False: S, and zero-filled U / V of full size
        run(lambda L, x: L.svd(x, compute_uv=False), A, dtype=dtype, kappa=kap,
            where="svd compute_uv=False")


@pytest.mark.parametrize("dtype", FP)
def test_pinv_rank(dtype):
    rng = _rng("pinv", dtype)
    cases = [((), 5, 3, None), ((2,), 3, 5, None), ((), 4, 4, [3.0, 2.0, 0.5, 0.0]),
             ((2, 2), 4, 3, [2.0, 1.0, 0.0]), ((0,), 3, 2, None), ((), 0, 0, None)]
    for ci, (batch, m, n, s) in enumerate(cases):
        a = spectral(rng, batch, m, n, s)
        # the kept singular values are >= 1: kappa is 3 * size (a dropped one is far below)
        kap = 10 * max(m, n, 1)
        w = f"pinv {batch} {m}x{n} s={s}"
        for lay in ("c", "t"):
            A = both(a, dtype, lay)
            # (rtol 0.2 cuts 0.6 * s_max: drops 0.5 of [3, 2, 0.5, 0], an atol of 0.2 would not)
            for kw in ({}, {"rtol": 0.1}, {"rtol": 0.2}, {"atol": 0.7},
                       {"atol": 0.7, "rtol": 0.01},
                       {"rcond": 0.2}):
                run(lambda L, x: L.linalg.pinv(x, **kw), A, dtype=dtype, kappa=kap,
                    where=f"{w} {lay} {kw}")
                if "rcond" not in kw:
                    run(lambda L, x: L.linalg.matrix_rank(x, **kw), A, dtype=dtype,
                        where=f"matrix_rank {w} {kw}")
            # pinverse's rcond 1e-15 keeps a zero singular value's rounding noise
            run(lambda L, x: (x.pinverse(rcond=0.1),) + ((L.pinverse(x),) if s is None else ()),
                A, dtype=dtype, kappa=kap, where=w + " pinverse")
            run(lambda L, x: L.linalg.matrix_rank(x, tol=0.7), A, dtype=dtype,
                where=w + " matrix_rank tol")
    # hermitian: from eigh (eigenvalues of both signs; one zero)
    for lam in ([3.0, -2.0, 1.0, 0.0], [2.5, -1.0, 0.7]):
        q = orthogonal(rng, (2,), len(lam))
        a = (q * np.array(lam)) @ np.swapaxes(q, -1, -2)
        A = both(a, dtype)
        for kw in ({}, {"atol": 0.8}, {"rtol": 0.3}):
            run(lambda L, x: L.linalg.pinv(x, hermitian=True, **kw), A, dtype=dtype,
                kappa=40, where=f"pinv hermitian {lam} {kw}")
            run(lambda L, x: L.linalg.matrix_rank(x, hermitian=True, **kw), A, dtype=dtype,
                where=f"matrix_rank hermitian {lam} {kw}")


@pytest.mark.parametrize("dtype", FP)
def test_lstsq(dtype):
    rng = _rng("lstsq", dtype)
    # (A batch, m, n, B shape, spectrum): tall / wide / square, broadcast batches, vector B
    cases = [((), 5, 3, (5, 2), None), ((2,), 3, 5, (2, 3, 2), None),
             ((3,), 4, 4, (3, 4, 2), None), ((2,), 5, 3, (2, 5), None),
             ((), 5, 3, (5, 1), [2.0, 1.0, 0.0]), ((0,), 4, 2, (0, 4, 3), None)]
    for ci, (batch, m, n, bshape, s) in enumerate(cases):
        a = spectral(rng, batch, m, n, s)
        A = both(a, dtype, "t" if ci % 2 else "c")
        B = both(rng.uniform(-1, 1, bshape), dtype)
        kap = 10 * max(m, n)
        for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
            if s is not None and driver == "gels":
                continue   # gels assumes full rank: its result is then undefined
            run(lambda L, x, b: L.linalg.lstsq(x, b, driver=driver), A, B, dtype=dtype,
                kappa=kap, where=f"lstsq {batch} {m}x{n} b={bshape} s={s} {driver}")
        run(lambda L, x, b: L.linalg.lstsq(x, b, rcond=0.6, driver="gelsd"), A, B,
            dtype=dtype, kappa=kap, where="lstsq rcond")


@pytest.mark.parametrize("dtype", FP)
def test_cond_norms(dtype):
    rng = _rng("cond", dtype)
    for ci, (batch, n, lay) in enumerate(SQUARE[:3] + SQUARE[5:]):
        a = general(rng, batch, n)
        A = both(a, dtype, lay)
        for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
            run(lambda L, x: L.linalg.cond(x, p), A, dtype=dtype, kappa=10 * n,
                where=f"cond {batch} {n} {lay} p={p}")
    # cond of a singular matrix: inf for the norms that need the inverse (torch's rule)
    s = both(spectral(rng, (2,), 3, 3, [2.0, 1.0, 0.0]), dtype)
    for p in ("fro", "nuc", 1, math.inf):
        run(lambda L, x: L.linalg.cond(x * 0), s, dtype=dtype, where=f"cond zero p={p}")
    # rectangular: p None / 2 / -2 only
    r = both(spectral(rng, (2,), 5, 3), dtype, "t")
    for p in (None, 2, -2):
        run(lambda L, x: L.linalg.cond(x, p), r, dtype=dtype, kappa=30, where=f"cond rect {p}")
    # matrix_norm / norm with the spectral orders, over other dims too
    x = both(rng.uniform(-1, 1, (2, 4, 3, 5)), dtype, "s")
    for ord_ in (2, -2, "nuc"):
        w = f"matrix_norm ord={ord_}"
        run(lambda L, t: (L.linalg.matrix_norm(t, ord_), L.linalg.norm(t, ord_, dim=(-2, -1)),
                          L.linalg.matrix_norm(t, ord_, dim=(1, 3), keepdim=True),
                          L.linalg.norm(t[0, 0], ord_),
                          L.linalg.matrix_norm(t, ord_, dim=(-1, 0))), x,
            dtype=dtype, kappa=50, where=w)
    run(lambda L, t: L.linalg.matrix_norm(t[:, :0], 2), x, dtype=dtype, where="norm empty")


@pytest.mark.parametrize("dtype", FP)
def test_power_exp(dtype):
    for ci, (batch, n, lay) in enumerate(SQUARE):
        rng = _rng("pow", dtype, ci)
        A = both(general(rng, batch, n) / 2, dtype, lay)   # ||A|| <= 1.5, ||A^-1|| <= 2
        w = f"matrix_power {batch} {n} {lay}"
        for p in (0, 1, 2, 3, 5, -1, -3):
            run(lambda L, x: (L.linalg.matrix_power(x, p), L.matrix_power(x, p),
                              x.matrix_power(p)), A, dtype=dtype, kappa=30 * max(n, 1),
                where=f"{w} n={p}")
        for scale in (0.05, 1.0, 20.0):   # under theta_13, and needing 0 / several squarings
            E = both(rng.uniform(-1, 1, (*batch, n, n)) * scale / max(n, 1), dtype, lay)
            # exp's relative condition is about ||A|| (normal-ish A): kappa grows with scale
            kap = 4 * max(n, 1) * (1 + scale)
            k, _ = run(lambda L, x: (L.linalg.matrix_exp(x), L.matrix_exp(x), x.matrix_exp()),
                       E, dtype=dtype, kappa=kap * TORCH_EXPM_SLACK[dtype],
                       where=f"matrix_exp {scale}")
            ref = expm_reference(E[0].detach().numpy().astype(np.float64))
            close_np(_np(k[0]), ref, dtype, kap, f"matrix_exp {scale} vs long double")


@pytest.mark.parametrize("dtype", FP)
def test_tensor_functions(dtype):
    rng = _rng("tensor", dtype)
    a = general(rng, (), 6).reshape(6, 2, 3)
    A = both(a, dtype)
    run(lambda L, x: L.linalg.tensorinv(x, ind=1), A, dtype=dtype, kappa=18, where="tensorinv")
    a2 = general(rng, (), 6).reshape(2, 3, 3, 2)
    run(lambda L, x: L.linalg.tensorinv(x), both(a2, dtype), dtype=dtype, kappa=18,
        where="tensorinv ind=2")
    b = both(rng.uniform(-1, 1, (6,)), dtype)
    run(lambda L, x, y: L.linalg.tensorsolve(x, y), A, b, dtype=dtype, kappa=18,
        where="tensorsolve")
    a3 = np.moveaxis(general(rng, (), 6).reshape(2, 3, 6), 2, 0)   # (6, 2, 3) -> dims=(0,)
    b2 = both(rng.uniform(-1, 1, (2, 3)), dtype)
    run(lambda L, x, y: L.linalg.tensorsolve(x, y, dims=(0,)), both(a3, dtype), b2,
        dtype=dtype, kappa=18, where="tensorsolve dims")
    x = both(rng.uniform(-1.5, 1.5, (2, 4)), dtype, "s")
    run(lambda L, t: (L.linalg.vander(t), L.linalg.vander(t, N=6), L.linalg.vander(t[0], N=2)),
        x, dtype=dtype, kappa=4, where="vander")
    for m, n, k, lay in ((5, 3, 3, "c"), (4, 4, 2, "t"), (5, 3, 0, "c"), (3, 3, 3, "s")):
        h = both(rng.uniform(-1, 1, (2, m, n)), dtype, lay)
        tau = both(rng.uniform(0, 2, (2, k)), dtype)
        run(lambda L, v, t: (L.linalg.householder_product(v, t), L.orgqr(v, t), v.orgqr(t)),
            h, tau, dtype=dtype, kappa=20 * m, where=f"householder_product {m}x{n} k={k}")
    # with geqrf's reflectors the product is the Q of the QR factorisation
    a4 = rng.uniform(-1, 1, (5, 3))
    hv, ht = torch.geqrf(torch.tensor(a4, dtype=getattr(torch, dtype)))
    q = kiln.linalg.householder_product(kiln.tensor(hv.numpy()), kiln.tensor(ht.numpy()))
    close_np(_np(q), torch.linalg.qr(torch.tensor(a4, dtype=getattr(torch, dtype)))[0].numpy()
             .astype(np.float64), dtype, 30, "householder_product of geqrf")


# ---------------------------------------------------------------------------------------
# Gradients (float64): the same random-weighted sum of the outputs on both libraries.

# kiln has no derivative of the LU factorisation yet (NotImplementedError, as the oracle
# counts gaps); when it gets one, these cases compare it with torch's.
GRAD_GAPS = {"lu_factor", "lu", "lu_rect", "lu_solve", "lu_solve_adjoint_right", "lu_unpack"}

# Conventions where kiln's gradient is a projection of torch's (reported; end-to-end through
# the function that makes the input, both agree): input index -> torch grad -> expected.
GRAD_CONVENTIONS = {
    # cholesky_solve / cholesky_inverse read only the factor's triangle, and kiln's gradient
    # is zero on the other; torch's formula fills it (it treats the factor as a full matrix)
    ("cholesky_solve", 1): lambda g: np.tril(g),
    ("cholesky_inverse", 0): lambda g: np.tril(g),
    # pinv(hermitian=True) through eigh: kiln's gradient is the symmetric part of torch's
    # (torch differentiates the general pinv formula)
    ("pinv_hermitian", 0): lambda g: (g + np.swapaxes(g, -1, -2)) / 2,
}


def _grad_case(name, arrays, fn, kappa, layouts=None, seed=0):
    dtype = "float64"
    layouts = layouts or ["c"] * len(arrays)
    ins = [both(a, dtype, lay, grad=True) for a, lay in zip(arrays, layouts)]
    outs = {}
    for lib, idx in ((torch, 1), (kiln, 0)):
        res = fn(lib, *[p[idx] for p in ins])
        res = res if isinstance(res, (tuple, list)) else (res,)
        rng = _rng("grad", name, seed)
        loss = 0
        for r in res:
            wgt = rng.uniform(-1, 1, tuple(r.shape))
            loss = loss + (r * lib.tensor(wgt, dtype=r.dtype)).sum()
        if lib is kiln and name in GRAD_GAPS:
            try:
                loss.backward()
            except NotImplementedError as e:
                oracle.STATS["not_implemented"][f"{name} backward: {e}"] += 1
                return
        else:
            loss.backward()
        outs[lib] = [p[idx + 2].grad for p in ins]
    for i, (kg, tg) in enumerate(zip(outs[kiln], outs[torch])):
        assert (kg is None) == (tg is None), f"{name}: input {i} grad kiln {kg} torch {tg}"
        if tg is None:
            continue
        conv = GRAD_CONVENTIONS.get((name, i))
        if conv is None:
            same(kg, tg, dtype, kappa, f"grad of {name} input {i}")
        else:
            close_np(_np(kg), conv(_np(tg)), dtype, kappa, f"grad of {name} input {i}")
            oracle.record(None)


def _gauge_eigh(L, res):
    lam, v = res
    c = L.tensor(np.linspace(1, 2, v.shape[-1]), dtype=v.dtype)
    return lam, (v * c) @ v.mT, v.abs()


def _gauge_svd(L, res):
    u, s, vh = res
    k = s.shape[-1]
    cu = L.tensor(np.linspace(1, 2, k), dtype=s.dtype)
    return s, (u[..., :, :k] * cu) @ vh[..., :k, :], (u[..., :, :k] * cu) @ u[..., :, :k].mT, \
        (vh[..., :k, :].mT * cu) @ vh[..., :k, :]


def _grad_cases():
    r = np.random.default_rng(7)
    g3, g4 = pivoting(r, general(r, (2,), 3)), pivoting(r, general(r, (), 4))
    p3 = spd(r, (2,), 3)
    s53, s35 = spectral(r, (2,), 5, 3), spectral(r, (), 3, 5)
    sym = symmetric(r, (2,), 4)
    b = r.uniform(-1, 1, (2, 3, 2))
    bt = r.uniform(-1, 1, (2, 2, 3))
    tri = np.triu(general(r, (2,), 3))   # unpermuted: a well-conditioned triangle
    small = r.uniform(-1, 1, (2, 3, 3)) * 0.3
    big = r.uniform(-1, 1, (3, 3)) * 3
    F = lambda L: L.linalg  # noqa: E731
    return [
        ("cholesky", [p3], lambda L, a: F(L).cholesky(a), 30, ["t"]),
        ("cholesky_upper", [p3], lambda L, a: F(L).cholesky_ex(a, upper=True).L, 30, None),
        ("lu_factor", [g3], lambda L, a: F(L).lu_factor(a).LU, 20, ["s"]),
        ("lu", [g3], lambda L, a: F(L).lu(a)[1:], 20, None),
        ("lu_rect", [s53], lambda L, a: F(L).lu(a)[1:], 20, None),
        ("lu_solve", [g3, b], lambda L, a, y: F(L).lu_solve(*F(L).lu_factor(a), y), 20, None),
        ("lu_solve_adjoint_right", [g3, bt],
         lambda L, a, y: F(L).lu_solve(*F(L).lu_factor(a), y, adjoint=True, left=False), 20,
         None),
        ("lu_unpack", [g3], lambda L, a: L.lu_unpack(*F(L).lu_factor(a))[1:], 20, None),
        ("solve", [g3, b], lambda L, a, y: F(L).solve(a, y), 20, ["t", "c"]),
        ("solve_right_vec", [g3, b[..., 0], bt],
         lambda L, a, y, z: (F(L).solve(a, z, left=False), F(L).solve_ex(a, y).result), 20,
         None),
        ("lu_solve_B", [g3, b],
         lambda L, a, y: F(L).lu_solve(*F(L).lu_factor(a.detach()), y), 20, None),
        ("lu_unpack_leaf", [g3],
         lambda L, lu: L.lu_unpack(lu, L.tensor([[1, 2, 3], [3, 2, 3]], dtype=L.int32))[1:],
         20, None),
        ("solve_triangular", [tri, b],
         lambda L, a, y: (F(L).solve_triangular(a, y, upper=True),
                          F(L).solve_triangular(a.mT, y.mT, upper=False, left=False,
                                                unitriangular=True)), 30, None),
        ("inv", [g3], lambda L, a: (F(L).inv(a), F(L).inv_ex(a).inverse, a.inverse()), 20,
         ["s"]),
        ("det", [g3], lambda L, a: (F(L).det(a), L.det(a)), 20, ["t"]),
        ("slogdet", [g3], lambda L, a: (F(L).slogdet(a).logabsdet, L.logdet(a @ a.mT),
                                        a.slogdet()[1]), 20, None),
        ("qr_tall", [s53], lambda L, a: F(L).qr(a), 30, ["t"]),
        ("qr_wide", [s35], lambda L, a: F(L).qr(a), 30, None),
        ("qr_complete_square", [g4], lambda L, a: F(L).qr(a, mode="complete"), 30, None),
        ("qr_legacy", [s53], lambda L, a: L.qr(a), 30, None),
        ("eigh", [sym], lambda L, a: _gauge_eigh(L, F(L).eigh(a)), 50, ["s"]),
        ("eigh_U", [sym], lambda L, a: _gauge_eigh(L, F(L).eigh(a, UPLO="U")), 50, None),
        ("eigvalsh", [sym], lambda L, a: F(L).eigvalsh(a), 50, None),
        ("svd_tall", [s53], lambda L, a: _gauge_svd(L, F(L).svd(a, full_matrices=False)), 50,
         ["t"]),
        ("svd_wide", [s35], lambda L, a: _gauge_svd(L, F(L).svd(a, full_matrices=False)), 50,
         None),
        ("svd_legacy", [s53], lambda L, a: _gauge_svd(L, (lambda u, s, v: (u, s, v.mT))(
            *L.svd(a))), 50, None),
        ("svdvals", [s35], lambda L, a: F(L).svdvals(a), 50, None),
        ("pinv", [s53], lambda L, a: (F(L).pinv(a), L.pinverse(a)), 50, None),
        ("pinv_hermitian", [p3], lambda L, a: F(L).pinv(a, hermitian=True), 50, None),
        ("lstsq", [s53, r.uniform(-1, 1, (2, 5, 2))],
         lambda L, a, y: F(L).lstsq(a, y).solution, 50, None),
        # (torch cannot differentiate cond for 'fro' / 1 / inf: an in-place op on inv_ex's
        # result trips its autograd)
        ("cond", [g3], lambda L, a: (F(L).cond(a), F(L).cond(a, -2)), 50, None),
        ("matrix_norm", [s53], lambda L, a: (F(L).matrix_norm(a, 2), F(L).matrix_norm(a, -2),
                                             F(L).norm(a, "nuc", dim=(-1, -2))), 50, None),
        ("matrix_power", [g3], lambda L, a: (F(L).matrix_power(a / 2, 3),
                                             F(L).matrix_power(a, -2), L.matrix_power(a, 0),
                                             a.matrix_power(1)), 50, None),
        ("matrix_exp_small", [small], lambda L, a: (F(L).matrix_exp(a), L.matrix_exp(a)), 50,
         None),
        ("matrix_exp_large", [big], lambda L, a: a.matrix_exp(), 2000, None),
        ("tensorinv", [g4.reshape(2, 2, 4)], lambda L, a: F(L).tensorinv(a), 30, None),
        ("tensorsolve", [g4.reshape(4, 2, 2), r.uniform(-1, 1, 4)],
         lambda L, a, y: F(L).tensorsolve(a, y), 30, None),
        ("vander", [r.uniform(-1, 1, (2, 3))], lambda L, x: F(L).vander(x, N=4), 10, None),
        ("householder_product", [r.uniform(-1, 1, (2, 4, 3)), r.uniform(0, 2, (2, 2))],
         lambda L, v, t: (F(L).householder_product(v, t), L.orgqr(v, t)), 30, None),
        ("cholesky_solve", [b, np.linalg.cholesky(p3)],
         lambda L, y, f: (L.cholesky_solve(y, f), L.cholesky_solve(y, f.mT, upper=True)), 30,
         None),
        ("cholesky_solve_of_cholesky", [b, p3],
         lambda L, y, a: L.cholesky_solve(y, F(L).cholesky(a)), 30, None),
        ("cholesky_inverse_of_cholesky", [p3],
         lambda L, a: L.cholesky_inverse(F(L).cholesky(a)), 30, None),
        ("cholesky_inverse", [np.linalg.cholesky(p3)],
         lambda L, f: (L.cholesky_inverse(f), f.mT.cholesky_inverse(upper=True)), 30, None),
        ("triangular_solve", [b, tri],
         lambda L, y, a: (L.triangular_solve(y, a)[0],
                          y.triangular_solve(a, transpose=True)[0]), 30, None),
    ]


@pytest.mark.parametrize("case", _grad_cases(), ids=lambda c: c[0])
def test_gradients(case):
    name, arrays, fn, kappa, layouts = case
    _grad_case(name, arrays, fn, kappa, layouts)


@pytest.mark.parametrize("name", ["solve", "cholesky"])
def test_double_backward(name):
    """d/dA of sum(W2 * dL/dA), L the first weighted sum, with create_graph."""
    r = _rng("double", name)
    a = general(r, (2,), 3) if name == "solve" else spd(r, (2,), 3)
    y = r.uniform(-1, 1, (2, 3, 2))
    w1, w2 = r.uniform(-1, 1, (2, 3, 2) if name == "solve" else (2, 3, 3)), \
        r.uniform(-1, 1, (2, 3, 3))
    grads = {}
    for L in (torch, kiln):
        A = L.tensor(a, dtype=L.float64).requires_grad_(True)
        Y = L.tensor(y, dtype=L.float64).requires_grad_(True)
        out = L.linalg.solve(A, Y) if name == "solve" else L.linalg.cholesky(A)
        (g,) = L.autograd.grad((out * L.tensor(w1)).sum(), [A], create_graph=True)
        (g * L.tensor(w2)).sum().backward()
        grads[L] = (A.grad, Y.grad if name == "solve" else None)
    same(grads[kiln][0], grads[torch][0], "float64", 100, f"double backward {name} A")
    if name == "solve":
        same(grads[kiln][1], grads[torch][1], "float64", 100, f"double backward {name} B")


# ---------------------------------------------------------------------------------------
# Errors: the same exception class as torch.

def _t(L, a, dtype="float64"):
    return L.tensor(np.asarray(a, dtype=np.float64), dtype=getattr(L, dtype))


_NOT_PD = [[1.0, 2.0], [2.0, 1.0]]
_SINGULAR = [[1.0, 2.0], [2.0, 4.0]]
_EYE = np.eye(3)

ERRORS = [
    ("cholesky not PD", lambda L: L.linalg.cholesky(_t(L, _NOT_PD))),
    ("cholesky check_errors", lambda L: L.linalg.cholesky_ex(_t(L, _NOT_PD), check_errors=True)),
    ("legacy cholesky not PD", lambda L: L.cholesky(_t(L, _NOT_PD))),
    ("solve singular", lambda L: L.linalg.solve(_t(L, _SINGULAR), _t(L, [1.0, 2.0]))),
    ("solve_ex check_errors", lambda L: L.linalg.solve_ex(_t(L, _SINGULAR), _t(L, [1.0, 2.0]),
                                                          check_errors=True)),
    ("inv singular", lambda L: L.linalg.inv(_t(L, _SINGULAR))),
    ("inverse singular", lambda L: _t(L, [_SINGULAR, np.eye(2)]).inverse()),
    ("inv_ex check_errors", lambda L: L.linalg.inv_ex(_t(L, _SINGULAR), check_errors=True)),
    ("svd NaN", lambda L: L.linalg.svd(_t(L, [[1.0, float("nan")], [0.0, 1.0]]))),
    ("svdvals NaN", lambda L: L.linalg.svdvals(_t(L, [[1.0, float("nan")], [0.0, 1.0]]))),
    ("cholesky non-square", lambda L: L.linalg.cholesky(_t(L, np.ones((2, 3))))),
    ("inv non-square", lambda L: L.linalg.inv(_t(L, np.ones((2, 3))))),
    ("det non-square", lambda L: L.linalg.det(_t(L, np.ones((2, 3))))),
    ("eigh non-square", lambda L: L.linalg.eigh(_t(L, np.ones((2, 3))))),
    ("solve non-square", lambda L: L.linalg.solve(_t(L, np.ones((2, 3))), _t(L, np.ones(2)))),
    ("matrix_power non-square", lambda L: L.linalg.matrix_power(_t(L, np.ones((2, 3))), 2)),
    ("matrix_exp non-square", lambda L: L.linalg.matrix_exp(_t(L, np.ones((2, 3))))),
    ("cholesky 1-d", lambda L: L.linalg.cholesky(_t(L, [1.0, 2.0]))),
    ("svd 1-d", lambda L: L.linalg.svd(_t(L, [1.0, 2.0]))),
    ("qr 1-d", lambda L: L.linalg.qr(_t(L, [1.0, 2.0]))),
    ("det 1-d", lambda L: L.linalg.det(_t(L, [1.0, 2.0]))),
    ("lu_factor 1-d", lambda L: L.linalg.lu_factor(_t(L, [1.0, 2.0]))),
    ("inv int", lambda L: L.linalg.inv(L.eye(3, dtype=L.int64))),
    ("lu_factor int", lambda L: L.linalg.lu_factor(L.eye(3, dtype=L.int64))),
    ("matrix_exp int", lambda L: L.linalg.matrix_exp(L.eye(3, dtype=L.int64))),
    ("det int", lambda L: L.linalg.det(L.eye(3, dtype=L.int64))),
    ("svd int", lambda L: L.linalg.svd(L.eye(3, dtype=L.int64))),
    ("cholesky int", lambda L: L.linalg.cholesky(L.eye(3, dtype=L.int32))),
    ("qr int", lambda L: L.linalg.qr(L.eye(3, dtype=L.int64))),
    ("eigh int", lambda L: L.linalg.eigh(L.eye(3, dtype=L.int64))),
    ("solve dtypes", lambda L: L.linalg.solve(_t(L, _EYE), _t(L, np.ones(3), "float32"))),
    ("lstsq dtypes", lambda L: L.linalg.lstsq(_t(L, _EYE), _t(L, np.ones((3, 1)), "float32"))),
    ("lstsq batched B", lambda L: L.linalg.lstsq(_t(L, _EYE), _t(L, np.ones((2, 3, 1))))),
    ("lstsq broadcast", lambda L: L.linalg.lstsq(_t(L, np.ones((2, 1, 3, 3))),
                                                 _t(L, np.ones((3, 3, 1))))),
    ("vander N=1", lambda L: L.linalg.vander(_t(L, [1.0, 2.0]), N=1)),
    ("solve shapes", lambda L: L.linalg.solve(_t(L, _EYE), _t(L, np.ones((4, 2))))),
    ("solve batch shapes", lambda L: L.linalg.solve(_t(L, np.ones((2, 3, 3))),
                                                    _t(L, np.ones((3, 3, 1))))),
    ("lu_solve shapes", lambda L: L.linalg.lu_solve(*L.linalg.lu_factor(_t(L, _EYE)),
                                                    _t(L, np.ones((4, 1))))),
    ("solve_triangular shapes", lambda L: L.linalg.solve_triangular(
        _t(L, _EYE), _t(L, np.ones((2, 1))), upper=False)),
    ("lstsq shapes", lambda L: L.linalg.lstsq(_t(L, _EYE), _t(L, np.ones((4, 1))))),
    ("lstsq driver", lambda L: L.linalg.lstsq(_t(L, _EYE), _t(L, np.ones((3, 1))),
                                              driver="bad")),
    ("qr mode", lambda L: L.linalg.qr(_t(L, _EYE), mode="bad")),
    ("eigh UPLO", lambda L: L.linalg.eigh(_t(L, _EYE), UPLO="X")),
    ("eigvalsh UPLO", lambda L: L.linalg.eigvalsh(_t(L, _EYE), UPLO="lower")),
    ("tensorinv ind", lambda L: L.linalg.tensorinv(_t(L, np.ones((2, 3))), ind=1)),
    ("vander 0-d", lambda L: L.linalg.vander(_t(L, 1.0))),
    ("householder_product shapes", lambda L: L.linalg.householder_product(
        _t(L, np.ones((2, 3))), _t(L, np.ones(1)))),
    ("qr mode=r backward", lambda L: L.linalg.qr(
        _t(L, np.eye(3, 2)).requires_grad_(True), mode="r").R.sum().backward()),
    ("qr complete tall backward", lambda L: L.linalg.qr(
        _t(L, np.eye(3, 2)).requires_grad_(True), mode="complete").Q.sum().backward()),
]
# (matrix_exp is left out: torch computes it in float16 / bfloat16, kiln refuses)
for _name in ("cholesky", "inv", "det", "slogdet", "svd", "svdvals", "qr", "eigh", "eigvalsh",
              "lu_factor", "pinv"):
    for _half in ("float16", "bfloat16"):
        ERRORS.append((f"{_name} {_half}", lambda L, _n=_name, _h=_half: getattr(
            L.linalg, _n)(L.eye(3, dtype=getattr(L, _h)))))
ERRORS.append(("solve float16", lambda L: L.linalg.solve(L.eye(3, dtype=L.float16),
                                                         L.ones(3, 1, dtype=L.float16))))


# Where kiln's class differs from torch's (reported; strict, so a fix is noticed).
KNOWN_ERRORS = {
    "eigh int": "torch: NotImplementedError (\"linalg_eigh_cpu\" not implemented for 'Long');"
                " kiln: RuntimeError",
    "lu_factor int": "torch: NotImplementedError (\"lu_cpu\" not implemented for 'Long'); kiln:"
                     " RuntimeError",
    "pinv float16": "torch: RuntimeError (pinv checks the dtype first); kiln: NotImplementedError",
    "pinv bfloat16": "torch: RuntimeError; kiln: NotImplementedError",
    "inv float16": "torch: RuntimeError (Low precision dtypes not supported); kiln: "
                   "NotImplementedError",
    "inv bfloat16": "torch: RuntimeError; kiln: NotImplementedError",
    "slogdet float16": "torch: RuntimeError (Low precision dtypes not supported); kiln: "
                       "NotImplementedError",
    "slogdet bfloat16": "torch: RuntimeError; kiln: NotImplementedError",
}


def _expected_class(exc):
    """kiln's counterpart of torch's exception class."""
    return kiln.linalg.LinAlgError if isinstance(exc, torch.linalg.LinAlgError) else type(exc)


def check_error(fn, name):
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ke:
        fn(kiln)
    assert type(ke.value) is _expected_class(te.value), (
        f"{name}: kiln raised {type(ke.value).__name__}: {ke.value}; torch "
        f"{type(te.value).__name__}: {te.value}")
    assert str(ke.value), name
    oracle.record(f"linalg error {name}")


def _error_params():
    return [pytest.param(c, id=c[0], marks=[pytest.mark.xfail(strict=True,
                                                                reason=KNOWN_ERRORS[c[0]])]
                         if c[0] in KNOWN_ERRORS else []) for c in ERRORS]


@pytest.mark.parametrize("case", _error_params())
def test_errors(case):
    name, fn = case
    check_error(fn, name)


def test_linalg_error_is_runtime_error():
    assert issubclass(kiln.linalg.LinAlgError, RuntimeError)
    for L in (torch, kiln):
        with pytest.raises(L.linalg.LinAlgError):
            L.linalg.cholesky(_t(L, _NOT_PD))


def test_error_batch_element():
    """Errors in a batch name the element, as torch's "(Batch element i)"."""
    good = spd(_rng("batch_err"), (3,), 2)
    bad = good.copy()
    bad[2] = _NOT_PD
    sing = good.copy()
    sing[1] = _SINGULAR
    for name, fn in (("cholesky", lambda L: L.linalg.cholesky(_t(L, bad))),
                     ("inv", lambda L: L.linalg.inv(_t(L, sing))),
                     ("solve", lambda L: L.linalg.solve(_t(L, sing), _t(L, np.ones((3, 2)))))):
        msgs = {}
        for L in (torch, kiln):
            with pytest.raises(L.linalg.LinAlgError) as e:
                fn(L)
            msgs[L] = str(e.value)
        for L in (torch, kiln):
            want = "(Batch element 2)" if name == "cholesky" else "(Batch element 1)"
            assert want in msgs[L], f"{name}: {L.__name__} says {msgs[L]!r}"
        oracle.record(f"linalg error {name}")


def test_half_not_implemented():
    """torch: NotImplementedError "... not implemented for 'Half'"; kiln the same class."""
    for L in (torch, kiln):
        with pytest.raises(NotImplementedError):
            L.linalg.cholesky(L.eye(3, dtype=L.float16))


# ---------------------------------------------------------------------------------------
# Threaded paths: a batch of 64 small matrices (spread over OpenMP threads) and one 300x300
# matrix (OpenBLAS threads inside the one call).

@pytest.mark.parametrize("dtype", FP)
def test_batch_of_64(dtype):
    rng = _rng("batch64", dtype)
    a, p, s = general(rng, (64,), 5), spd(rng, (64,), 5), symmetric(rng, (64,), 5)
    A, P, S = both(a, dtype), both(p, dtype, "t"), both(s, dtype)
    B = both(rng.uniform(-1, 1, (64, 5, 2)), dtype)
    run(lambda L, x, y: (L.linalg.solve(x, y), L.linalg.inv(x), L.linalg.det(x),
                         L.linalg.lu_factor(x), L.linalg.svdvals(x)), A, B,
        dtype=dtype, kappa=20, where="batch 64")
    run(lambda L, x: (L.linalg.cholesky(x), L.linalg.eigvalsh(x)), P, dtype=dtype, kappa=30,
        where="batch 64 spd")
    run(lambda L, x: L.linalg.eigvalsh(x), S, dtype=dtype, kappa=30, where="batch 64 eigh")
    tl, tv = torch.linalg.eigh(S[1])
    kl, kv = kiln.linalg.eigh(S[0])
    kv, tv = _np(kv), _np(tv)
    close_np(kv * signs(kv, tv), tv, dtype, 50, "batch 64 eigenvectors")
    tq, tr = torch.linalg.qr(A[1])
    kq, kr = kiln.linalg.qr(A[0])
    _check_qr(kq, kr, tq, tr, a, dtype, 30, "batch 64 qr", "reduced")


@pytest.mark.parametrize("dtype", FP)
def test_300x300(dtype):
    rng = _rng("big", dtype)
    n = 300
    a = rng.uniform(-1, 1, (n, n)) / n + 2 * np.eye(n)
    A = both(a, dtype)
    P = both(a @ a.T, dtype)          # eigenvalues in about [1, 9]
    B = both(rng.uniform(-1, 1, (n, 4)), dtype)
    # cond(A) < 3; rounding grows like n in the worst case, sqrt(n) typically
    kap = 3 * math.sqrt(n)
    run(lambda L, x, y: (L.linalg.solve(x, y), L.linalg.inv(x), L.linalg.lu_factor(x),
                         L.linalg.slogdet(x)), A, B, dtype=dtype, kappa=kap, where="300 lu")
    run(lambda L, x: (L.linalg.cholesky(x), L.linalg.eigvalsh(x), L.linalg.svdvals(x)), P,
        dtype=dtype, kappa=3 * kap, where="300 spd")
    tq, tr = torch.linalg.qr(A[1])
    kq, kr = kiln.linalg.qr(A[0])
    _check_qr(kq, kr, tq, tr, a, dtype, kap, "300 qr", "reduced")
