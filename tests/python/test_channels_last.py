"""Channels-last tensors and modules against torch 2.13: kiln.channels_last / memory_format=
on Tensor.to, contiguous, is_contiguous and Module.to; convolution (plain, grouped, depthwise,
float32 and bfloat16) gives torch's values and torch's layout; pointwise ops and max pooling
keep the layout; gradients through a channels-last convolution match torch's."""
import numpy as np
import pytest
import torch

import kiln
import oracle


def both(shape, seed, dtype="float32"):
    a = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    t = torch.from_numpy(a).to(getattr(torch, dtype))
    return kiln.from_numpy(t.float().numpy()).to(getattr(kiln, dtype)), t


def npy(x):
    return x.detach().float().numpy()


def test_memory_format_objects_and_strides_match_torch():
    k, t = both((2, 3, 4, 5), 0)
    kc, tc = k.to(memory_format=kiln.channels_last), t.to(memory_format=torch.channels_last)
    assert kc.stride() == tc.stride()
    for fmt_k, fmt_t in [(kiln.channels_last, torch.channels_last),
                         (kiln.contiguous_format, torch.contiguous_format)]:
        assert kc.is_contiguous(memory_format=fmt_k) == tc.is_contiguous(memory_format=fmt_t)
        assert k.is_contiguous(memory_format=fmt_k) == t.is_contiguous(memory_format=fmt_t)
    assert k.contiguous(memory_format=kiln.channels_last).stride() == tc.stride()
    assert kc.contiguous().stride() == t.stride()
    np.testing.assert_array_equal(npy(kc), npy(tc))
    with pytest.raises(RuntimeError):
        kiln.zeros(3, 4).contiguous(memory_format=kiln.channels_last)
    with pytest.raises(TypeError):
        k.contiguous(memory_format="channels_last")


def test_clone_and_to_preserve_channels_last_like_torch():
    k, t = both((2, 3, 4, 5), 1)
    kc, tc = k.to(memory_format=kiln.channels_last), t.to(memory_format=torch.channels_last)
    pairs = [
        (kc.clone(), tc.clone()),
        (kc.to(kiln.bfloat16), tc.to(torch.bfloat16)),
        (kc.to(dtype=kiln.float64), tc.to(dtype=torch.float64)),
        (kc.clone(memory_format=kiln.contiguous_format), tc.clone(memory_format=torch.contiguous_format)),
        (kc.clone(memory_format=kiln.preserve_format), tc.clone(memory_format=torch.preserve_format)),
        (k.clone(memory_format=kiln.channels_last), t.clone(memory_format=torch.channels_last)),
        (kc.contiguous(), tc.contiguous()),
        (k.clone(), t.clone()),
    ]
    for got, want in pairs:
        assert got.stride() == want.stride()
        assert got.dtype == {torch.float32: kiln.float32, torch.bfloat16: kiln.bfloat16,
                             torch.float64: kiln.float64}[want.dtype]
        np.testing.assert_array_equal(npy(got), npy(want))
    # reshape / flatten of a channels-last tensor copy into torch's (contiguous) result.
    for got, want in [(kc.reshape(2, -1), tc.reshape(2, -1)), (kc.flatten(1), tc.flatten(1)),
                      (kc.reshape(-1), tc.reshape(-1))]:
        assert got.shape == want.shape and got.stride() == want.stride()
        np.testing.assert_array_equal(npy(got), npy(want))
    # clone always copies, whatever the format.
    c = kc.clone(memory_format=kiln.channels_last)
    c.add_(1.0)
    np.testing.assert_array_equal(npy(kc), npy(tc))
    oracle.record("clone")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("groups,stride,kernel", [(1, 1, 3), (1, 2, 1), (4, 1, 3), (16, 2, 3)])
def test_conv2d_channels_last_matches_torch(dtype, groups, stride, kernel):
    x, tx = both((2, 16, 11, 9), 1, dtype)
    w, tw = both((32 if groups != 16 else 16, 16 // groups, kernel, kernel), 2, dtype)
    b, tb = both((w.shape[0],), 3, dtype)
    cl_k, cl_t = kiln.channels_last, torch.channels_last
    y = kiln.nn.functional.conv2d(x.to(memory_format=cl_k), w, b, stride, kernel // 2, 1, groups)
    ty = torch.nn.functional.conv2d(tx.to(memory_format=cl_t), tw, tb, stride, kernel // 2, 1,
                                    groups)
    assert y.is_contiguous(memory_format=cl_k) == ty.is_contiguous(memory_format=cl_t)
    assert y.stride() == ty.stride()
    tol = 3e-2 if dtype == "bfloat16" else 2e-5
    want = torch.nn.functional.conv2d(tx.double(), tw.double(), tb.double(), stride, kernel // 2,
                                      1, groups)
    np.testing.assert_allclose(npy(y), want.numpy(), rtol=tol, atol=tol)
    oracle.record("conv2d channels_last")


def test_module_to_channels_last_and_layout_through_a_block():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                             torch.nn.ReLU(), torch.nn.MaxPool2d(2)).eval()
    km = kiln.nn.Sequential(kiln.nn.Conv2d(8, 16, 3, padding=1), kiln.nn.BatchNorm2d(16),
                            kiln.nn.ReLU(), kiln.nn.MaxPool2d(2)).eval()
    km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    tm = tm.to(memory_format=torch.channels_last)
    km = km.to(memory_format=kiln.channels_last)
    assert km[0].weight.stride() == tm[0].weight.stride()
    x, tx = both((2, 8, 10, 12), 4)
    with torch.no_grad(), kiln.no_grad():
        ty = tm(tx.to(memory_format=torch.channels_last))
        y = km(x.to(memory_format=kiln.channels_last))
    assert y.stride() == ty.stride()
    np.testing.assert_allclose(npy(y), npy(ty), rtol=1e-5, atol=1e-5)


def test_conv_gradients_channels_last_match_torch():
    x, tx = both((2, 6, 7, 8), 5)
    w, tw = both((10, 6, 3, 3), 6)
    x = x.to(memory_format=kiln.channels_last).requires_grad_()
    w.requires_grad_()
    tx = tx.to(memory_format=torch.channels_last).requires_grad_()
    tw.requires_grad_()
    (kiln.nn.functional.conv2d(x, w, None, 1, 1) ** 2).sum().backward()
    (torch.nn.functional.conv2d(tx, tw, None, 1, 1) ** 2).sum().backward()
    np.testing.assert_allclose(npy(x.grad), npy(tx.grad), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(npy(w.grad), npy(tw.grad), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_of_channels_last_along_every_dim_matches_torch(dtype, fn):
    """Computed on the NHWC view: torch's values along each dim (torch returns NCHW, kiln keeps
    channels-last; the values are what counts), gradients included."""
    k, t = both((2, 19, 5, 6), 7, dtype)
    kc, tc = k.to(memory_format=kiln.channels_last), t.to(memory_format=torch.channels_last)
    tol = dict(rtol=2e-2, atol=4e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-6)
    for dim in (0, 1, 2, 3, -1, -3):
        got, want = getattr(kc, fn)(dim), getattr(tc, fn)(dim)
        assert got.is_contiguous(memory_format=kiln.channels_last)
        np.testing.assert_allclose(npy(got.contiguous()), npy(want.contiguous()), **tol)
    kg = kc.float().detach().requires_grad_()
    tg = tc.float().detach().requires_grad_()
    w = np.random.default_rng(8).uniform(-1, 1, (2, 19, 5, 6)).astype(np.float32)
    (getattr(kg, fn)(1) * kiln.from_numpy(w)).sum().backward()
    (getattr(tg, fn)(1) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(npy(kg.grad.contiguous()), npy(tg.grad.contiguous()), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1])
@pytest.mark.parametrize("layouts", [("cl", "cl"), ("cl", "plain"), ("plain", "cl"),
                                     ("plain", "plain"), ("cl", "cl", "cl")])
def test_cat_of_channels_last_values_and_layout_match_torch(dtype, dim, layouts):
    # Channels-last inputs concatenate into a channels-last result (the ONNX detector's
    # feature maps, decision 0062); a mix gives a contiguous one, as in PyTorch.
    r = np.random.default_rng(5)
    ks, ts = [], []
    for i, layout in enumerate(layouts):
        shape = [2, 3, 4, 5]
        shape[dim] += i  # unequal sizes along the cat dim
        a = r.standard_normal(shape).astype(np.float32)
        k, t = kiln.from_numpy(a), torch.from_numpy(a)
        if dtype == "bfloat16":
            k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
        if layout == "cl":
            k = k.contiguous(memory_format=kiln.channels_last)
            t = t.contiguous(memory_format=torch.channels_last)
        ks.append(k)
        ts.append(t)
    got, want = kiln.cat(ks, dim), torch.cat(ts, dim)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    assert got.is_contiguous() == want.is_contiguous()
    assert (got.is_contiguous(memory_format=kiln.channels_last)
            == want.is_contiguous(memory_format=torch.channels_last))
