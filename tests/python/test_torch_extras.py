"""torch 2.13 public functions composed in Python (kiln/_composite_lowrank.py,
kiln/_composite_extra.py), against torch on the same inputs: svd_lowrank / pca_lowrank /
lobpcg (randomised: invariant quantities against torch.linalg on the same matrix),
histogramdd, segment_reduce, nonzero_static, frobenius_norm / nuclear_norm / norm_except_dim,
the functional rnn cells (values and gradients), and Tensor.type / is_inference / is_pinned /
pin_memory / output_nr / is_set_to."""
import warnings

import numpy as np
import pytest
import torch

import kiln
import oracle

DTYPES = ["float32", "float64"]
TOL = {"float32": 2e-5, "float64": 1e-11}


def K(t):
    return kiln.from_numpy(np.array(t.detach().numpy(), order="C", copy=True))


def T(k):
    return torch.from_numpy(np.array(k.detach().numpy(), order="C", copy=True))


def data(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(dtype))


def same(got, want, tol=None, op=None):
    """Same dtype and shape, values within tol relative to max(|want|, 1) (NaN where torch has
    NaN, the same infinities)."""
    assert isinstance(got, kiln.Tensor), type(got)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    oracle.record(op)
    g = T(got)
    if not want.is_floating_point():
        assert torch.equal(g, want), f"\n{g}\n{want}"
        return
    tol = TOL[str(want.dtype).split(".")[-1]] if tol is None else tol
    g, w = g.double(), want.double()
    assert torch.equal(torch.isnan(g), torch.isnan(w)), f"NaN positions\n{g}\n{w}"
    inf = torch.isinf(w)
    assert torch.equal(g[inf], w[inf]), f"\n{g}\n{w}"
    fin = torch.isfinite(w)
    if fin.any():
        err = ((g[fin] - w[fin]).abs() / w[fin].abs().clamp(min=1.0)).max().item()
        assert err <= tol, f"max relative error {err:.3g} > {tol:.3g}\n{g}\n{w}"


def raises_like(fn_kiln, fn_torch):
    """Both raise, with the same exception type."""
    with pytest.raises(Exception) as want:
        fn_torch()
    with pytest.raises(want.type):
        fn_kiln()
    oracle.record(None)


# --- svd_lowrank / pca_lowrank ------------------------------------------------------------

def low_rank(shape, rank, dtype, seed):
    rng = np.random.default_rng(seed)
    *batch, m, n = shape
    a = rng.standard_normal(tuple(batch) + (m, rank)) @ rng.standard_normal(tuple(batch) + (rank, n))
    return torch.from_numpy(a.astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(20, 12), (12, 20), (3, 15, 9), (2, 2, 9, 14)])
def test_svd_lowrank_recovers_a_low_rank_matrix(shape, dtype):
    A = low_rank(shape, 4, dtype, seed=sum(shape))
    kiln.manual_seed(0)
    U, S, V = kiln.svd_lowrank(K(A), q=6, niter=2)
    m, n = shape[-2:]
    batch = tuple(shape[:-2])
    assert tuple(U.shape) == batch + (m, 6) and tuple(S.shape) == batch + (6,) \
        and tuple(V.shape) == batch + (n, 6)
    assert str(U.dtype) == f"kiln.{dtype}"
    want = torch.linalg.svdvals(A)[..., :6]
    tol = 1e-4 if dtype == "float32" else 1e-10
    same(S[..., :4], want[..., :4], tol=tol, op="svd_lowrank")
    scale = want[..., :1].max().item()
    assert S[..., 4:].abs().max().item() <= tol * scale  # rank 4: the rest vanish
    rec = T(U) @ torch.diag_embed(T(S)) @ T(V).mT
    assert (rec - A).abs().max().item() <= tol * scale
    eye = torch.eye(4, dtype=A.dtype)  # the leading singular vectors are orthonormal
    assert (T(U)[..., :4].mT @ T(U)[..., :4] - eye).abs().max().item() <= tol * 10
    assert (T(V)[..., :4].mT @ T(V)[..., :4] - eye).abs().max().item() <= tol * 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_lowrank_of_a_full_matrix_approximates_the_leading_values(dtype):
    # a decaying spectrum: with q = 10 and 4 subspace iterations the top 3 are accurate
    rng = np.random.default_rng(3)
    Qa, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    Qb, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    s = 2.0 ** -np.arange(30)
    A = torch.from_numpy(((Qa[:, :30] * s) @ Qb.T).astype(dtype))
    kiln.manual_seed(1)
    _, S, _ = kiln.svd_lowrank(K(A), q=10, niter=4)
    same(S[:3], torch.linalg.svdvals(A)[:3], tol=1e-4 if dtype == "float32" else 1e-9,
         op="svd_lowrank")
    # torch's own randomised result has the same leading values
    torch.manual_seed(1)
    same(S[:3], torch.svd_lowrank(A, q=10, niter=4)[1][:3], tol=1e-4, op="svd_lowrank")


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_lowrank_with_M_factors_A_minus_M(dtype):
    A = low_rank((16, 10), 3, dtype, seed=5)
    M = data((1, 10), dtype, seed=6)  # broadcast to A's shape, as torch
    kiln.manual_seed(2)
    U, S, V = kiln.svd_lowrank(K(A + M), q=5, niter=2, M=K(M))
    tol = 1e-4 if dtype == "float32" else 1e-10
    same(S[:3], torch.linalg.svdvals(A)[:3], tol=tol, op="svd_lowrank")
    rec = T(U) @ torch.diag_embed(T(S)) @ T(V).mT
    assert (rec - A).abs().max().item() <= tol * torch.linalg.svdvals(A)[0].item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(25, 8), (8, 25), (2, 18, 7)])
def test_pca_lowrank_matches_the_svd_of_the_centred_matrix(shape, dtype):
    A = low_rank(shape, 3, dtype, seed=7) + data(shape[-1:], dtype, seed=8) * 5  # offset mean
    kiln.manual_seed(3)
    U, S, V = kiln.pca_lowrank(K(A))
    q = min(6, *shape[-2:])
    assert tuple(S.shape) == tuple(shape[:-2]) + (q,)
    C = A - A.mean(-2, keepdim=True)
    want = torch.linalg.svdvals(C)[..., :q]
    tol = 1e-4 if dtype == "float32" else 1e-10
    same(S[..., :3], want[..., :3], tol=tol, op="pca_lowrank")
    rec = T(U) @ torch.diag_embed(T(S)) @ T(V).mT
    assert (rec - C).abs().max().item() <= tol * want.max().item()
    # center=False: the SVD of A itself (rank 4: the low-rank part and the offset rows)
    _, S2, _ = kiln.pca_lowrank(K(A), q=4, center=False)
    same(S2, torch.linalg.svdvals(A)[..., :4], tol=tol, op="pca_lowrank")


def test_pca_lowrank_bad_arguments_raise_as_torch():
    A = data((6, 4), "float32")
    raises_like(lambda: kiln.pca_lowrank(K(A), q=5), lambda: torch.pca_lowrank(A, q=5))
    raises_like(lambda: kiln.pca_lowrank(K(A), q=-1), lambda: torch.pca_lowrank(A, q=-1))
    raises_like(lambda: kiln.pca_lowrank(K(A), niter=-1), lambda: torch.pca_lowrank(A, niter=-1))


def test_svd_lowrank_is_differentiable_like_torch():
    # with the same random basis the gradient of the leading singular value is u1 v1^T
    A = low_rank((10, 7), 3, "float64", seed=9)
    a = K(A).requires_grad_(True)
    kiln.manual_seed(4)
    U, S, V = kiln.svd_lowrank(a, q=4, niter=2)
    S[0].backward()
    At = A.clone().requires_grad_(True)
    torch.linalg.svdvals(At)[0].backward()
    same(a.grad, At.grad, tol=1e-8, op="svd_lowrank")


# --- lobpcg -------------------------------------------------------------------------------

def spd(m, dtype, seed, lo=1.0, hi=10.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((m, m)))
    ev = np.linspace(lo, hi, m)
    return torch.from_numpy(((Q * ev) @ Q.T).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_standard_problem_matches_eigh(dtype, largest):
    A = spd(30, dtype, seed=11)
    kiln.manual_seed(5)
    E, X = kiln.lobpcg(K(A), k=3, largest=largest)
    w = torch.linalg.eigvalsh(A.double())
    want = w.flip(0)[:3] if largest else w[:3]
    assert tuple(E.shape) == (3,) and tuple(X.shape) == (30, 3)
    assert str(E.dtype) == f"kiln.{dtype}"
    tol = 1e-4 if dtype == "float32" else 1e-10
    same(E.double(), want, tol=tol, op="lobpcg")
    # torch orders them the same way
    torch.manual_seed(5)
    same(E.double(), torch.lobpcg(A, k=3, largest=largest)[0].double(), tol=tol, op="lobpcg")
    # the eigenvectors: A x = lambda x, orthonormal
    Xt, Et = T(X).double(), T(E).double()
    res = (A.double() @ Xt - Xt * Et).norm(dim=0).max().item()
    assert res <= (2e-2 if dtype == "float32" else 1e-6)
    assert (Xt.mT @ Xt - torch.eye(3, dtype=torch.float64)).abs().max().item() <= 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_lobpcg_generalized_problem_matches_eigh(dtype):
    m = 24
    A = spd(m, "float64", seed=12)
    rng = np.random.default_rng(13)
    G = rng.standard_normal((m, m))
    B = torch.from_numpy(G @ G.T / m + np.eye(m))
    L = torch.linalg.cholesky(B)
    C = torch.linalg.solve_triangular(L, torch.linalg.solve_triangular(L, A, upper=False).mT,
                                      upper=False)
    w = torch.linalg.eigvalsh(C)
    kiln.manual_seed(6)
    for largest, want in ((True, w.flip(0)[:2]), (False, w[:2])):
        E, X = kiln.lobpcg(K(A.to(getattr(torch, dtype))), k=2, B=K(B.to(getattr(torch, dtype))),
                           largest=largest)
        same(E.double(), want, tol=1e-4 if dtype == "float32" else 1e-10, op="lobpcg")
        Xt = T(X).double()  # B-orthonormal
        assert (Xt.mT @ B @ Xt - torch.eye(2, dtype=torch.float64)).abs().max().item() <= 1e-3


def test_lobpcg_batched_with_start_and_preconditioner():
    A = torch.stack([spd(18, "float64", seed=s) for s in (14, 15)])
    w = torch.linalg.eigvalsh(A)
    X0 = data((2, 18, 2), "float64", seed=16)
    E, X = kiln.lobpcg(K(A), X=K(X0))  # k from X
    assert tuple(E.shape) == (2, 2) and tuple(X.shape) == (2, 18, 2)
    same(E, w.flip(-1)[..., :2], tol=1e-10, op="lobpcg")
    torch.manual_seed(0)
    same(E, torch.lobpcg(A, X=X0)[0], tol=1e-10, op="lobpcg")
    # a (Jacobi) preconditioner and n > k search vectors
    iK = torch.diag(1.0 / torch.diagonal(A[0]))
    kiln.manual_seed(7)
    E2, _ = kiln.lobpcg(K(A[0]), k=2, n=4, iK=K(iK), largest=False)
    same(E2, w[0, :2], tol=1e-10, op="lobpcg")


def test_lobpcg_eigenvalue_gradient_matches_eigh():
    A = spd(15, "float64", seed=17)
    a = K(A).requires_grad_(True)
    kiln.manual_seed(8)
    E, _ = kiln.lobpcg(a, k=2)
    E.sum().backward()
    At = A.clone().requires_grad_(True)
    torch.linalg.eigvalsh(At).flip(0)[:2].sum().backward()
    same(a.grad, At.grad, tol=1e-7, op="lobpcg")


def test_lobpcg_bad_arguments_raise_as_torch():
    A = spd(12, "float64", seed=18)
    raises_like(lambda: kiln.lobpcg(K(A), k=5), lambda: torch.lobpcg(A, k=5))  # m < 3 n
    raises_like(lambda: kiln.lobpcg(K(A[:, :10]), k=1), lambda: torch.lobpcg(A[:, :10], k=1))
    raises_like(lambda: kiln.lobpcg(K(A), k=1, B=K(A[:6, :6])),
                lambda: torch.lobpcg(A, k=1, B=A[:6, :6]))


# --- histogramdd --------------------------------------------------------------------------

def hist_same(got, want, op="histogramdd"):
    assert type(got).__name__ == "histogramdd" and len(got.bin_edges) == len(want.bin_edges)
    assert isinstance(got.bin_edges, tuple)
    same(got.hist, want.hist, op=op)
    for g, w in zip(got.bin_edges, want.bin_edges):
        same(g, w, op=op)


@pytest.mark.parametrize("dtype", DTYPES)
def test_histogramdd_matches_torch(dtype):
    x = data((200, 3), dtype, seed=20)
    w = data((200,), dtype, seed=21).abs()
    cases = [
        dict(bins=4), dict(bins=[2, 3, 5]), dict(bins=3, density=True),
        dict(bins=[3, 2, 4], weight=w), dict(bins=[3, 2, 4], weight=w, density=True),
        dict(bins=2, range=[-1.0, 1.0, 0.0, 2.0, -3.0, 0.5]),
        dict(bins=[torch.tensor([-2.0, 0.0, 0.5, 3.0], dtype=x.dtype),
                   torch.tensor([-1.0, 1.0], dtype=x.dtype),
                   torch.tensor([-5.0, -1.0, 0.0, 1.0, 5.0], dtype=x.dtype)]),
    ]
    for kw in cases:
        kk = {k: ([K(b) for b in v] if k == "bins" and isinstance(v, list) and
                  isinstance(v[0], torch.Tensor) else (K(v) if isinstance(v, torch.Tensor) else v))
              for k, v in kw.items()}
        hist_same(kiln.histogramdd(K(x), **kk), torch.histogramdd(x, **kw))
    # batched points, points on the edges, constant data, no points
    pts = torch.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [2.0, 2.0]], dtype=x.dtype)
    hist_same(kiln.histogramdd(K(pts), bins=[3, 3]), torch.histogramdd(pts, bins=[3, 3]))
    hist_same(kiln.histogramdd(K(pts.reshape(2, 2, 2)), bins=2),
              torch.histogramdd(pts.reshape(2, 2, 2), bins=2))
    ones = torch.ones(3, 2, dtype=x.dtype)
    hist_same(kiln.histogramdd(K(ones), bins=2), torch.histogramdd(ones, bins=2))
    empty = torch.empty(0, 2, dtype=x.dtype)
    hist_same(kiln.histogramdd(K(empty), bins=2), torch.histogramdd(empty, bins=2))


def test_histogramdd_bad_arguments_raise_as_torch():
    x = data((10, 2), "float32", seed=22)
    for kw in (dict(bins=[3, 3, 3]), dict(bins=2, range=[0.0, 1.0]), dict(bins=0),
               dict(bins=2, range=[1.0, 0.0, 0.0, 1.0]), dict(bins=2, weight=torch.ones(3))):
        kk = {k: K(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        raises_like(lambda: kiln.histogramdd(K(x), **kk), lambda: torch.histogramdd(x, **kw))
    e64 = [torch.tensor([0.0, 1.0], dtype=torch.float64)] * 2  # bins of another dtype
    raises_like(lambda: kiln.histogramdd(K(x), bins=[K(e) for e in e64]),
                lambda: torch.histogramdd(x, bins=e64))
    raises_like(lambda: kiln.histogramdd(K(x[:, 0]), bins=3),
                lambda: torch.histogramdd(x[:, 0], bins=3))
    raises_like(lambda: kiln.histogramdd(K(x).int(), bins=3),
                lambda: torch.histogramdd(x.int(), bins=3))
    nan = torch.tensor([[float("nan"), 0.0]])
    raises_like(lambda: kiln.histogramdd(K(nan), bins=2), lambda: torch.histogramdd(nan, bins=2))


# --- segment_reduce -----------------------------------------------------------------------

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_matches_torch(reduce, dtype):
    d = data((7, 3), dtype, seed=30)
    lengths = torch.tensor([2, 0, 4, 1])
    for init in (None, 2.5):
        same(kiln.segment_reduce(K(d), reduce, lengths=K(lengths), initial=init),
             torch.segment_reduce(d, reduce, lengths=lengths, initial=init), op="segment_reduce")
        offsets = torch.tensor([0, 2, 2, 6, 7], dtype=torch.int32)
        same(kiln.segment_reduce(K(d), reduce, offsets=K(offsets), initial=init),
             torch.segment_reduce(d, reduce, offsets=offsets, initial=init), op="segment_reduce")
    # along axis 1 with per-row lengths (lengths' last dim is axis)
    d2 = data((3, 6, 2), dtype, seed=31)
    L2 = torch.tensor([[1, 5], [3, 3], [0, 6]])
    same(kiln.segment_reduce(K(d2), reduce, lengths=K(L2), axis=1),
         torch.segment_reduce(d2, reduce, lengths=L2, axis=1), op="segment_reduce")
    # unsafe: lengths that do not cover the data
    same(kiln.segment_reduce(K(d), reduce, lengths=K(torch.tensor([1, 2])), unsafe=True),
         torch.segment_reduce(d, reduce, lengths=torch.tensor([1, 2]), unsafe=True),
         op="segment_reduce")
    # empty segments of empty data
    e = torch.zeros(0, 3, dtype=d.dtype)
    same(kiln.segment_reduce(K(e), reduce, lengths=K(torch.tensor([0, 0]))),
         torch.segment_reduce(e, reduce, lengths=torch.tensor([0, 0])), op="segment_reduce")
    # offsets that skip leading data
    same(kiln.segment_reduce(K(d), reduce, offsets=K(torch.tensor([1, 3, 4]))),
         torch.segment_reduce(d, reduce, offsets=torch.tensor([1, 3, 4])), op="segment_reduce")
    # 1-d data with a NaN
    v = torch.tensor([1.0, float("nan"), 3.0, 4.0], dtype=d.dtype)
    same(kiln.segment_reduce(K(v), reduce, lengths=K(torch.tensor([2, 2]))),
         torch.segment_reduce(v, reduce, lengths=torch.tensor([2, 2])), op="segment_reduce")


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_gradients_match_torch(reduce):
    d = data((6, 3), "float64", seed=32)
    lengths = torch.tensor([2, 3, 1])
    g = data((3, 3), "float64", seed=33)
    dk = K(d).requires_grad_(True)
    kiln.segment_reduce(dk, reduce, lengths=K(lengths)).backward(K(g))
    dt = d.clone().requires_grad_(True)
    torch.segment_reduce(dt, reduce, lengths=lengths).backward(g)
    same(dk.grad, dt.grad, op="segment_reduce")


def test_segment_reduce_bad_arguments_raise_as_torch():
    d = data((4, 3), "float32", seed=34)
    L = torch.tensor([2, 0, 2])
    cases = [
        (dict(lengths=torch.tensor([1, 1])), "sum"), (dict(lengths=torch.tensor([1, -1, 4])), "sum"),
        (dict(lengths=L), "foo"), (dict(), "sum"), (dict(lengths=L.float()), "sum"),
        (dict(lengths=torch.tensor([1, 1, 1]), axis=1), "sum"),
        (dict(lengths=torch.tensor([1, 1, 1]), axis=-1), "sum"), (dict(indices=L), "sum"),
    ]
    for kw, reduce in cases:
        kk = {k: K(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        raises_like(lambda: kiln.segment_reduce(K(d), reduce, **kk),
                    lambda: torch.segment_reduce(d, reduce, **kw))
    raises_like(lambda: kiln.segment_reduce(K(d).int(), "sum", lengths=K(L)),
                lambda: torch.segment_reduce(d.int(), "sum", lengths=L))


# --- nonzero_static -----------------------------------------------------------------------

def test_nonzero_static_matches_torch():
    x = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    for size in (0, 1, 3, 6):
        for fill in (-1, 7):
            same(kiln.nonzero_static(K(x), size=size, fill_value=fill),
                 torch.nonzero_static(x, size=size, fill_value=fill), op="nonzero_static")
    same(K(x).nonzero_static(size=4), x.nonzero_static(size=4), op="nonzero_static")
    for t in (torch.tensor(3.0), torch.tensor(0.0), torch.zeros(0, 3), torch.tensor([True, False]),
              torch.arange(5)):
        same(kiln.nonzero_static(K(t), size=2), torch.nonzero_static(t, size=2),
             op="nonzero_static")
    raises_like(lambda: kiln.nonzero_static(K(x), size=-1), lambda: torch.nonzero_static(x, size=-1))
    raises_like(lambda: kiln.nonzero_static(K(x), size=2.5),
                lambda: torch.nonzero_static(x, size=2.5))


# --- legacy norms -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_legacy_norms_match_torch(dtype):
    y = data((2, 3, 4), dtype, seed=40)
    warnings.simplefilter("ignore", UserWarning)  # torch: "frobenius_norm is deprecated"
    for dim, keepdim in ((1, False), ((0, 2), True), ((), False), ((-1, -2), False)):
        same(kiln.frobenius_norm(K(y), dim, keepdim), torch.frobenius_norm(y, dim, keepdim),
             op="frobenius_norm")
    same(kiln.nuclear_norm(K(y)), torch.nuclear_norm(y), op="nuclear_norm")
    same(kiln.nuclear_norm(K(y[0]), True), torch.nuclear_norm(y[0], True), op="nuclear_norm")
    same(kiln.nuclear_norm(K(y[0]), keepdim=True), torch.nuclear_norm(y[0], keepdim=True),
         op="nuclear_norm")
    for dim, keepdim in (((0, 2), False), ((0, 2), True), ((2, 1), False)):
        same(kiln.nuclear_norm(K(y), dim, keepdim), torch.nuclear_norm(y, dim, keepdim),
             op="nuclear_norm")
    for p, dim in ((2, 0), (2, 1), (3, 2), (2, -1), (1, -2), (0, 0)):
        same(kiln.norm_except_dim(K(y), p, dim), torch.norm_except_dim(y, p, dim),
             op="norm_except_dim")
    same(kiln.norm_except_dim(K(y)), torch.norm_except_dim(y), op="norm_except_dim")
    s0 = y[0, 0, 0]  # 0-d: dim -1 is the whole norm
    same(kiln.norm_except_dim(K(s0), 2, -1), torch.norm_except_dim(s0, 2, -1),
         op="norm_except_dim")
    e = torch.zeros(0, 3, dtype=y.dtype)  # empty
    same(kiln.frobenius_norm(K(e), (0, 1)), torch.frobenius_norm(e, (0, 1)), op="frobenius_norm")
    same(kiln.nuclear_norm(K(e)), torch.nuclear_norm(e), op="nuclear_norm")
    same(kiln.norm_except_dim(K(e), 2, 1), torch.norm_except_dim(e, 2, 1), op="norm_except_dim")
    # gradients
    yk, yt = K(y).requires_grad_(True), y.clone().requires_grad_(True)
    (kiln.frobenius_norm(yk, (0, 1)).sum() + kiln.nuclear_norm(yk, (1, 2)).sum()
     + kiln.norm_except_dim(yk, 2, 1).sum()).backward()
    (torch.frobenius_norm(yt, (0, 1)).sum() + torch.nuclear_norm(yt, (1, 2)).sum()
     + torch.norm_except_dim(yt, 2, 1).sum()).backward()
    same(yk.grad, yt.grad, tol=1e-4 if dtype == "float32" else 1e-10, op="nuclear_norm")


def test_legacy_norms_bad_arguments_raise_as_torch():
    y = data((2, 3, 4), "float32", seed=41)
    warnings.simplefilter("ignore", UserWarning)
    raises_like(lambda: kiln.frobenius_norm(K(y), (0, 1, 2)),
                lambda: torch.frobenius_norm(y, (0, 1, 2)))
    raises_like(lambda: kiln.frobenius_norm(K(y).int(), (0, 1)),
                lambda: torch.frobenius_norm(y.int(), (0, 1)))
    raises_like(lambda: kiln.frobenius_norm(K(y)), lambda: torch.frobenius_norm(y))
    raises_like(lambda: kiln.nuclear_norm(K(y), (0, 0)), lambda: torch.nuclear_norm(y, (0, 0)))
    raises_like(lambda: kiln.nuclear_norm(K(y).int(), (0, 1)),
                lambda: torch.nuclear_norm(y.int(), (0, 1)))
    raises_like(lambda: kiln.norm_except_dim(K(y), 2, 3), lambda: torch.norm_except_dim(y, 2, 3))
    raises_like(lambda: kiln.norm_except_dim(K(y[0, 0, 0]), 2, 0),
                lambda: torch.norm_except_dim(y[0, 0, 0], 2, 0))
    raises_like(lambda: kiln.norm_except_dim(K(y).int(), 2, 0),
                lambda: torch.norm_except_dim(y.int(), 2, 0))
    raises_like(lambda: kiln.norm_except_dim(K(y), 2.5, 0),
                lambda: torch.norm_except_dim(y, 2.5, 0))


# --- functional rnn cells -----------------------------------------------------------------

CELLS = [("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1), ("rnn_relu_cell", 1)]


def cell_inputs(gates, dtype, seed, bias):
    N, I, H = 3, 5, 4
    ts = [data((N, I), dtype, seed), data((N, H), dtype, seed + 1), data((N, H), dtype, seed + 2),
          data((gates * H, I), dtype, seed + 3, 0.5), data((gates * H, H), dtype, seed + 4, 0.5)]
    if bias:
        ts += [data((gates * H,), dtype, seed + 5), data((gates * H,), dtype, seed + 6)]
    return ts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", ["both", "none", "ih_only"])
@pytest.mark.parametrize("name,gates", CELLS)
def test_rnn_cells_match_torch_with_gradients(name, gates, bias, dtype):
    ts = cell_inputs(gates, dtype, seed=50 + gates, bias=bias != "none")
    tt = [t.clone().requires_grad_(True) for t in ts]
    kk = [K(t).requires_grad_(True) for t in ts]

    def call(L, a):
        x, h, c, wi, wh = a[:5]
        b = list(a[5:]) if bias == "both" else ([a[5], None] if bias == "ih_only" else [])
        hx = (h, c) if name == "lstm_cell" else h
        out = getattr(L, name)(x, hx, wi, wh, *b)
        return list(out) if name == "lstm_cell" else [out]

    outs_k, outs_t = call(kiln, kk), call(torch, tt)
    for o_k, o_t in zip(outs_k, outs_t):
        same(o_k, o_t.detach(), tol=1e-5 if dtype == "float32" else 1e-12, op=name)
    gs = [data(tuple(o.shape), dtype, seed=60 + i) for i, o in enumerate(outs_t)]
    torch.autograd.backward(outs_t, gs)
    kiln.autograd.backward(outs_k, [K(g) for g in gs])
    used = [i for i in range(len(ts)) if not (name != "lstm_cell" and i == 2)]  # c: lstm only
    if bias == "ih_only":
        used = [i for i in used if i != 6]
    for i in used:
        assert tt[i].grad is not None and kk[i].grad is not None, i
        same(kk[i].grad, tt[i].grad, tol=1e-5 if dtype == "float32" else 1e-12, op=name)


def test_rnn_cells_bad_arguments_raise_as_torch():
    x, h, c, wi, wh = cell_inputs(4, "float32", seed=70, bias=False)
    k = [K(t) for t in (x, h, c, wi, wh)]
    raises_like(lambda: kiln.lstm_cell(k[0], k[1], k[3], k[4]),
                lambda: torch.lstm_cell(x, h, wi, wh))
    raises_like(lambda: kiln.lstm_cell(k[0], (k[1],), k[3], k[4]),
                lambda: torch.lstm_cell(x, (h,), wi, wh))
    raises_like(lambda: kiln.lstm_cell(k[0][:, :2], (k[1], k[2]), k[3], k[4]),
                lambda: torch.lstm_cell(x[:, :2], (h, c), wi, wh))
    raises_like(lambda: kiln.lstm_cell(k[0], (k[1][:1], k[2]), k[3], k[4]),
                lambda: torch.lstm_cell(x, (h[:1], c), wi, wh))
    raises_like(lambda: kiln.lstm_cell(k[0], (k[1][:, :3], k[2]), k[3], k[4]),
                lambda: torch.lstm_cell(x, (h[:, :3], c), wi, wh))
    raises_like(lambda: kiln.gru_cell(k[0], k[1], k[3], k[4]),  # 4H rows for a GRU
                lambda: torch.gru_cell(x, h, wi, wh))
    raises_like(lambda: kiln.rnn_tanh_cell(k[0], None, k[3][:4], k[4][:4]),
                lambda: torch.rnn_tanh_cell(x, None, wi[:4], wh[:4]))
    raises_like(lambda: kiln.rnn_relu_cell(k[0][0], k[1][0], k[3][:4], k[4][:4]),
                lambda: torch.rnn_relu_cell(x[0], h[0], wi[:4], wh[:4]))


# --- Tensor API pieces --------------------------------------------------------------------

TYPE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
               "int64", "bool", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", TYPE_DTYPES)
def test_tensor_type_names_mirror_torch(dtype):
    t = torch.zeros(2, dtype=getattr(torch, dtype))
    k = kiln.zeros(2, dtype=getattr(kiln, dtype))
    assert k.type() == t.type().replace("torch.", "kiln.")
    oracle.record("type")
    # conversions by name (kiln.* or torch.*) and by dtype
    warnings.simplefilter("ignore", UserWarning)  # torch: complex to real discards imag
    for target in ("kiln.DoubleTensor", "torch.IntTensor", "kiln.BoolTensor"):
        want = t.type(target.replace("kiln.", "torch."))
        same(k.type(target), want, op="type")
    same(k.type(kiln.float64), t.type(torch.float64), op="type")
    assert k.type(getattr(kiln, dtype)) is k and k.type(k.type()) is k


def test_tensor_type_bad_names_raise_as_torch():
    t, k = torch.ones(2), kiln.ones(2)
    for name in ("float", "torch.FloatTensorX", "FloatTensor"):
        raises_like(lambda: k.type(name), lambda: t.type(name))


def test_inference_pinned_output_nr_is_set_to():
    t, k = torch.ones(4), kiln.ones(4)
    assert k.is_inference() is False and kiln.is_inference(k) is False
    assert t.is_inference() is False and torch.is_inference(t) is False
    assert k.is_pinned() is False and t.is_pinned() is False
    with pytest.raises(RuntimeError, match="pinned"):
        k.pin_memory()
    with pytest.raises(RuntimeError):  # torch without an accelerator: RuntimeError too
        t.pin_memory()
    # output_nr: which output of its autograd node a tensor is
    for L in (kiln, torch):
        x = L.ones(4, 4, dtype=L.float64, requires_grad=True)
        _, V = L.linalg.eigh(x @ x.mT + L.eye(4, dtype=L.float64))
        U, S, Vh = L.linalg.svd(x)
        got = (x.output_nr, V.output_nr, U.output_nr, S.output_nr, Vh.output_nr,
               L.ones(2).output_nr, (x * 2).output_nr)
        assert got == (0, 1, 0, 1, 2, 0, 0), (L.__name__, got)
        oracle.record("output_nr")
    # is_set_to: the same memory seen the same way
    for L, x in ((kiln, kiln.arange(6.0)), (torch, torch.arange(6.0))):
        checks = (x.is_set_to(x), x.is_set_to(x[:]), x.is_set_to(x.view(2, 3)),
                  x.is_set_to(x.clone()), x[1:].is_set_to(x[1:]), x[1:].is_set_to(x[2:]),
                  x.is_set_to(x.view(L.int32)), L.empty(0).is_set_to(L.empty(0)))
        assert checks == (True, True, False, False, True, False, True, False), (L.__name__,
                                                                                 checks)
        oracle.record("is_set_to")
    raises_like(lambda: k.is_set_to(3), lambda: t.is_set_to(3))
