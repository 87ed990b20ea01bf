"""Unary float ops on strided inputs (slices, row steps, transposes, permutes, expanded and
channels-last views), which the vector path runs row by row (contiguous rows of 64+ elements)
or copies into the output's layout first: equal, bit for bit, to the op on a contiguous copy of
the input, and within the op's tolerance of PyTorch 2.13. In-place ops on strided views keep
torch's results."""
import numpy as np
import pytest
import torch

import kiln

F = kiln.nn.functional
TF = torch.nn.functional

OPS = {
    "abs": (lambda L, x: x.abs(), 0),
    "neg": (lambda L, x: x.neg(), 0),
    "relu": (lambda L, x: x.relu(), 0),
    "exp": (lambda L, x: x.exp(), 2e-6),
    "tanh": (lambda L, x: x.tanh(), 2e-6),
    "sigmoid": (lambda L, x: x.sigmoid(), 2e-6),
    "sqrt_abs": (lambda L, x: x.abs().sqrt(), 2e-7),  # torch: 1-ulp vector sqrt
    "gelu": (lambda L, x: (F if L is kiln else TF).gelu(x), 2e-6),
    "gelu_tanh": (lambda L, x: (F if L is kiln else TF).gelu(x, approximate="tanh"), 2e-6),
    "clamp": (lambda L, x: x.clamp(-0.5, 0.7), 0),
    "clamp_min": (lambda L, x: x.clamp(min=0.1), 0),
    "softplus": (lambda L, x: (F if L is kiln else TF).softplus(x, beta=2.0), 2e-6),
    "leaky_relu": (lambda L, x: (F if L is kiln else TF).leaky_relu(x, 0.1), 0),
}

VIEWS = {
    "column_slice": lambda x: x[:, 3:503],
    "row_step": lambda x: x[::2],
    "transposed": lambda x: x.t(),
    "transposed_slice": lambda x: x[:300, :200].t(),
    "permuted3": lambda x: x.reshape(64, 64, 64).permute(2, 0, 1),
    "expanded": lambda x: x[:1].expand(64, 512),
    "channels_last_slice": lambda x: x.reshape(4, 16, 64, 64).permute(0, 3, 1, 2)[:, :40],
    "narrow_columns": lambda x: x[:, 7:70],  # 63-element rows: below the row path's minimum
    "sliced_3d": lambda x: x.reshape(8, 64, 512)[:, ::3, 100:420],
    # 65 rows in 8 pieces: pieces start and end inside a block of 13 rows (the odometer's carry)
    "sliced_3d_uneven": lambda x: x.reshape(8, 64, 512)[:5, ::5, 100:420],
}


def base(dtype):
    g = torch.Generator().manual_seed(11)
    t = torch.randn(512, 512, generator=g) * 2
    k = kiln.from_numpy(t.numpy().copy())
    if dtype != "float32":
        return k.to(getattr(kiln, dtype)), t.to(getattr(torch, dtype))
    return k, t


def as_np(k):
    return k.numpy() if k.dtype == kiln.float32 else k.float().numpy()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("op", list(OPS))
def test_strided_input_equals_contiguous_copy_and_torch(op, view, dtype):
    fn, tol = OPS[op]
    k, t = base(dtype)
    kv, tv = VIEWS[view](k), VIEWS[view](t)
    assert not kv.is_contiguous()
    got = fn(kiln, kv)
    same = fn(kiln, kv.contiguous())
    assert tuple(got.shape) == tuple(kv.shape)
    want = fn(torch, tv).float().numpy()
    rtol = tol if dtype == "float32" else (8e-3 if tol else 0)
    if dtype == "float16" and op in ("exp", "softplus") and tol:
        rtol = 1e-2  # torch's float16 rounds its float32 result once more than kiln's
    np.testing.assert_allclose(as_np(got), want, rtol=rtol, atol=rtol)
    np.testing.assert_array_equal(as_np(got), as_np(same))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_in_place_on_strided_views(dtype):
    k, t = base(dtype)
    for kv, tv in ((k[:, 10:300], t[:, 10:300]), (k.t()[::3], t.t()[::3]), (k[1::2], t[1::2])):
        kv.relu_()
        tv.relu_()
        kv.clamp_(max=0.9)
        tv.clamp_(max=0.9)
        kv.neg_()
        tv.neg_()
        kv.abs_()
        tv.abs_()
    np.testing.assert_array_equal(as_np(k), t.float().numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_nan_to_num_and_sign_bits_on_strided_rows(dtype):
    """NaN, +-inf and -0 in strided rows: nan_to_num and abs / neg (bit operations on 16-bit
    floats) row by row, out of place and in place, against torch bit for bit."""
    k, t = base(dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]).to(t.dtype)
    t[::5, ::7] = specials[torch.arange(t[::5, ::7].numel()) % 4].reshape(t[::5, ::7].shape)
    k = kiln.from_numpy(t.float().numpy()).to(k.dtype)
    for view in (lambda x: x[:, 3:500], lambda x: x[::2], lambda x: x[::3, 64:]):
        kv, tv = view(k), view(t)
        for name, args in (("nan_to_num", ()), ("nan_to_num", (1.5, 2.0, -3.0)), ("abs", ()),
                           ("neg", ())):
            got = as_np(getattr(kv, name)(*args))
            want = getattr(tv, name)(*args).float().numpy()
            # NaN positions equal; other values bit for bit (the sign of -0). torch's NaN
            # signs differ between its own layouts, so NaN bits are not compared.
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    k2, t2 = k.clone(), t.clone()
    k2[:, 100:400].nan_to_num_(0.25)
    t2[:, 100:400].nan_to_num_(0.25)
    np.testing.assert_array_equal(as_np(k2).view(np.uint32), t2.float().numpy().view(np.uint32))
