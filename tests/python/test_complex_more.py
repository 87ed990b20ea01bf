"""Complex tensors, second set of ops (session 40), against torch 2.13: pow, tan, sigmoid,
expm1, log1p, log2, rsqrt; prod / cumsum / cumprod; any / all / nonzero; var / std; dot /
vdot / addmm / baddbmm; the data-movement ops (masked_fill, index_put, gather, scatter, tril /
triu, pad, masked_select); linalg.eig / eigvals of real matrices; and gradients through the
new functions (torch's conjugate-Wirtinger convention)."""
import numpy as np
import pytest
import torch

import kiln
import oracle

C_DTYPES = ["complex64", "complex128"]


def K(t):
    return kiln.from_numpy(np.array(t.detach().numpy(), order="C", copy=True))


def T(k):
    return torch.from_numpy(np.array(k.numpy(), order="C", copy=True))


def cdata(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * scale
    return torch.from_numpy(a.astype(np.complex64 if dtype == "complex64" else np.complex128))


def rtol(dtype):
    return 1e-12 if "128" in str(dtype) or "float64" in str(dtype) else 2e-5


def same(got, want, tol=None, op=None):
    """Same dtype and shape, every element within tol of want relative to max(|want|, 1e-3):
    an elementwise bound, so small values are checked too."""
    assert isinstance(got, kiln.Tensor), type(got)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    oracle.record(op)
    g = T(got)
    if want.dtype == torch.bool or not (want.is_floating_point() or want.is_complex()):
        assert torch.equal(g, want), f"\n{g}\n{want}"
        return
    tol = rtol(want.dtype) if tol is None else tol
    g, w = g.to(torch.complex128), want.to(torch.complex128)
    assert torch.equal(torch.isnan(g), torch.isnan(w)), f"NaN positions\n{g}\n{w}"
    fin = torch.isfinite(w)
    assert torch.equal(g[~fin & ~torch.isnan(w)], w[~fin & ~torch.isnan(w)])
    g, w = g[fin], w[fin]
    if w.numel():
        err = ((g - w).abs() / w.abs().clamp(min=1e-3)).max().item()
        assert err <= tol, f"max relative error {err:.3g} > {tol:.3g}\n{g}\n{w}"


# --- elementwise functions ---------------------------------------------------------------

UNARY = ["tan", "sigmoid", "expm1", "log1p", "log2", "rsqrt"]


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_functions_match_torch(op, dtype):
    for scale, seed in ((1.0, 1), (3.0, 2), (1e-4, 3)):  # small values: expm1 / log1p accuracy
        x = cdata((64,), dtype, seed, scale)
        same(getattr(kiln, op)(K(x)), getattr(torch, op)(x), op=op)


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_pow_matches_torch(dtype):
    x = cdata((5, 7), dtype, 4)
    y = cdata((5, 7), dtype, 5)
    for e in (0, 1, 2, 3, 0.5, -1, -2, 1.5, -0.3, 1 + 1j, 2j):
        same(K(x) ** e, x ** e, op="pow")
    same(K(x) ** K(y), x ** y, op="pow")
    same(2 ** K(x), 2 ** x, op="pow")
    same(kiln.pow(K(x), K(y[0])), torch.pow(x, y[0]), op="pow")  # broadcast
    # zero base
    z = torch.tensor([0j, 1 + 0j, 0j], dtype=x.dtype)
    for e in (0, 1, 2, 0.5, 2 + 1j):
        same(K(z) ** e, z ** e, op="pow")


def test_pow_small_integer_exponents_are_exact():
    z = kiln.tensor([1 + 2j, -3 + 0.5j])
    assert (z ** 2).tolist() == [-3 + 4j, 8.75 - 3j]
    assert (z ** 3).tolist() == [(1 + 2j) ** 3, (-3 + 0.5j) ** 3]


def test_real_tensor_to_complex_power_promotes():
    x = torch.tensor([1.0, 2.0, 4.0])
    same(K(x) ** (0.5 + 1j), x ** (0.5 + 1j), op="pow")


# --- reductions --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_prod_cumsum_cumprod_match_torch(dtype):
    x = cdata((3, 4, 5), dtype, 6, 0.7)
    for xs in (x, x.transpose(0, 2)):
        kx = K(xs) if xs.is_contiguous() else K(x).transpose(0, 2)
        same(kx.prod(), xs.prod(), op="prod")
        for d in range(3):
            same(kx.prod(d), xs.prod(d), op="prod")
            same(kx.prod(d, keepdim=True), xs.prod(d, keepdim=True), op="prod")
            same(kx.cumsum(d), xs.cumsum(d), op="cumsum")
            same(kx.cumprod(d), xs.cumprod(d), op="cumprod")
    e = torch.zeros(0, 3, dtype=x.dtype)
    same(K(e).prod(0), e.prod(0), op="prod")
    s = torch.tensor(2 + 1j, dtype=x.dtype)
    same(K(s).cumsum(0), s.cumsum(0), op="cumsum")


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_any_all_nonzero_count_nonzero(dtype):
    x = torch.tensor([[0j, 1j, 0j], [2 + 0j, 0j, 0j], [0j, 0j, 0j]], dtype=getattr(torch, dtype))
    kx = K(x)
    same(kx.any(), x.any(), op="any")
    same(kx.all(), x.all(), op="all")
    for d in (0, 1):
        same(kx.any(d), x.any(d), op="any")
        same(kx.all(d), x.all(d), op="all")
    same(kx.nonzero(), x.nonzero(), op="nonzero")
    same(kiln.count_nonzero(kx), torch.count_nonzero(x), op="count_nonzero")


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_var_std_are_real_as_torch(dtype):
    x = cdata((4, 6), dtype, 7)
    for kw in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}, {"correction": 0}, {"dim": (0, 1)}):
        same(kiln.var(K(x), **kw), torch.var(x, **kw), op="var")
        same(kiln.std(K(x), **kw), torch.std(x, **kw), op="std")
    a, b = kiln.var_mean(K(x), dim=1), torch.var_mean(x, dim=1)
    same(a[0], b[0], op="var_mean")
    same(a[1], b[1], op="var_mean")


# --- products ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_dot_vdot_addmm_baddbmm(dtype):
    a, b = cdata((7,), dtype, 8), cdata((7,), dtype, 9)
    same(kiln.dot(K(a), K(b)), torch.dot(a, b), op="dot")
    same(kiln.vdot(K(a), K(b)), torch.vdot(a, b), op="vdot")
    m, p, q = cdata((3, 4), dtype, 10), cdata((4, 5), dtype, 11), cdata((3, 5), dtype, 12)
    same(kiln.addmm(K(q), K(m), K(p)), torch.addmm(q, m, p), op="addmm")
    same(kiln.addmm(K(q), K(m), K(p), beta=0.5, alpha=2 - 1j),
         torch.addmm(q, m, p, beta=0.5, alpha=2 - 1j), op="addmm")
    nan_q = q.clone()
    nan_q[0, 0] = complex("nan")
    same(kiln.addmm(K(nan_q), K(m), K(p), beta=0), torch.addmm(nan_q, m, p, beta=0), op="addmm")
    bm, bp, bq = cdata((2, 3, 4), dtype, 13), cdata((2, 4, 5), dtype, 14), cdata((2, 3, 5), dtype, 15)
    same(kiln.baddbmm(K(bq), K(bm), K(bp), alpha=0.5), torch.baddbmm(bq, bm, bp, alpha=0.5),
         op="baddbmm")
    with pytest.raises(RuntimeError):
        kiln.dot(K(a), K(b[:5]))
    with pytest.raises(RuntimeError):
        kiln.dot(K(a), K(b.to(torch.complex128 if dtype == "complex64" else torch.complex64)))


# --- moving data -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_data_movement_ops(dtype):
    x = cdata((4, 5), dtype, 16)
    kx = K(x)
    mask = torch.tensor(np.random.default_rng(0).integers(0, 2, (4, 5)).astype(bool))
    same(kx.masked_fill(K(mask), 2 - 3j), x.masked_fill(mask, 2 - 3j), op="masked_fill")
    same(kx.masked_fill(K(mask), 1.5), x.masked_fill(mask, 1.5), op="masked_fill")
    same(kiln.masked_select(kx, K(mask)), torch.masked_select(x, mask), op="masked_select")
    idx = torch.tensor([[0, 3, 1, 2, 0]])
    same(kx.gather(0, K(idx)), x.gather(0, idx), op="gather")
    src = cdata((1, 5), dtype, 17)
    same(kx.scatter(0, K(idx), K(src)), x.scatter(0, idx, src), op="scatter")
    same(kx.scatter(1, K(idx[:, :3]), 1j), x.scatter(1, idx[:, :3], 1j), op="scatter")
    for k in (-1, 0, 2):
        same(kx.tril(k), x.tril(k), op="tril")
        same(kx.triu(k), x.triu(k), op="triu")
    rows = torch.tensor([0, 2, 0])
    vals = cdata((3, 5), dtype, 18)
    for acc in (False, True):
        same(kx.index_put((K(rows),), K(vals), accumulate=acc),
             x.index_put((rows,), vals, accumulate=acc), op="index_put")
    F, tF = kiln.nn.functional, torch.nn.functional
    for mode in ("constant", "reflect", "replicate", "circular"):
        xx = x[None]
        same(F.pad(K(xx), (2, 1), mode=mode), tF.pad(xx, (2, 1), mode=mode), op="pad")
    same(F.pad(kx, (1, 1, 2, 0), value=0.5), tF.pad(x, (1, 1, 2, 0), value=0.5), op="pad")


# --- linalg.eig --------------------------------------------------------------------------

def _sorted(w):
    w = w.to(torch.complex128)
    key = w.real * 1e6 + w.imag  # distinct real parts in these tests, pairs by imaginary part
    return torch.gather(w, -1, torch.argsort(key, dim=-1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 6, 6), (20, 20)])
def test_eig_of_real_matrices(shape, dtype):
    A = torch.from_numpy(np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype))
    w, V = kiln.linalg.eig(K(A))
    tw, tV = torch.linalg.eig(A)
    assert str(w.dtype) == "kiln." + str(tw.dtype).split(".")[-1]
    assert tuple(V.shape) == tuple(tV.shape)
    tol = 1e-10 if dtype == "float64" else 2e-4
    wt, Vt = T(w).to(torch.complex128), T(V).to(torch.complex128)
    # A V = V diag(w), unit eigenvectors, and torch's eigenvalues.
    Ac = A.to(torch.complex128)
    scale = max(1.0, Ac.abs().max().item())
    assert ((Ac @ Vt - Vt * wt[..., None, :]).abs().max() / scale).item() <= tol * shape[-1]
    assert ((Vt.abs() ** 2).sum(-2) - 1).abs().max().item() <= tol
    assert (_sorted(wt) - _sorted(tw)).abs().max().item() <= tol * scale
    same(kiln.linalg.eigvals(K(A)), T(w), tol, op="linalg.eigvals")
    oracle.record("linalg.eig")


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_eig_of_complex_matrices(dtype):
    A = cdata((2, 5, 5), dtype, 24)
    w, V = kiln.linalg.eig(K(A))
    tw, tV = torch.linalg.eig(A)
    tol = 1e-10 if dtype == "complex128" else 2e-4
    wt, Vt = T(w).to(torch.complex128), T(V).to(torch.complex128)
    Ac = A.to(torch.complex128)
    assert (Ac @ Vt - Vt * wt[..., None, :]).abs().max().item() <= tol * 10
    assert ((Vt.abs() ** 2).sum(-2) - 1).abs().max().item() <= tol
    # the same eigenvalues as torch (compared sorted: the order is LAPACK's, which may differ
    # between LAPACK builds), and eigvals equal to eig's values
    assert (_sorted(wt) - _sorted(tw)).abs().max().item() <= tol * 10
    same(kiln.linalg.eigvals(K(A)), T(w), tol, op="linalg.eigvals")
    oracle.record("linalg.eig")


def test_eig_exact_cases_and_errors():
    w = kiln.linalg.eigvals(kiln.tensor([[0.0, -1.0], [1.0, 0.0]]))
    assert sorted(w.tolist(), key=lambda z: z.imag) == [-1j, 1j]
    w, V = kiln.linalg.eig(kiln.tensor([[2.0, 0.0], [0.0, 3.0]], dtype=kiln.float64))
    assert w.tolist() == [2, 3] and V.tolist() == [[1, 0], [0, 1]]
    assert tuple(kiln.linalg.eig(kiln.zeros(0, 0))[0].shape) == (0,)
    with pytest.raises(RuntimeError, match="infs or NaNs"):
        kiln.linalg.eig(kiln.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(RuntimeError):
        kiln.linalg.eig(kiln.ones(2, 3))
    with pytest.raises(NotImplementedError):
        kiln.linalg.eig(kiln.ones(2, 2, requires_grad=True))


# --- gradients ---------------------------------------------------------------------------

GRAD_FNS = {
    "tan": lambda L, z: L.tan(z * 0.3),
    "sigmoid": lambda L, z: L.sigmoid(z),
    "expm1": lambda L, z: L.expm1(z),
    "log1p": lambda L, z: L.log1p(z),
    "log2": lambda L, z: L.log2(z),
    "rsqrt": lambda L, z: L.rsqrt(z),
    "pow 2": lambda L, z: z ** 2,
    "pow 1.5": lambda L, z: z ** 1.5,
    "pow complex": lambda L, z: z ** (0.5 - 1j),
    "pow tensor": lambda L, z: z ** (z * 0.5),
    "prod": lambda L, z: z.prod(0, keepdim=True),
    "cumsum": lambda L, z: z.cumsum(0),
    "var": lambda L, z: z.var(0, keepdim=True) + 0j,
}


@pytest.mark.parametrize("name", list(GRAD_FNS))
def test_gradients_through_complex_functions(name):
    z = cdata((6,), "complex128", 19) + 2
    zt = z.clone().requires_grad_(True)
    (GRAD_FNS[name](torch, zt).abs() ** 2).sum().backward()
    zk = K(z).requires_grad_(True)
    (GRAD_FNS[name](kiln, zk).abs() ** 2).sum().backward()
    same(zk.grad, zt.grad, 1e-10, op="autograd")


# --- linalg on complex matrices: LU, solve, inv, det (getrf / getrs) -----------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_complex_solve_inv_det_lu_match_torch(dtype):
    A = cdata((3, 4, 4), dtype, 20) + 2 * torch.eye(4, dtype=getattr(torch, dtype))
    B = cdata((3, 4, 2), dtype, 21)
    tol = 1e-9 if dtype == "complex128" else 2e-3
    L = kiln.linalg
    same(L.solve(K(A), K(B)), torch.linalg.solve(A, B), tol, op="linalg.solve")
    same(L.solve(K(A), K(B[..., 0])), torch.linalg.solve(A, B[..., 0]), tol, op="linalg.solve")
    same(L.inv(K(A)), torch.linalg.inv(A), tol, op="linalg.inv")
    same(L.det(K(A)), torch.linalg.det(A), tol, op="linalg.det")
    same(L.matrix_exp(K(A) * 0.3), torch.linalg.matrix_exp(A * 0.3), tol, op="linalg.matrix_exp")
    for got, want in zip(L.lu(K(A)), torch.linalg.lu(A)):
        same(got, want, tol, op="linalg.lu")
    LU, piv = L.lu_factor(K(A))
    tLU, tpiv = torch.linalg.lu_factor(A)
    same(LU, tLU, tol, op="linalg.lu_factor")
    same(L.lu_solve(LU, piv, K(B)), torch.linalg.lu_solve(tLU, tpiv, B), tol, op="linalg.lu_solve")
    with pytest.raises(RuntimeError, match="singular"):
        L.inv(kiln.zeros(2, 2, dtype=getattr(kiln, dtype)))


@pytest.mark.parametrize("name", ["solve A", "solve B", "inv", "det", "matrix_exp"])
def test_complex_linalg_gradients(name):
    A = cdata((2, 3, 3), "complex128", 22) + 2 * torch.eye(3, dtype=torch.complex128)
    B = cdata((2, 3, 2), "complex128", 23)
    fns = {
        "solve A": lambda L, a, b: L.linalg.solve(a, b.detach()),
        "solve B": lambda L, a, b: L.linalg.solve(a.detach(), b),
        "inv": lambda L, a, b: L.linalg.inv(a),
        "det": lambda L, a, b: L.linalg.det(a),
        "matrix_exp": lambda L, a, b: L.linalg.matrix_exp(a * 0.5),
    }
    at, bt = A.clone().requires_grad_(True), B.clone().requires_grad_(True)
    ak, bk = K(A).requires_grad_(True), K(B).requires_grad_(True)
    (fns[name](torch, at, bt).abs() ** 2).sum().backward()
    (fns[name](kiln, ak, bk).abs() ** 2).sum().backward()
    for gk, gt in ((ak.grad, at.grad), (bk.grad, bt.grad)):
        if gt is not None:
            same(gk, gt, 1e-9, op="autograd")


@pytest.mark.parametrize("fn", ["slogdet"])
def test_complex_linalg_without_kernels_refuse_cleanly(fn):
    A = kiln.eye(3, dtype=kiln.complex64)
    with pytest.raises((NotImplementedError, RuntimeError)):
        getattr(kiln.linalg, fn)(A)


def _hermitian_pd(dtype, seed, batch=(2,), n=4):
    X = cdata(batch + (n, n), dtype, seed)
    return X @ X.mH + torch.eye(n, dtype=X.dtype)


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_complex_cholesky_eigh_solve_triangular_match_torch(dtype):
    A = _hermitian_pd(dtype, 25)
    tol = 1e-10 if dtype == "complex128" else 5e-4
    L = kiln.linalg
    for upper in (False, True):
        same(L.cholesky(K(A), upper=upper), torch.linalg.cholesky(A, upper=upper), tol,
             op="linalg.cholesky")
    for uplo in ("L", "U"):
        same(L.eigvalsh(K(A), uplo), torch.linalg.eigvalsh(A, uplo), tol, op="linalg.eigvalsh")
    w, Q = L.eigh(K(A))
    tw, tQ = torch.linalg.eigh(A)
    same(w, tw, tol, op="linalg.eigh")
    Qt = T(Q)
    # eigenvectors up to a phase each: |<q_k, torch's q_k>| = 1, and A Q = Q diag(w)
    assert ((Qt.conj() * tQ).sum(-2).abs() - 1).abs().max().item() <= tol * 10
    assert (A @ Qt - Qt * tw[..., None, :]).abs().max().item() <= tol * 10 * A.abs().max().item()
    B = cdata((2, 4, 3), dtype, 26)
    Bl = cdata((2, 3, 4), dtype, 27)
    for upper in (False, True):
        M = A.triu() if upper else A.tril()
        same(L.solve_triangular(K(M), K(B), upper=upper), torch.linalg.solve_triangular(
            M, B, upper=upper), tol, op="linalg.solve_triangular")
        same(L.solve_triangular(K(M), K(Bl), upper=upper, left=False),
             torch.linalg.solve_triangular(M, Bl, upper=upper, left=False), tol,
             op="linalg.solve_triangular")


@pytest.mark.parametrize("name", ["cholesky", "cholesky upper", "eigvalsh", "eigh",
                                  "solve_triangular"])
def test_complex_hermitian_gradients(name):
    A = _hermitian_pd("complex128", 28)
    B = cdata((2, 4, 3), "complex128", 29)
    weights = torch.arange(4.0).tolist()
    fns = {
        "cholesky": lambda L, a: L.linalg.cholesky(a),
        "cholesky upper": lambda L, a: L.linalg.cholesky(a, upper=True),
        "eigvalsh": lambda L, a: L.linalg.eigvalsh(a),
        # a loss that does not depend on the eigenvectors' phases (torch requires that)
        "eigh": lambda L, a: (L.linalg.eigh(a)[1].abs() ** 2 * weights[2]).sum()
        + L.linalg.eigh(a)[0].sum(),
        "solve_triangular": lambda L, a: L.linalg.solve_triangular(
            a.triu(), K(B) if L is kiln else B, upper=True),
    }
    at, ak = A.clone().requires_grad_(True), K(A).requires_grad_(True)
    (fns[name](torch, at).abs() ** 2).sum().backward()
    (fns[name](kiln, ak).abs() ** 2).sum().backward()
    same(ak.grad, at.grad, 1e-9, op="autograd")


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 3), (2, 3, 5), (4, 4)])
def test_complex_qr_svd_match_torch(shape, dtype):
    A = cdata(shape, dtype, 30)
    tol = 1e-10 if dtype == "complex128" else 5e-4
    L = kiln.linalg
    for mode in ("reduced", "complete", "r"):
        (Q, R), (tQ, tR) = L.qr(K(A), mode), torch.linalg.qr(A, mode)
        same(R, tR, tol, op="linalg.qr")
        if mode != "r":
            same(Q, tQ, tol, op="linalg.qr")
    k = min(shape[-2:])
    for full in (True, False):
        U, S, Vh = L.svd(K(A), full_matrices=full)
        tU, tS, tVh = torch.linalg.svd(A, full_matrices=full)
        same(S, tS, tol, op="linalg.svd")  # real singular values
        assert tuple(U.shape) == tuple(tU.shape) and tuple(Vh.shape) == tuple(tVh.shape)
        Ut, Vht = T(U).to(torch.complex128), T(Vh).to(torch.complex128)
        rec = (Ut[..., :, :k] * T(S).to(torch.complex128)[..., None, :]) @ Vht[..., :k, :]
        assert (rec - A.to(torch.complex128)).abs().max().item() <= tol * 10
        eye = torch.eye(Ut.shape[-1], dtype=torch.complex128)
        assert (Ut.mH @ Ut - eye).abs().max().item() <= tol * 10  # unitary
    same(L.svdvals(K(A)), torch.linalg.svdvals(A), tol, op="linalg.svdvals")


@pytest.mark.parametrize("name", ["qr R", "qr Q", "svdvals", "svd product"])
def test_complex_qr_svd_gradients(name):
    A = cdata((2, 5, 3), "complex128", 31)
    fns = {
        "qr R": lambda L, a: L.linalg.qr(a)[1],
        "qr Q": lambda L, a: L.linalg.qr(a)[0],
        "svdvals": lambda L, a: L.linalg.svdvals(a),
        # U diag(S) Vh: independent of the singular vectors' phases (torch requires that)
        "svd product": lambda L, a: (lambda u, s, vh: (u * s[..., None, :]) @ vh)(
            *L.linalg.svd(a, full_matrices=False)),
    }
    at, ak = A.clone().requires_grad_(True), K(A).requires_grad_(True)
    (fns[name](torch, at).abs() ** 2).sum().backward()
    (fns[name](kiln, ak).abs() ** 2).sum().backward()
    same(ak.grad, at.grad, 1e-9, op="autograd")
