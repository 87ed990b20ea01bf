"""kiln.nn.functional.fused_linear (activation(x @ W.T + b) + residual, one rounding) against
torch's unfused expression computed in float64 on the same (rounded) inputs; nn.Linear's
inference path (packed oneDNN weights) against torch.nn.Linear, including weights changed in
place and by an optimizer step; autograd through fused_linear; argument errors."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn.functional as KF
import oracle

TORCH_ACT = {
    "none": lambda y: y,
    "relu": torch.relu,
    "gelu": lambda y: torch.nn.functional.gelu(y),
    "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}
KDT = {"float32": kiln.float32, "bfloat16": kiln.bfloat16}
TDT = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def pair(rng, shape, dtype, scale=1.0):
    """The same values as a kiln and a float64 torch tensor, rounded to dtype first."""
    t = torch.from_numpy(rng.uniform(-scale, scale, shape).astype(np.float32)).to(TDT[dtype])
    k = kiln.from_numpy(t.float().numpy()).to(KDT[dtype])
    return k, t.double()


def close(got, want, dtype, k):
    got = got.float().numpy().astype(np.float64)
    want = want.numpy()
    if dtype == "bfloat16":
        np.testing.assert_allclose(got, want, rtol=1.6e-2, atol=1e-2)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6 * (4 + 2 * np.sqrt(k)))


@pytest.mark.parametrize("activation", list(TORCH_ACT))
@pytest.mark.parametrize("rows", [1, 5, 40])
@pytest.mark.parametrize("in_dtype,out_dtype", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                                ("bfloat16", "float32")])
def test_fused_linear_matches_torch(activation, rows, in_dtype, out_dtype):
    rng = np.random.default_rng(rows * 7 + len(activation))
    n, k = 96, 160
    x, tx = pair(rng, (2, rows, k), in_dtype)
    w, tw = pair(rng, (n, k), in_dtype)
    b, tb = pair(rng, (n,), in_dtype)
    r, tr = pair(rng, (2, rows, n), "float32", scale=2.0)
    got = KF.fused_linear(x, w, b, activation=activation, residual=r, out_dtype=KDT[out_dtype])
    assert got.dtype == KDT[out_dtype] and tuple(got.shape) == (2, rows, n)
    want = TORCH_ACT[activation](tx @ tw.T + tb) + tr
    close(got, want, out_dtype, k)
    oracle.record("fused_linear")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_linear_without_bias_and_broadcast_residual(dtype):
    rng = np.random.default_rng(3)
    x, tx = pair(rng, (64, 200), dtype)
    w, tw = pair(rng, (130, 200), dtype)
    r, tr = pair(rng, (130,), dtype)
    got = KF.fused_linear(x, w, activation="relu", residual=r)
    close(got, torch.relu(tx @ tw.T) + tr, dtype, 200)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_inference_matches_torch_and_sees_weight_changes(dtype):
    torch.manual_seed(0)
    tl = torch.nn.Linear(256, 384).to(TDT[dtype])
    kl = kiln.nn.Linear(256, 384).to(KDT[dtype])
    with kiln.no_grad():
        kl.weight.copy_(kiln.from_numpy(tl.weight.detach().float().numpy()).to(KDT[dtype]))
        kl.bias.copy_(kiln.from_numpy(tl.bias.detach().float().numpy()).to(KDT[dtype]))
    rng = np.random.default_rng(1)
    x, tx = pair(rng, (3, 48, 256), dtype)
    for step in range(3):
        with kiln.no_grad():
            got = kl(x)
        want = tx @ tl.weight.detach().double().T + tl.bias.detach().double()
        close(got, want, dtype, 256)
        with torch.no_grad():  # change the weights in place: the packed copy must follow
            tl.weight.mul_(-0.5)
        with kiln.no_grad():
            kl.weight.mul_(-0.5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rows", [2, 3, 4, 5, 8, 15])
def test_linear_of_a_few_rows_matches_torch(dtype, rows):
    """2 to 15 rows (several sequences decoded at once): kiln's dot tiles below 4 rows, oneDNN's
    packed weight from 4 (decision 0045), with a bias, a changed weight and F.linear on a 3-D
    input, against float64."""
    rng = np.random.default_rng(rows)
    n, k = 130, 300
    x, tx = pair(rng, (1, rows, k), dtype)
    w, tw = pair(rng, (n, k), dtype)
    b, tb = pair(rng, (n,), dtype)
    for step in range(2):
        with kiln.no_grad():
            got = KF.linear(x, w, b)
        assert tuple(got.shape) == (1, rows, n)
        close(got, tx @ tw.T + tb, dtype, k)
        with kiln.no_grad():
            w.mul_(-0.5)
        tw = tw * -0.5


def test_linear_after_optimizer_steps_uses_the_new_weights():
    torch.manual_seed(1)
    tl = torch.nn.Linear(64, 32)
    kl = kiln.nn.Linear(64, 32)
    with kiln.no_grad():
        kl.weight.copy_(kiln.from_numpy(tl.weight.detach().numpy()))
        kl.bias.copy_(kiln.from_numpy(tl.bias.detach().numpy()))
    topt = torch.optim.SGD(tl.parameters(), lr=0.1)
    kopt = kiln.optim.SGD(kl.parameters(), lr=0.1)
    xs = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    tx, kx = torch.from_numpy(xs), kiln.from_numpy(xs)
    for _ in range(3):
        with kiln.no_grad():  # inference first: packs the current weight
            got = kl(kx).numpy()
        with torch.no_grad():
            want = tl(tx).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        topt.zero_grad()
        kopt.zero_grad()
        (tl(tx) ** 2).mean().backward()
        (kl(kx) ** 2).mean().backward()
        topt.step()
        kopt.step()


def test_fused_linear_gradients_match_torch():
    rng = np.random.default_rng(4)
    xs, ws, bs, rs = (rng.standard_normal(s) for s in [(20, 12), (9, 12), (9,), (20, 9)])
    kt = [kiln.tensor(a, dtype=kiln.float64, requires_grad=True) for a in (xs, ws, bs, rs)]
    tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xs, ws, bs, rs)]
    y = KF.fused_linear(kt[0], kt[1], kt[2], activation="gelu", residual=kt[3])
    (y * y).sum().backward()
    ty = torch.nn.functional.gelu(tt[0] @ tt[1].T + tt[2]) + tt[3]
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    for k, t in zip(kt, tt):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_fused_linear_errors():
    x, w = kiln.zeros(4, 8), kiln.zeros(6, 8)
    with pytest.raises(ValueError, match="gelu_tanh"):
        KF.fused_linear(x, w, activation="tanhh")
    with pytest.raises(RuntimeError, match="in_features"):
        KF.fused_linear(x, kiln.zeros(6, 7))
    with pytest.raises(RuntimeError, match="dtype"):
        KF.fused_linear(x, w.to(kiln.float64))
    with pytest.raises(RuntimeError, match=r"bias of shape \[6\]"):
        KF.fused_linear(x, w, kiln.zeros(5))
    with pytest.raises(RuntimeError):
        KF.fused_linear(x, w, residual=kiln.zeros(5))
    with pytest.raises(RuntimeError, match="floating out_dtype"):
        KF.fused_linear(x, w, out_dtype=kiln.int32)


@pytest.mark.parametrize("m", [4, 8, 24])
@pytest.mark.parametrize("view", ["row_slice", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_of_a_strided_input(m, view, dtype):
    """x a slice of wider rows or a transpose: oneDNN's Linear gets a contiguous copy (its
    strided implementation streamed the weight at half the rate), kiln's kernels read it in
    place; the same values as the contiguous x."""
    rng = np.random.default_rng(m)
    k, n = 600, 500
    if view == "row_slice":
        kx, tx = pair(rng, (m, k + 40), dtype)
        kx, tx = kx[:, 20:20 + k], tx[:, 20:20 + k]
    else:
        kx, tx = pair(rng, (k, m), dtype)
        kx, tx = kx.t(), tx.t()
    assert not kx.is_contiguous()
    kw, tw = pair(rng, (n, k), dtype)
    kb, tb = pair(rng, (n,), dtype)
    for _ in range(3):  # the weight's first use, then its packed copy
        close(KF.linear(kx, kw, kb), tx @ tw.T + tb, dtype, k)
