"""The xpu kernels of padding, scans, logsumexp, advanced indexing, scatter, one_hot,
interpolation's taps (index_lerp), adaptive max pooling, the special functions, the fused
Adam step and LSTM cell, and the ops staged through the host (scatter_reduce,
repeat_interleave, accumulating index_put, the linalg factorisations): each against PyTorch
on the CPU, and where the kernel promises the CPU's bits, against kiln's CPU kernel exactly.
On machines without a GPU the device is PoCL (conftest sets KILN_XPU_DEVICE_TYPES=all)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as F

from xpu_testing import XPU, k2t, seeded, t2k  # noqa: F401  (seeded: an autouse fixture)





def close(k, t, rtol=1e-5, atol=1e-6):
    assert k.device.type == "xpu"
    got = k2t(k)
    want = t.float() if t.dtype == torch.bfloat16 else t
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    if want.dtype in (torch.bool, torch.int64, torch.int32, torch.int8, torch.uint8, torch.int16):
        assert torch.equal(got.to(want.dtype), want)
    else:
        torch.testing.assert_close(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True)


def same_bits(a, b):
    """a (xpu) and b (cpu) hold identical values (NaN where NaN)."""
    assert a.device.type == "xpu" and b.device.type == "cpu"
    x, y = a.cpu(), b
    assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
    xn, yn = k2t(x).numpy(), k2t(y).numpy()
    np.testing.assert_array_equal(xn, yn)


# ---- pad ----
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 7), (2, 1)), ((2, 3, 5, 6), (1, 2, 2, 0)),
                                       ((1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 2))])
def test_pad_modes_against_torch(mode, shape, pad):
    t = torch.randn(*shape)
    close(F.pad(t2k(t), pad, mode=mode), TF.pad(t, pad, mode=mode))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float64])
def test_pad_constant_dtypes_crop_and_strides(dtype):
    t = (torch.randn(3, 4, 6) * 5).to(dtype)
    x = t2k(t)
    close(F.pad(x, (2, 3, 1, 1), value=1), TF.pad(t, (2, 3, 1, 1), value=1))
    close(F.pad(x, (-1, 2, 0, -2)), TF.pad(t, (-1, 2, 0, -2)))  # negative pads crop
    close(F.pad(x.transpose(0, 2), (1, 1)), TF.pad(t.transpose(0, 2), (1, 1)))  # strided input


def test_pad_channels_last_and_gradient():
    t = torch.randn(2, 3, 5, 5, requires_grad=True)
    x = t2k(t.detach()).contiguous(memory_format=kiln.channels_last).requires_grad_()
    y = F.pad(x, (1, 2, 3, 0), mode="reflect")
    ty = TF.pad(t, (1, 2, 3, 0), mode="reflect")
    close(y, ty)
    g = torch.randn(ty.shape)
    ty.backward(g)
    y.backward(t2k(g))
    close(x.grad, t.grad, rtol=1e-5, atol=1e-5)


# ---- cumsum / cumprod ----
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_match_the_cpu_bit_for_bit(dtype, dim):
    t = (torch.rand(5, 37, 6) * 2 + 0.5).to(dtype) if dtype.is_floating_point else torch.randint(-3, 4, (5, 37, 6)).to(dtype)
    x = t2k(t)
    for name in ("cumsum", "cumprod"):
        got, want = getattr(x, name)(dim), getattr(x.cpu(), name)(dim)
        if kiln.xpu.get_device_properties(0).capabilities.find("fp64") >= 0 or not dtype.is_floating_point:
            same_bits(got, want)
        ref = getattr(t.double() if dtype.is_floating_point else t, name)(dim)
        close(got, ref.to(torch.float32 if dtype.is_floating_point else ref.dtype), rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)


def test_cumsum_of_a_strided_input_and_its_gradient():
    t = torch.randn(6, 8, requires_grad=True)
    x = t2k(t.detach()).requires_grad_()
    y = x.t().cumsum(1)
    ty = t.t().cumsum(1)
    close(y, ty)
    ty.sum().backward()
    y.sum().backward()
    close(x.grad, t.grad)


# ---- logsumexp ----
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_logsumexp_dims_against_torch(dtype):
    t = (torch.randn(4, 5, 300) * 10).to(dtype)
    x = t2k(t)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    close(x.logsumexp(-1), t.logsumexp(-1), **tol)
    close(x.logsumexp((0, 2), keepdim=True), t.logsumexp((0, 2), keepdim=True), **tol)
    close(x.logsumexp(1), t.logsumexp(1), **tol)


def test_logsumexp_infinities_and_nan():
    t = torch.tensor([[-float("inf")] * 3, [float("inf"), 1.0, 2.0], [1.0, float("nan"), 0.0],
                      [1e30, 1e30, -1e30]])
    close(t2k(t).logsumexp(1), t.logsumexp(1))


# ---- advanced indexing ----
def test_index_forms_against_torch():
    t = torch.randn(4, 5, 6, 3)
    x = t2k(t)
    i = torch.tensor([3, 0, -1, 2])
    j = torch.tensor([[1], [4]])
    ki, kj = t2k(i), t2k(j)
    close(x[ki], t[i])
    close(x[:, ki], t[:, i])
    close(x[ki, kj], t[i, j])            # broadcast index tensors, adjacent
    close(x[ki, :, kj], t[i, :, j])      # separated by a slice: index dims first
    close(x[..., t2k(torch.tensor([2, 0]))], t[..., torch.tensor([2, 0])])
    close(x[t2k(torch.tensor(1))], t[torch.tensor(1)])  # a 0-d index
    close(x[ki.to(kiln.int32)], t[i.to(torch.int32)])
    m = t > 0
    close(x[t2k(m)], t[m])               # a whole-shape mask
    m2 = torch.tensor([True, False, True, True])
    close(x[t2k(m2), 1], t[m2, 1])
    close(x.transpose(0, 2)[ki[:3]], t.transpose(0, 2)[i[:3]])  # a strided source


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.bool, torch.float64])
def test_index_dtypes(dtype):
    t = (torch.randn(6, 4) * 3).to(dtype)
    i = torch.tensor([5, 1, 1, 0])
    close(t2k(t)[t2k(i)], t[i])


def test_index_with_five_index_tensors_runs_through_the_host():
    t = torch.randn(2, 3, 2, 3, 2)
    idx = [torch.tensor([1, 0]), torch.tensor([2, 1]), torch.tensor([0, 1]), torch.tensor([0, 2]), torch.tensor([1, 1])]
    close(t2k(t)[tuple(t2k(i) for i in idx)], t[tuple(idx)])


def test_index_out_of_range_is_an_index_error():
    x = kiln.zeros(3, 4, device=XPU)
    with pytest.raises(IndexError, match="out of bounds"):
        x[t2k(torch.tensor([0, 3]))]
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, t2k(torch.tensor([-5]))]
    with pytest.raises(IndexError, match="out of bounds"):
        x[t2k(torch.tensor([1]))] = 2.0
        x[t2k(torch.tensor([7]))] = 2.0


def test_index_put_forms_against_torch():
    t = torch.randn(5, 4, 3)
    i = torch.tensor([4, 0, 2])
    j = torch.tensor([1, 3, 0])
    v = torch.randn(3, 3)
    x = t2k(t)
    x[t2k(i), t2k(j)] = t2k(v)
    want = t.clone()
    want[i, j] = v
    close(x, want)
    x[:, t2k(j)] = 7.0                   # a broadcast scalar value
    want[:, j] = 7.0
    close(x, want)
    m = want > 0.5
    x[t2k(m)] = -1.0
    want[m] = -1.0
    close(x, want)
    # The functional form leaves its input alone.
    y = t2k(t)
    r = y.index_put((t2k(i),), t2k(torch.ones(4, 3)))
    close(y, t)
    close(r, t.index_put((i,), torch.ones(4, 3)))


def test_index_put_accumulate_sums_duplicates_as_the_cpu():
    t = torch.randn(6, 3)
    i = torch.tensor([1, 4, 1, 1, 0])
    v = torch.randn(5, 3)
    got = t2k(t).index_put((t2k(i),), t2k(v), accumulate=True)
    same_bits(got, kiln.tensor(t.numpy()).index_put((kiln.tensor(i.numpy()),), kiln.tensor(v.numpy()), accumulate=True))
    close(got, t.index_put((i,), v, accumulate=True))


def test_index_gradient_on_the_device():
    t = torch.randn(5, 4, requires_grad=True)
    i = torch.tensor([0, 3, 3, 1])
    x = t2k(t.detach()).requires_grad_()
    y = x[t2k(i)] * 2
    (t[i] * 2).sum().backward()
    y.sum().backward()
    assert x.grad.device.type == "xpu"
    close(x.grad, t.grad)


# ---- scatter_add: keys along dim on the device, other index forms through the host ----
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.float64, kiln.int64, kiln.int32])
def test_scatter_add_of_keys_along_dim_equals_the_cpu_bit_for_bit(dtype):
    torch.manual_seed(4)
    keys = torch.randint(0, 9, (40,))
    src = kiln.tensor((torch.randn(40, 6) * 3).numpy()).to(dtype)
    self_ = kiln.tensor((torch.randn(9, 6) * 3).numpy()).to(dtype)
    for dim, idx, s, base in ((0, t2k(keys, "cpu").reshape(40, 1).expand(40, 6), src, self_),
                              (1, t2k(keys, "cpu").reshape(1, 40).expand(6, 40), src.t(), self_.t())):
        got = base.to(XPU).scatter_add(dim, idx.to(XPU), s.to(XPU))
        same_bits(got, base.scatter_add(dim, idx, s))


def test_embedding_and_index_select_gradients_on_the_device():
    torch.manual_seed(5)
    w = torch.randn(50, 8, requires_grad=True)
    tokens = torch.randint(0, 50, (4, 30))
    kw = t2k(w.detach()).requires_grad_()
    y = F.embedding(t2k(tokens), kw)
    g = torch.randn(4, 30, 8)
    TF.embedding(tokens, w).backward(g)
    y.backward(t2k(g))
    assert kw.grad.device.type == "xpu"
    close(kw.grad, w.grad, rtol=1e-5, atol=1e-5)
    cw = t2k(w.detach(), "cpu").requires_grad_()
    F.embedding(t2k(tokens, "cpu"), cw).backward(t2k(g, "cpu"))
    same_bits(kw.grad, cw.grad)
    t = torch.zeros(5, 3)
    i = torch.tensor([4, 0, 4, 2])
    v = torch.randn(4, 3)
    close(t2k(t).index_add(0, t2k(i), t2k(v)), t.index_add(0, i, v))


def test_scatter_add_general_index_and_errors():
    t = torch.randn(4, 6)
    src = torch.randn(4, 6)
    index = torch.randint(0, 6, (4, 6))  # differs per row: staged through the host
    close(t2k(t).scatter_add(1, t2k(index), t2k(src)), t.scatter_add(1, index, src))
    with pytest.raises(RuntimeError, match="out of bounds"):
        kiln.zeros(3, 2, device=XPU).scatter_add(0, t2k(torch.tensor([[3], [0]])).expand(2, 2).contiguous()[:, :1].expand(2, 2),
                                                 kiln.ones(2, 2, device=XPU))


# ---- scatter, one_hot ----
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_scatter_src_and_value(dtype):
    t = (torch.randn(4, 6) * 4).to(dtype)
    src = (torch.randn(3, 5) * 4).to(dtype)
    index = torch.stack([torch.randperm(6)[:5] for _ in range(3)])  # no duplicates per row
    close(t2k(t).scatter(1, t2k(index), t2k(src)), t.scatter(1, index, src))
    idx0 = torch.randperm(4)[:3].reshape(3, 1).expand(3, 2)
    close(t2k(t).scatter(0, t2k(idx0.contiguous()), 1), t.scatter(0, idx0.contiguous(), 1))
    y = t2k(t)
    y.scatter_(1, t2k(index[:, :2]), t2k(src[:, :2]))
    close(y, t.scatter(1, index[:, :2], src[:, :2]))


def test_scatter_out_of_range_and_index_fill_copy():
    x = kiln.zeros(3, 4, device=XPU)
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter(1, t2k(torch.tensor([[4]])), 1.0)
    t = torch.zeros(4, 5)
    i = torch.tensor([3, 0])
    close(t2k(t).index_fill(0, t2k(i), 2.5), t.index_fill(0, i, 2.5))
    close(t2k(t).index_copy(0, t2k(i), t2k(torch.ones(2, 5))), t.index_copy(0, i, torch.ones(2, 5)))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_through_the_host(reduce):
    t = torch.randn(3, 5)
    src = torch.randn(3, 6)
    index = torch.randint(0, 5, (3, 6))
    for include_self in (True, False):
        close(t2k(t).scatter_reduce(1, t2k(index), t2k(src), reduce, include_self=include_self),
              t.scatter_reduce(1, index, src, reduce, include_self=include_self))


def test_one_hot_and_repeat_interleave():
    i = torch.tensor([[0, 3], [2, 2]])
    close(F.one_hot(t2k(i), 5), TF.one_hot(i, 5))
    close(F.one_hot(t2k(i)), TF.one_hot(i))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(t2k(i), 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(t2k(torch.tensor([-1])), 3)
    t = torch.randn(3, 4)
    r = torch.tensor([1, 0, 2])
    close(t2k(t).repeat_interleave(t2k(r), dim=0), t.repeat_interleave(r, dim=0))
    close(t2k(t).repeat_interleave(2, dim=1), t.repeat_interleave(2, dim=1))


# ---- interpolation (index_lerp and index_select taps) ----
@pytest.mark.parametrize("mode,shape", [("linear", (2, 3, 9)), ("bilinear", (2, 3, 7, 9)),
                                        ("trilinear", (1, 2, 4, 5, 6)), ("bicubic", (1, 2, 6, 7)),
                                        ("nearest", (2, 3, 5, 6)), ("nearest-exact", (2, 3, 5, 6)),
                                        ("area", (2, 3, 8, 8))])
def test_interpolate_against_torch(mode, shape):
    t = torch.randn(*shape)
    ac = {} if mode in ("nearest", "nearest-exact", "area") else {"align_corners": False}
    close(F.interpolate(t2k(t), scale_factor=2 if mode != "area" else 0.5, mode=mode, **ac),
          TF.interpolate(t, scale_factor=2 if mode != "area" else 0.5, mode=mode, **ac), rtol=1e-4, atol=1e-5)
    if ac:
        sz = tuple(s + 3 for s in shape[2:])
        close(F.interpolate(t2k(t), size=sz, mode=mode, align_corners=True),
              TF.interpolate(t, size=sz, mode=mode, align_corners=True), rtol=1e-4, atol=1e-5)


def test_bilinear_interpolation_gradient_on_the_device():
    t = torch.randn(1, 2, 5, 4, requires_grad=True)
    x = t2k(t.detach()).requires_grad_()
    y = F.interpolate(x, size=(9, 7), mode="bilinear", align_corners=False)
    ty = TF.interpolate(t, size=(9, 7), mode="bilinear", align_corners=False)
    g = torch.randn(ty.shape)
    ty.backward(g)
    y.backward(t2k(g))
    close(x.grad, t.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,shape", [("linear", (2, 3, 9)), ("bilinear", (2, 3, 7, 9)),
                                        ("trilinear", (1, 2, 4, 5, 6))])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.float64])
def test_linear_interpolation_matches_the_cpu_bit_for_bit(mode, shape, dtype):
    """Both devices blend the taps with index_lerp, lerp's formula with contraction off."""
    x = kiln.tensor(torch.randn(*shape).numpy()).to(dtype)
    sz = tuple(2 * s + 1 for s in shape[2:])
    for ac in (False, True):
        same_bits(F.interpolate(x.to(XPU), size=sz, mode=mode, align_corners=ac),
                  F.interpolate(x, size=sz, mode=mode, align_corners=ac))


# ---- adaptive max pooling ----
@pytest.mark.parametrize("nd,shape,out", [(1, (2, 3, 11), 4), (2, (2, 3, 9, 7), (4, 3)), (3, (1, 2, 5, 6, 7), (2, 3, 4))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adaptive_max_pool_values_and_indices(nd, shape, out, dtype):
    t = torch.randn(*shape).to(dtype)
    fn = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}[nd]
    tfn = {1: TF.adaptive_max_pool1d, 2: TF.adaptive_max_pool2d, 3: TF.adaptive_max_pool3d}[nd]
    v, i = fn(t2k(t), out, return_indices=True)
    tv, ti = tfn(t, out, return_indices=True)
    close(v, tv)
    close(i, ti)


def test_adaptive_max_pool_nan_windows_match_the_cpu():
    t = torch.randn(1, 1, 6, 6)
    t[0, 0, 0, 1] = float("nan")
    t[0, 0, 1, 0] = float("nan")
    v, i = F.adaptive_max_pool2d(t2k(t), 2, return_indices=True)
    cv, ci = F.adaptive_max_pool2d(t2k(t, "cpu"), 2, return_indices=True)
    same_bits(v, cv)
    same_bits(i, ci)


# ---- special functions ----
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_digamma_trigamma_erfinv_against_torch(dtype):
    x = torch.cat([torch.linspace(-4.75, 12, 61), torch.tensor([0.0, -0.0, -2.0, 1e-3, 30.0])]).to(dtype)
    y = torch.cat([torch.linspace(-0.999, 0.999, 41), torch.tensor([1.0, -1.0, 1.5, 0.0])]).to(dtype)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    close(t2k(x).digamma(), x.double().digamma().to(dtype), **tol)
    xt = x[x != -2.0]  # torch's trigamma at a negative integer is a huge finite value, kiln's inf
    close(t2k(xt).polygamma(1), torch.polygamma(1, xt.double()).to(dtype), **tol)
    got, want = t2k(x).polygamma(1), t2k(x, "cpu").polygamma(1)  # the poles as the CPU kernel
    torch.testing.assert_close(k2t(got), k2t(want), rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
    close(t2k(y).erfinv(), y.double().erfinv().to(dtype), **tol)


# ---- fused Adam step and LSTM cell ----
def test_adamw_on_the_device_equals_the_cpu_bit_for_bit():
    torch.manual_seed(1)
    w0, g0 = torch.randn(33, 17), torch.randn(5, 33, 17)
    results = {}
    for dev in ("cpu", XPU):
        p = kiln.tensor(w0.numpy()).to(dev).requires_grad_()
        opt = kiln.optim.AdamW([p], lr=1e-2, weight_decay=0.1)
        for k in range(5):
            p.grad = kiln.tensor(g0[k].numpy()).to(dev)
            opt.step()
        results[dev] = p.detach()
    same_bits(results[XPU], results["cpu"])
    tp = w0.clone().requires_grad_()
    topt = torch.optim.AdamW([tp], lr=1e-2, weight_decay=0.1)
    for k in range(5):
        tp.grad = g0[k].clone()
        topt.step()
    close(results[XPU], tp.detach(), rtol=1e-5, atol=1e-6)


def test_adam_step_is_one_fused_op_on_the_device():
    p = kiln.zeros(4, device=XPU)
    assert kiln._C._adam_step_supported(p, p, p, p)


@pytest.mark.parametrize("grad", [True, False])
def test_lstm_on_the_device_against_torch(grad):
    """With gradients the step is composed of ops; without, each step is one lstm_cell."""
    torch.manual_seed(2)
    tl = torch.nn.LSTM(6, 5, num_layers=2, batch_first=True)
    kl = kiln.nn.LSTM(6, 5, num_layers=2, batch_first=True)
    kl.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    kl = kl.to(XPU)
    x = torch.randn(3, 7, 6)
    if grad:
        out, (h, c) = kl(t2k(x))
    else:
        with kiln.no_grad():
            out, (h, c) = kl(t2k(x))
    tout, (th, tc) = tl(x)
    close(out, tout.detach(), rtol=1e-4, atol=1e-5)
    close(h, th.detach(), rtol=1e-4, atol=1e-5)
    close(c, tc.detach(), rtol=1e-4, atol=1e-5)


# ---- linear algebra staged through the host ----
def test_linalg_factorisations_on_xpu_tensors():
    torch.manual_seed(3)
    a = torch.randn(5, 5, dtype=torch.float64)
    spd = a @ a.T + 5 * torch.eye(5, dtype=torch.float64)
    b = torch.randn(5, 2, dtype=torch.float64)
    ka, kspd, kb = t2k(a), t2k(spd), t2k(b)
    close(kiln.linalg.cholesky(kspd), torch.linalg.cholesky(spd), rtol=1e-10, atol=1e-10)
    close(kiln.linalg.solve(ka, kb), torch.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
    close(kiln.linalg.det(ka), torch.linalg.det(a), rtol=1e-9, atol=1e-10)
    close(kiln.linalg.eigvalsh(kspd), torch.linalg.eigvalsh(spd), rtol=1e-9, atol=1e-10)
    close(kiln.linalg.svdvals(ka), torch.linalg.svdvals(a), rtol=1e-9, atol=1e-10)
    q, r = kiln.linalg.qr(ka)
    close(q @ r, a, rtol=1e-9, atol=1e-10)
    close(kiln.linalg.inv(ka) @ ka, torch.eye(5, dtype=torch.float64), rtol=1e-9, atol=1e-9)


# ---- integer division, and CPU scalars next to xpu tensors ----
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_div_fmod_remainder_against_torch(dtype):
    lo = 0 if dtype == torch.uint8 else -50
    a = torch.randint(lo, 50, (64,)).to(dtype)
    b = torch.randint(1, 9, (64,)).to(dtype)
    if dtype != torch.uint8:
        b = b * torch.where(torch.rand(64) > 0.5, 1, -1).to(dtype)
        b[:2] = -1
        a[0] = torch.iinfo(dtype).min  # INT_MIN / -1 wraps as on the CPU
    ka, kb = t2k(a), t2k(b)
    for mode in ("trunc", "floor"):
        same_bits(kiln.div(ka, kb, rounding_mode=mode), kiln.div(ka.cpu(), kb.cpu(), rounding_mode=mode))
        if dtype != torch.uint8:
            close(kiln.div(ka[1:], kb[1:], rounding_mode=mode), torch.div(a[1:], b[1:], rounding_mode=mode))
    same_bits(ka // kb, ka.cpu() // kb.cpu())
    close(kiln.fmod(ka[1:], kb[1:]), torch.fmod(a[1:], b[1:]))
    close(kiln.remainder(ka[1:], kb[1:]), torch.remainder(a[1:], b[1:]))
    same_bits(kiln.remainder(ka, kb), kiln.remainder(ka.cpu(), kb.cpu()))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        kiln.div(ka, kb * 0, rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        kiln.remainder(ka, kb * 0)


def test_cpu_scalars_join_xpu_tensors_as_in_torch():
    x = t2k(torch.arange(6.0))
    close(x * kiln.tensor(2.0), torch.arange(6.0) * 2)
    close(kiln.tensor(1.5) + x, torch.arange(6.0) + 1.5)
    close(kiln.where(x > 2, x, kiln.tensor(-1.0)), torch.where(torch.arange(6.0) > 2, torch.arange(6.0), -1.0))
    close(x[None], torch.arange(6.0)[None])
    with pytest.raises(RuntimeError, match="same device"):
        x + kiln.ones(6)  # only 0-d CPU tensors move
    out = kiln.empty((), device=XPU)
    kiln.add(kiln.tensor(1.0), kiln.tensor(2.0), out=out)  # the output's device decides
    close(out, torch.tensor(3.0))
    with pytest.raises(RuntimeError, match="same device"):
        kiln.add(x, x, out=kiln.empty(6))  # outputs never move


def test_conv_transpose3d_on_the_device_and_tensor_xpu():
    torch.manual_seed(6)
    tm = torch.nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=1,
                                  output_padding=(1, 0, 1), groups=2)
    km = kiln.nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=1,
                                 output_padding=(1, 0, 1), groups=2)
    km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    km = km.xpu() if hasattr(km, "xpu") else km.to(XPU)
    x = torch.randn(2, 4, 3, 4, 3, requires_grad=True)
    kx = kiln.tensor(x.detach().numpy()).xpu().requires_grad_()
    assert kx.device.type == "xpu" and kx.xpu() is kx
    y, ty = km(kx), tm(x)
    close(y, ty.detach(), rtol=1e-4, atol=1e-5)
    g = torch.randn(ty.shape)
    ty.backward(g)
    y.backward(t2k(g))
    close(kx.grad, x.grad, rtol=1e-4, atol=1e-5)
    close(km.weight.grad, tm.weight.grad, rtol=1e-4, atol=1e-4)
    lazy = kiln.nn.LazyConvTranspose3d(5, 2)
    assert tuple(lazy(kiln.ones(1, 3, 2, 2, 2)).shape) == tuple(torch.nn.LazyConvTranspose3d(5, 2)(torch.ones(1, 3, 2, 2, 2)).shape)


def test_deterministic_mode_makes_duplicate_writes_the_cpus():
    t = torch.zeros(4, 3)
    i = torch.tensor([1, 2, 1, 1, 3, 2])
    v = torch.randn(6, 3)
    index = torch.tensor([[0, 0, 1, 0, 2]])
    src = torch.randn(1, 5)
    assert not kiln.are_deterministic_algorithms_enabled()
    kiln.use_deterministic_algorithms(True)
    try:
        assert kiln.are_deterministic_algorithms_enabled() and kiln.get_deterministic_debug_mode() == 2
        cpu = t2k(t, "cpu").index_put((t2k(i, "cpu"),), t2k(v, "cpu"))
        same_bits(t2k(t).index_put((t2k(i),), t2k(v)), cpu)
        same_bits(t2k(t[:1, :]).scatter(1, t2k(index), t2k(src)),
                  t2k(t[:1, :], "cpu").scatter(1, t2k(index, "cpu"), t2k(src, "cpu")))
    finally:
        kiln.use_deterministic_algorithms(False)
    assert kiln.get_deterministic_debug_mode() == 0
    kiln.set_deterministic_debug_mode("warn")
    assert kiln.is_deterministic_algorithms_warn_only_enabled() and kiln.are_deterministic_algorithms_enabled()
    kiln.set_deterministic_debug_mode(0)
    assert not kiln.are_deterministic_algorithms_enabled()
    kiln.set_float32_matmul_precision("high")
    assert kiln.get_float32_matmul_precision() == "high"
    kiln.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        kiln.set_float32_matmul_precision("fast")
    assert kiln.vmap is kiln.func.vmap


def test_set_default_device_moves_factories_but_not_likes():
    assert kiln.get_default_device().type == "cpu"
    kiln.set_default_device(XPU)
    try:
        assert kiln.get_default_device().type == "xpu"
        for t in (kiln.zeros(2), kiln.ones(2, 3), kiln.empty(2), kiln.full((2,), 1.5), kiln.tensor([1.0]),
                  kiln.arange(3), kiln.linspace(0, 1, 3), kiln.eye(2), kiln.randn(2), kiln.rand(2),
                  kiln.randint(0, 5, (3,)), kiln.nn.Linear(3, 2).weight):
            assert t.device.type == "xpu", t
        assert kiln.zeros(2, device="cpu").device.type == "cpu"
        assert kiln.zeros_like(kiln.ones(2, device="cpu")).device.type == "cpu"  # follows its input
        lin = kiln.nn.Linear(3, 2)
        close(lin(kiln.ones(4, 3)), torch.ones(4, 3) @ k2t(lin.weight).T + k2t(lin.bias))
    finally:
        kiln.set_default_device(None)
    assert kiln.zeros(2).device.type == "cpu"

