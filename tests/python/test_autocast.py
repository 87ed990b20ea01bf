"""kiln.autocast / kiln.amp against torch 2.13's CPU autocast: which ops run in bfloat16 and
which in float32, output and gradient dtypes, nesting, the decorator form, float64 left
alone, the xpu default (float16), and GradScaler's skip-and-backoff rule."""
import numpy as np
import pytest
import torch

import kiln


def _pair(shape, seed):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return kiln.tensor(t.numpy()), t


CASES = {
    "mm": lambda L, a, b: L.mm(a, b.t()),
    "matmul": lambda L, a, b: a @ b.t(),
    "bmm": lambda L, a, b: L.bmm(a[None], b.t()[None]),
    "addmm": lambda L, a, b: L.addmm(a[:, :1], a, b.t()),
    "linear": lambda L, a, b: L.nn.functional.linear(a, b),
    "conv2d": lambda L, a, b: L.nn.functional.conv2d(a.reshape(1, 1, 6, 4), b.reshape(6, 1, 2, 2)),
    "softmax of a product": lambda L, a, b: L.softmax(a @ b.t(), -1),
    "add": lambda L, a, b: a + b,
    "cross_entropy": lambda L, a, b: L.nn.functional.cross_entropy(a @ b.t(), L.tensor([0, 1, 2, 3, 4, 5])),
    "prod": lambda L, a, b: L.prod((a @ b.t()) * 0 + 1),
    "sum of a product": lambda L, a, b: (a @ b.t()).sum(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_output_dtypes_match_torch(name):
    ka, ta = _pair((6, 4), 1)
    kb, tb = _pair((6, 4), 2)
    with torch.autocast("cpu"):
        want = CASES[name](torch, ta, tb)
    with kiln.autocast("cpu"):
        got = CASES[name](kiln, ka, kb)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-2, atol=2e-2)


def test_gradients_reach_float32_weights_in_float32():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    km = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 4))
    km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x, t = torch.randn(5, 8), torch.tensor([0, 1, 2, 3, 0])
    with torch.autocast("cpu"):
        tl = torch.nn.functional.cross_entropy(tm(x), t)
    with kiln.autocast("cpu"):
        kl = kiln.nn.functional.cross_entropy(km(kiln.tensor(x.numpy())), kiln.tensor(t.numpy()))
    assert kl.dtype == kiln.float32
    tl.backward()
    kl.backward()
    for (name, kp), tp in zip(km.named_parameters(), tm.parameters()):
        assert kp.grad.dtype == kiln.float32, name
        np.testing.assert_allclose(kp.grad.numpy(), tp.grad.numpy(), rtol=5e-2, atol=5e-3)
    assert abs(float(kl.detach()) - float(tl.detach())) < 1e-2


def test_nesting_disabling_decorator_and_float64():
    a, _ = _pair((3, 3), 3)
    assert not kiln.is_autocast_enabled("cpu") and not kiln.is_autocast_enabled()
    with kiln.autocast("cpu"):
        assert kiln.is_autocast_enabled("cpu") and kiln.get_autocast_dtype("cpu") == kiln.bfloat16
        with kiln.autocast("cpu", enabled=False):
            assert (a @ a).dtype == kiln.float32
        assert (a @ a).dtype == kiln.bfloat16
        with kiln.autocast("cpu", dtype=kiln.float16):
            assert (a @ a).dtype == kiln.float16
        assert (a.double() @ a.double()).dtype == kiln.float64  # float64 is never cast
    assert not kiln.is_autocast_enabled("cpu") and (a @ a).dtype == kiln.float32

    @kiln.autocast("cpu")
    def product(x):
        return x @ x

    assert product(a).dtype == kiln.bfloat16 and (a @ a).dtype == kiln.float32
    with pytest.raises(RuntimeError):
        with kiln.autocast("cuda"):
            pass


def test_weight_casts_are_cached_and_refreshed_after_an_update():
    w = kiln.nn.Parameter(kiln.ones(4, 4))
    x = kiln.ones(2, 4)
    with kiln.autocast("cpu"):
        y1 = x @ w
        with kiln.no_grad():
            w.mul_(2.0)  # a new version: the cached bfloat16 copy is not reused
        y2 = x @ w
    assert float(y1[0, 0]) == 4.0 and float(y2[0, 0]) == 8.0


@pytest.mark.parametrize("input_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rows", [3, 8, 64])
def test_inference_linear_keeps_float32_weights_and_matches_torch(rows, input_dtype):
    """Under autocast without grad, kiln's Linear reads its float32 weight rounded to bfloat16
    (packed once on AMX, decision 0121), from a float32 or a bfloat16 input: torch's autocast
    values on every forward, and a changed weight is seen."""
    torch.manual_seed(rows)
    tm = torch.nn.Linear(96, 130)
    km = kiln.nn.Linear(96, 130)
    km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = torch.randn(2, rows, 96)
    kx = kiln.tensor(x.numpy())
    if input_dtype == "bfloat16":  # a layer fed by a bfloat16 product: operands mixed
        x, kx = x.bfloat16(), kx.bfloat16()
    for step in range(4):
        if step == 3:
            with torch.no_grad(), kiln.no_grad():
                tm.weight.mul_(-0.5)
                km.weight.mul_(-0.5)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = tm(x)
        with kiln.no_grad(), kiln.autocast("cpu", dtype=kiln.bfloat16):
            got = km(kx)
        assert str(got.dtype) == "kiln.bfloat16", got.dtype
        assert str(km.weight.dtype) == "kiln.float32"
        # Both sum bfloat16 products in float32 and round once; the order of the sums may
        # differ, so one bfloat16 ulp (2^-8 relative) apart at most.
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=8e-3, atol=8e-3)


@pytest.mark.parametrize("input_dtype", ["float32", "bfloat16"])
def test_inference_conv_keeps_float32_weights_and_matches_torch(input_dtype):
    """A Conv2d under autocast from a float32 or bfloat16 input (the latter raised before
    decision 0121; PyTorch casts before its checks), over forwards and a weight change."""
    torch.manual_seed(5)
    tc = torch.nn.Conv2d(16, 24, 3, padding=1)
    kc = kiln.nn.Conv2d(16, 24, 3, padding=1)
    kc.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tc.state_dict().items()})
    x = torch.randn(2, 16, 10, 10)
    kx = kiln.tensor(x.numpy())
    if input_dtype == "bfloat16":
        x, kx = x.bfloat16(), kx.bfloat16()
    for step in range(3):
        if step == 2:
            with torch.no_grad(), kiln.no_grad():
                tc.weight.mul_(-0.5)
                kc.weight.mul_(-0.5)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = tc(x)
        with kiln.no_grad(), kiln.autocast("cpu", dtype=kiln.bfloat16):
            got = kc(kx)
        assert str(got.dtype) == "kiln.bfloat16", got.dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-2, atol=2e-2)


def test_xpu_autocast_defaults_to_float16():
    a = kiln.ones(4, 4, device="xpu")
    with kiln.autocast("xpu"):
        assert (a @ a).dtype == kiln.float16
        assert (a.cpu() @ a.cpu()).dtype == kiln.float32  # only the xpu region is on
    assert kiln.get_autocast_dtype("xpu") == torch_dtype_name_to_kiln(torch.get_autocast_dtype("xpu"))


def torch_dtype_name_to_kiln(d):
    return getattr(kiln, str(d).split(".")[-1])


def test_grad_scaler_skips_non_finite_steps_and_backs_off():
    for L in (kiln, torch):
        p = L.nn.Parameter(L.ones(2))
        opt = L.optim.SGD([p], lr=0.1)
        scaler = L.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        history = []
        for grad in ([1.0, 2.0], [float("inf"), 1.0], [1.0, 1.0], [1.0, 1.0]):
            loss = (p * L.tensor(grad)).sum()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            history.append((scaler.get_scale(), p.detach().tolist()))
        if L is kiln:
            kiln_history = history
    assert kiln_history == history
