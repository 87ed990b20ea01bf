"""Unary float ops on strided inputs (slices, row steps, transposes, permutes, expanded and
channels-last views), which the vector path copies into the output's layout first: equal, bit
for bit, to the op on a contiguous copy of the input, and within the op's tolerance of
PyTorch 2.13. In-place ops on strided views (which must not take that path) keep torch's
results."""
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
}


def base(dtype):
    g = torch.Generator().manual_seed(11)
    t = torch.randn(512, 512, generator=g) * 2
    k = kiln.from_numpy(t.numpy().copy())
    if dtype == "bfloat16":
        return k.to(kiln.bfloat16), t.to(torch.bfloat16)
    return k, t


def as_np(k):
    return k.float().numpy() if k.dtype == kiln.bfloat16 else k.numpy()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
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
    np.testing.assert_allclose(as_np(got), want, rtol=rtol, atol=rtol)
    np.testing.assert_array_equal(as_np(got), as_np(same))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_in_place_on_strided_views(dtype):
    k, t = base(dtype)
    for kv, tv in ((k[:, 10:300], t[:, 10:300]), (k.t()[::3], t.t()[::3])):
        kv.relu_()
        tv.relu_()
        kv.clamp_(max=0.9)
        tv.clamp_(max=0.9)
    np.testing.assert_array_equal(as_np(k), t.float().numpy())
