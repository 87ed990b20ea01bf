"""Composite functions (Python code in python/kiln that composes kiln's ops) on the xpu device
against PyTorch on the CPU. Their helper tensors (indices, bounds, counts, fill values) are
made on the input's device: a helper left on the CPU fails with "Expected all tensors to be on
the same device". Every result must live on xpu and match torch (integer results exactly).
On machines without a GPU the device is PoCL's CPU OpenCL driver (conftest sets
KILN_XPU_DEVICE_TYPES=all)."""

import pytest
import torch

import kiln
import kiln.nn.functional as F

from xpu_testing import XPU, k2t, seeded, t2k  # noqa: F401  (seeded: an autouse fixture)





def close(k, t, rtol=1e-5, atol=1e-6):
    """k on xpu, of t's shape and dtype, equal to t (exactly for integers and bools)."""
    assert k.device.type == "xpu", k.device
    got = k2t(k)
    assert tuple(got.shape) == tuple(t.shape), (got.shape, t.shape)
    assert got.dtype == t.dtype, (got.dtype, t.dtype)
    if t.is_floating_point():
        torch.testing.assert_close(got, t, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, t), (got, t)


def close_pair(k, t, rtol=1e-5, atol=1e-6):
    """A (values, indices) result: values close, indices exact."""
    close(k[0], t[0], rtol, atol)
    close(k[1], t[1])


# ---- fold / unfold ----
@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2),
                                dict(kernel_size=2, dilation=2, padding=1)])
def test_unfold(kw):
    t = torch.randn(2, 3, 7, 8)
    close(F.unfold(t2k(t), **kw), torch.nn.functional.unfold(t, **kw))


def test_unfold_unbatched():
    t = torch.randn(3, 6, 6)
    close(F.unfold(t2k(t), 3), torch.nn.functional.unfold(t, 3))


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=2, stride=2, padding=1)])
def test_fold(kw):
    cols = torch.nn.functional.unfold(torch.randn(2, 3, 6, 6), **kw)
    close(F.fold(t2k(cols), (6, 6), **kw), torch.nn.functional.fold(cols, (6, 6), **kw))


# ---- interpolate (the taps are built in C++: src/kiln/nn/functional_resize.cpp) ----
@pytest.mark.parametrize("mode,kw", [("nearest", {}), ("nearest-exact", {}),
                                     ("bilinear", {}), ("bilinear", {"align_corners": True}),
                                     ("bicubic", {})])
def test_interpolate(mode, kw):
    t = torch.randn(2, 3, 5, 6)
    want = torch.nn.functional.interpolate(t, scale_factor=2, mode=mode, **kw)
    close(F.interpolate(t2k(t), scale_factor=2, mode=mode, **kw), want, atol=1e-5)


def test_interpolate_linear_size():
    t = torch.randn(2, 3, 7)
    want = torch.nn.functional.interpolate(t, size=12, mode="linear")
    close(F.interpolate(t2k(t), size=12, mode="linear"), want, atol=1e-5)


# ---- order statistics, running extremes, counting ----
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True)])
def test_kthvalue(dim, keepdim):
    t = torch.randn(3, 6, 5)
    close_pair(t2k(t).kthvalue(2, dim, keepdim), t.kthvalue(2, dim, keepdim))


def test_median():
    t = torch.randn(4, 7)
    close_pair(t2k(t).median(1), t.median(1))
    close(t2k(t).median(), t.median())


def test_nanmedian():
    t = torch.randn(4, 7)
    t[1, 2] = float("nan")
    close_pair(t2k(t).nanmedian(1), t.nanmedian(1))


def test_quantile():
    t = torch.randn(5, 9)
    close(kiln.quantile(t2k(t), 0.3, dim=1), torch.quantile(t, 0.3, dim=1))
    q = torch.tensor([0.1, 0.5, 0.9])
    close(kiln.quantile(t2k(t), t2k(q)), torch.quantile(t, q))
    close(kiln.nanquantile(t2k(t), 0.7), torch.nanquantile(t, 0.7))


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumulative_extremes(name, dim):
    t = torch.randint(0, 4, (5, 9)).float()  # ties: torch takes the later index
    close_pair(getattr(t2k(t), name)(dim), getattr(t, name)(dim))


def test_histc():
    t = torch.randn(200)
    close(kiln.histc(t2k(t)), torch.histc(t))
    close(kiln.histc(t2k(t), bins=7, min=-1, max=1), torch.histc(t, bins=7, min=-1, max=1))


def test_bincount():
    t = torch.randint(0, 6, (30,))
    w = torch.rand(30)
    close(kiln.bincount(t2k(t)), torch.bincount(t))
    close(kiln.bincount(t2k(t), t2k(w), minlength=9), torch.bincount(t, w, minlength=9))


def test_histogram():
    t = torch.randn(50)
    got, want = kiln.histogram(t2k(t), 6), torch.histogram(t, 6)
    close(got[0], want[0])
    close(got[1], want[1])


def test_mode():
    t = torch.randint(0, 3, (4, 8))
    close_pair(kiln.mode(t2k(t)), torch.mode(t))


# ---- searching ----
@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right):
    x = torch.randn(2, 3, 8, 8)
    b = torch.tensor([-1.0, 0.0, 0.5, 1.0])
    x[0, 0, 0, :4] = b  # values on the boundaries
    close(kiln.bucketize(t2k(x), t2k(b), right=right), torch.bucketize(x, b, right=right))
    close(kiln.bucketize(t2k(x), t2k(b), out_int32=True),
          torch.bucketize(x, b, out_int32=True))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    seq = torch.randint(0, 8, (13,)).sort()[0]  # repeated boundaries
    v = torch.randint(-1, 10, (4, 5))
    close(kiln.searchsorted(t2k(seq), t2k(v), side=side), torch.searchsorted(seq, v, side=side))
    close(kiln.searchsorted(t2k(seq), 3, side=side), torch.searchsorted(seq, 3, side=side))
    seq2, v2 = torch.randn(3, 9).sort(-1)[0], torch.randn(3, 4)  # a sequence per row
    close(kiln.searchsorted(t2k(seq2), t2k(v2), side=side),
          torch.searchsorted(seq2, v2, side=side))
    u = torch.randn(10)
    close(kiln.searchsorted(t2k(u), t2k(v2), sorter=t2k(u.argsort()), side=side),
          torch.searchsorted(u, v2, sorter=u.argsort(), side=side))


def test_searchsorted_nan_values():
    seq, v = torch.tensor([0.0, 1.0, 5.0]), torch.tensor([-1.0, 1.0, 2.0, float("nan")])
    close(kiln.searchsorted(t2k(seq), t2k(v)), torch.searchsorted(seq, v))


def test_isin():
    e, s = torch.randint(0, 9, (4, 5)), torch.tensor([1, 4, 7])
    close(kiln.isin(t2k(e), t2k(s)), torch.isin(e, s))
    close(kiln.isin(t2k(e), [1, 4, 7], invert=True), torch.isin(e, s, invert=True))


# ---- shapes and scatters into views ----
@pytest.mark.parametrize("offset", [0, 1, -2])
def test_diag_embed(offset):
    t = torch.randn(2, 4)
    close(kiln.diag_embed(t2k(t), offset), torch.diag_embed(t, offset))
    close(kiln.diag(t2k(t[0]), offset), torch.diag(t[0], offset))


def test_block_diag():
    a, b, c = torch.randn(2, 3), torch.randn(1, 2), torch.randn(3)
    close(kiln.block_diag(t2k(a), t2k(b), t2k(c)), torch.block_diag(a, b, c))


def test_scatters_into_views():
    t = torch.randn(4, 5)
    close(kiln.select_scatter(t2k(t), t2k(torch.ones(5)), 0, 1),
          torch.select_scatter(t, torch.ones(5), 0, 1))
    close(kiln.slice_scatter(t2k(t), t2k(torch.ones(4, 2)), 1, 1, 5, 2),
          torch.slice_scatter(t, torch.ones(4, 2), 1, 1, 5, 2))
    close(kiln.diagonal_scatter(t2k(t), t2k(torch.ones(4)), 1),
          torch.diagonal_scatter(t, torch.ones(4), 1))


def test_unique_consecutive():
    t = torch.tensor([1, 1, 2, 2, 2, 3, 1, 1])
    got = kiln.unique_consecutive(t2k(t), return_inverse=True, return_counts=True)
    for g, w in zip(got, torch.unique_consecutive(t, return_inverse=True, return_counts=True)):
        close(g, w)
    m = torch.tensor([[1, 1, 2], [1, 1, 2], [0, 1, 2]])
    close(kiln.unique_consecutive(t2k(m), dim=0), torch.unique_consecutive(m, dim=0))


def test_combinations():
    t = torch.randn(4)
    close(kiln.combinations(t2k(t)), torch.combinations(t))
    close(kiln.combinations(t2k(t), 3, with_replacement=True),
          torch.combinations(t, 3, with_replacement=True))


def test_pad_sequence():
    seqs = [torch.randn(2, 3), torch.randn(4, 3)]
    close(kiln.nn.utils.rnn.pad_sequence([t2k(s) for s in seqs], True, -1.0),
          torch.nn.utils.rnn.pad_sequence(seqs, True, -1.0))


def test_tensor_new_of_a_tensor():
    r = t2k(torch.zeros(2)).new(kiln.tensor([1, 2]))  # x's dtype and device, as torch
    close(r, torch.tensor([1.0, 2.0]))


# ---- elementwise with a Python number operand ----
def test_number_operands():
    y = torch.rand(6) + 0.5
    close(kiln.xlogy(2.0, t2k(y)), torch.xlogy(2.0, y))
    close(kiln.special.xlog1py(2.0, t2k(y)), torch.special.xlog1py(2.0, y))
    close(kiln.ldexp(t2k(y), 3), torch.ldexp(y, torch.tensor(3)))
    close(kiln.nextafter(t2k(y), 1.0), torch.nextafter(y, torch.tensor(1.0)))


def test_left_shift():
    t = torch.randint(-50, 50, (7,))
    close(t2k(t) << 3, t << 3)
    close(2 << t2k(t.abs() % 10), 2 << (t.abs() % 10))


def test_right_shift():
    t = torch.randint(-50, 50, (7,))
    close(t2k(t) >> 2, t >> 2)


def test_gcd():
    a, b = torch.randint(0, 40, (8,)), torch.randint(0, 40, (8,))
    close(kiln.gcd(t2k(a), t2k(b)), torch.gcd(a, b))


def test_unravel_index():
    i = torch.tensor([0, 5, 11])
    for g, w in zip(kiln.unravel_index(t2k(i), (3, 4)), torch.unravel_index(i, (3, 4))):
        close(g, w)


def test_fill_diagonal_():
    t = torch.randn(7, 3)
    close(t2k(t).fill_diagonal_(0.5, wrap=True), t.clone().fill_diagonal_(0.5, wrap=True))


# ---- statistics, losses ----
def test_cov_vander():
    t = torch.randn(3, 6)
    close(kiln.cov(t2k(t)), torch.cov(t))
    v = torch.randint(-3, 4, (4,))
    close(kiln.vander(t2k(v), 3), torch.vander(v, 3))


def test_multi_margin_loss():
    x, y = torch.randn(5, 4), torch.randint(0, 4, (5,))
    close(F.multi_margin_loss(t2k(x), t2k(y)), torch.nn.functional.multi_margin_loss(x, y))


# ---- factories with device= ----
def test_factories_honour_device():
    close(kiln.tril_indices(4, 3, 1, device=XPU), torch.tril_indices(4, 3, 1))
    close(kiln.triu_indices(3, 5, -1, device=XPU), torch.triu_indices(3, 5, -1))
    close(kiln.logspace(0, 2, 5, device=XPU), torch.logspace(0, 2, 5))
    close(kiln.hann_window(8, device=XPU), torch.hann_window(8))
    close(kiln.kaiser_window(6, device=XPU), torch.kaiser_window(6))


def test_normal_with_tensor_mean():
    mean = torch.randn(5)
    close(kiln.normal(t2k(mean), 0.0), mean)  # std 0: the draws drop out


# ---- linear algebra helpers ----
def test_lu_unpack():
    a = torch.randn(4, 4)
    LU, piv = torch.linalg.lu_factor(a)
    for g, w in zip(kiln.lu_unpack(t2k(LU), t2k(piv)), torch.lu_unpack(LU, piv)):
        close(g, w)


def test_householder_product():
    a, tau = torch.randn(5, 3), torch.rand(2)
    close(kiln.linalg.householder_product(t2k(a), t2k(tau)),
          torch.linalg.householder_product(a, tau), atol=1e-5)


def test_cholesky_inverse():
    a = torch.randn(3, 3)
    L = torch.linalg.cholesky(a @ a.T + 3 * torch.eye(3))
    close(kiln.cholesky_inverse(t2k(L)), torch.cholesky_inverse(L), atol=1e-5)
