"""float16 elementwise ops computed in one pass (decision 0066): dense float16 blocks widened
in L1, the float32 vector function, one rounding back. By definition the result is the
float32 kernel's on the widened values rounded once, so it is compared bit for bit with
kiln's float32 op rounded (and with PyTorch 2.13 where both round one correctly rounded
float32 result: add, sub, mul, div, max, min, floor, ...). Every form the kernels cut
differently: sizes across block and chunk edges, broadcast rows and columns, one-value
operands, transposed operands, in-place and out=, channels-last, outputs large enough for
streaming stores, and special values (NaN, inf, overflow, subnormals, -0)."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn.functional as KF
import torch.nn.functional as TF

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, -65504.0, 6.0e-8, -6.0e-8,
                     1.0e-5, 0.5, 1.5, 2.5, -2.5, 1024.5], np.float16)


def _values(n, seed, low=-8.0, high=8.0, specials=True):
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, n).astype(np.float16)
    if specials:
        a[rng.choice(n, min(n, len(SPECIALS) * 3), replace=False)] = np.resize(SPECIALS, min(
            n, len(SPECIALS) * 3))
    return a


def _pair(shape, seed, **kw):
    a = _values(int(np.prod(shape)), seed, **kw).reshape(shape)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _bits(x):
    if isinstance(x, torch.Tensor):
        return x.contiguous().view(torch.int16).numpy()
    return x.contiguous().numpy().view(np.int16)


def _same_bits(got, want):
    assert got.dtype == kiln.float16
    g, w = _bits(got), _bits(want)
    # Every NaN is a NaN (payloads of computed NaNs are not part of the contract).
    g_nan, w_nan = (g & 0x7C00) == 0x7C00, (w & 0x7C00) == 0x7C00
    g_nan &= (g & 0x3FF) != 0
    w_nan &= (w & 0x3FF) != 0
    np.testing.assert_array_equal(g_nan, w_nan)
    np.testing.assert_array_equal(g[~g_nan], w[~w_nan])


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]

# (kiln operand shapes, description): cut into runs differently by the kernel
BINARY_FORMS = [
    (((70001,), (70001,)), "dense, across block and chunk edges"),
    (((3, 1000), (1000,)), "a broadcast row (bias)"),
    (((1000, 3), (1000, 1)), "a broadcast column"),
    (((5, 7, 33), ()), "a one-value tensor"),
    (((), (4, 513)), "a one-value first operand"),
]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", [f[0] for f in BINARY_FORMS], ids=[f[1] for f in BINARY_FORMS])
def test_binary_ops_are_bit_exact_with_torch(op, shapes):
    ka, ta = _pair(shapes[0], seed=1)
    kb, tb = _pair(shapes[1], seed=2, low=0.25, high=4.0)
    got = getattr(kiln, op)(ka, kb)
    _same_bits(got, getattr(torch, op)(ta, tb))


@pytest.mark.parametrize("op", BINARY)
def test_binary_ops_with_transposed_operands(op):
    ka, ta = _pair((300, 200), seed=3)
    kb, tb = _pair((200, 300), seed=4, low=0.25, high=4.0)
    _same_bits(getattr(kiln, op)(ka, kb.t()), getattr(torch, op)(ta, tb.t()))
    _same_bits(getattr(kiln, op)(ka.t(), kb), getattr(torch, op)(ta.t(), tb))


COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_match_torch_in_every_form(op):
    # specials included: NaN compares unequal to everything, -0 == 0, infinities order
    ka, ta = _pair((300, 200), seed=30)
    kb, tb = _pair((300, 200), seed=31)
    kb[::3] = ka[::3]  # equal values, so eq / le / ge see true
    tb[::3] = ta[::3]
    forms = [(ka, kb, ta, tb), (ka, kb[0], ta, tb[0]), (ka, kb[:, :1], ta, tb[:, :1]),
             (ka, kb.t().contiguous().t(), ta, tb.t().contiguous().t()), (ka[0, 0], kb, ta[0, 0], tb)]
    for x, y, tx, ty in forms:
        got = getattr(kiln, op)(x, y)
        assert got.dtype == kiln.bool
        np.testing.assert_array_equal(got.numpy(), getattr(torch, op)(tx, ty).numpy())
    np.testing.assert_array_equal(getattr(kiln, op)(ka, 0.5).numpy(),
                                  getattr(torch, op)(ta, 0.5).numpy())


def test_python_scalars_and_overflow():
    ka, ta = _pair((4099,), seed=5)
    _same_bits(ka * 2, ta * 2)
    _same_bits(ka + 0.5, ta + 0.5)
    _same_bits(1 / ka, 1 / ta)
    big, tbig = kiln.full((100,), 60000.0, dtype=kiln.float16), torch.full((100,), 60000.0,
                                                                           dtype=torch.float16)
    _same_bits(big + big, tbig + tbig)  # inf
    tiny, ttiny = kiln.full((100,), 6.0e-8, dtype=kiln.float16), torch.full((100,), 6.0e-8,
                                                                            dtype=torch.float16)
    _same_bits(tiny * 0.5, ttiny * 0.5)  # a subnormal halved: ties to even


def test_in_place_and_out_forms():
    ka, ta = _pair((2, 5000), seed=6)
    kb, tb = _pair((2, 5000), seed=7)
    alias = ka.view(-1)
    ka.mul_(kb)
    ta.mul_(tb)
    _same_bits(ka, ta)
    _same_bits(alias.view(2, 5000), ta)
    out = kiln.empty((2, 5000), dtype=kiln.float16)
    kiln.add(ka, kb, out=out)
    _same_bits(out, ta + tb)
    strided = kiln.zeros((2, 10000), dtype=kiln.float16)[:, ::2]
    kiln.div(ka, kb, out=strided)
    _same_bits(strided, ta / tb)
    kb.sub_(ka[1])  # in place with a broadcast row
    tb.sub_(ta[1])
    _same_bits(kb, tb)


def test_large_outputs_take_streaming_stores():
    # 2^24 + 3 values: 32 MiB of float16, past the 24 MiB streaming threshold, an odd tail.
    n = (1 << 24) + 3
    ka, ta = _pair((n,), seed=8, specials=False)
    kb, tb = _pair((n,), seed=9, low=0.5, high=2.0, specials=False)
    _same_bits(kiln.add(ka, kb), ta + tb)
    _same_bits(kiln.mul(ka, 3), ta * 3)
    got = KF.relu(ka)
    _same_bits(got, TF.relu(ta))


# addcmul(shift, x, scale) operand shapes, and whether the scale is read transposed: a
# per-channel scale and shift on NCHW (eval batch norm), on channels-last rows, full tensors,
# a one-value shift with a transposed factor
ADDCMUL_FORMS = [
    ((8, 1, 1), (2, 8, 5, 7), (8, 1, 1), False),
    ((8,), (3, 5, 9, 8), (8,), False),
    ((1000,), (1000,), (1000,), False),
    ((), (60, 50), (50, 60), True),
]


@pytest.mark.parametrize("form", ADDCMUL_FORMS, ids=["planar", "rows", "dense", "transposed"])
def test_addcmul_is_the_float32_op_rounded_once(form):
    s_shape, x_shape, m_shape, transposed = form
    ks, ts = _pair(s_shape, seed=20)
    kx, tx = _pair(x_shape, seed=21)
    km, tm = _pair(m_shape, seed=22, low=-2, high=2)
    if transposed:
        km, tm = km.t(), tm.t()
    got = kiln.addcmul(ks, kx, km)
    wide = [t.to(kiln.float32) for t in (ks, kx, km)]
    _same_bits(got, kiln.addcmul(*wide).to(kiln.float16))
    want = torch.addcmul(ts.float(), tx.float(), tm.float()).half()
    finite = np.isfinite(want.float().numpy())
    np.testing.assert_allclose(got.to(kiln.float32).numpy()[finite],
                               want.float().numpy()[finite], rtol=2e-3, atol=1e-3)
    # value != 1 takes the float32 copies: the same definition
    _same_bits(kiln.addcmul(ks, kx, km, value=0.5),
               kiln.addcmul(*wide, value=0.5).to(kiln.float16))


@pytest.mark.parametrize("channels_last", [False, True])
def test_eval_batch_norm_matches_torch(channels_last):
    kx, tx = _pair((2, 16, 9, 11), seed=23, specials=False)
    kw, tw = _pair((16,), seed=24, low=0.5, high=2, specials=False)
    kb, tb = _pair((16,), seed=25, specials=False)
    km, tm = _pair((16,), seed=26, low=-1, high=1, specials=False)
    kv, tv = _pair((16,), seed=27, low=0.5, high=3, specials=False)
    if channels_last:
        kx = kx.contiguous(memory_format=kiln.channels_last)
        tx = tx.contiguous(memory_format=torch.channels_last)
    got = KF.batch_norm(kx, km, kv, kw, kb, training=False, eps=1e-5)
    want = TF.batch_norm(tx.float(), tm.float(), tv.float(), tw.float(), tb.float(),
                         training=False, eps=1e-5)
    assert got.dtype == kiln.float16
    # kiln rounds the scale and shift to float16 (its ops on float16 vectors) before the
    # pass: within a few float16 units of the float32 evaluation.
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.numpy(), rtol=4e-3, atol=4e-3)


# unary op, kiln function, torch function, input range
UNARY = [
    ("exp", kiln.exp, torch.exp, (-12, 12)),
    ("exp2", kiln.exp2, torch.exp2, (-16, 16)),
    ("expm1", kiln.expm1, torch.expm1, (-4, 4)),
    ("log", kiln.log, torch.log, (0, 1000)),
    ("log2", kiln.log2, torch.log2, (0, 1000)),
    ("log1p", kiln.log1p, torch.log1p, (-0.9, 100)),
    ("sqrt", kiln.sqrt, torch.sqrt, (0, 1000)),
    ("rsqrt", kiln.rsqrt, torch.rsqrt, (0, 1000)),
    ("sin", kiln.sin, torch.sin, (-10, 10)),
    ("cos", kiln.cos, torch.cos, (-10, 10)),
    ("tan", kiln.tan, torch.tan, (-1.5, 1.5)),
    ("tanh", kiln.tanh, torch.tanh, (-6, 6)),
    ("sigmoid", kiln.sigmoid, torch.sigmoid, (-12, 12)),
    ("relu", kiln.relu, torch.relu, (-8, 8)),
    ("silu", KF.silu, TF.silu, (-8, 8)),
    ("erf", kiln.erf, torch.erf, (-3, 3)),
    ("reciprocal", kiln.reciprocal, torch.reciprocal, (-8, 8)),
    ("gelu", KF.gelu, TF.gelu, (-6, 6)),
    ("gelu_tanh", lambda x: KF.gelu(x, approximate="tanh"),
     lambda x: TF.gelu(x, approximate="tanh"), (-6, 6)),
    ("softplus", lambda x: KF.softplus(x, 2.0, 10.0), lambda x: TF.softplus(x, 2.0, 10.0),
     (-8, 8)),
    ("leaky_relu", lambda x: KF.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), (-8, 8)),
    ("clamp", lambda x: kiln.clamp(x, -1.5, 2.25), lambda x: torch.clamp(x, -1.5, 2.25),
     (-4, 4)),
]


@pytest.mark.parametrize("name,kf,tf,rng", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops_are_the_float32_op_rounded_once(name, kf, tf, rng):
    ka, ta = _pair((9, 1111), seed=10, low=rng[0], high=rng[1])
    got = kf(ka)
    _same_bits(got, kf(ka.to(kiln.float32)).to(kiln.float16))
    want = tf(ta.float()).half()
    finite = np.isfinite(want.float().numpy())
    np.testing.assert_allclose(got.to(kiln.float32).numpy()[finite],
                               want.float().numpy()[finite], rtol=2e-3, atol=1e-3)
    # channels-last in, channels-last out, the same values
    ka4 = ka.reshape(3, 3, 11, 101).contiguous(memory_format=kiln.channels_last)
    got4 = kf(ka4)
    assert got4.is_contiguous(memory_format=kiln.channels_last)
    _same_bits(got4, got.reshape(3, 3, 11, 101))
    # out= and a strided input (which takes the float32 copies) agree within a rounding
    out = kiln.empty((9, 1111), dtype=kiln.float16)
    if name in ("exp", "sigmoid", "clamp"):
        (kiln.clamp(ka, -1.5, 2.25, out=out) if name == "clamp"
         else getattr(kiln, name)(ka, out=out))
        _same_bits(out, got)
    strided = kf(ka.t())
    np.testing.assert_allclose(strided.to(kiln.float32).numpy(),
                               got.t().to(kiln.float32).numpy(), rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("name", ["exp", "relu", "sigmoid", "sqrt"])
def test_unary_in_place(name):
    ka, ta = _pair((3, 4097), seed=11, low=0, high=8)
    want = getattr(kiln, name)(ka)
    getattr(ka, name + "_")()
    _same_bits(ka, want)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign", "abs", "neg"])
def test_exact_unary_ops_match_torch(name):
    ka, ta = _pair((7, 3001), seed=12, low=-3000, high=3000)
    _same_bits(getattr(kiln, name)(ka), getattr(torch, name)(ta))
    kh, th = _pair((4099,), seed=13, low=-4, high=4)
    _same_bits(getattr(kiln, name)(kh * 2), getattr(torch, name)(th * 2))  # many halves


def _peak_extra_bytes(fn):
    cpu = kiln.device("cpu")
    base = kiln.memory_allocated(cpu)
    kiln.reset_peak_memory_stats(cpu)
    result = fn()
    return kiln.max_memory_allocated(cpu) - base, result


@pytest.mark.parametrize("form", ["exp", "mul bias", "add scalar", "mul in place", "addcmul",
                                  "lt"])
def test_dense_float16_ops_make_no_float32_copies(form):
    # The peak of allocated memory during the op: its output alone, where float32 copies of
    # the inputs and the output add at least twice the input's bytes (as at the baseline
    # level, without F16C, where float16 ops run on float32 copies).
    ka, _ = _pair((256, 1000), seed=14)
    kb, _ = _pair((1000,), seed=15)
    fns = {"exp": lambda: kiln.exp(ka), "mul bias": lambda: ka * kb,
           "add scalar": lambda: ka + 2, "mul in place": lambda: ka.mul_(kb),
           "addcmul": lambda: kiln.addcmul(kb, ka, kb), "lt": lambda: ka < kb}
    extra, _ = _peak_extra_bytes(fns[form])
    nbytes = ka.numel() * 2
    if kiln.backends.cpu.get_cpu_capability() == "baseline":
        assert extra >= 2 * nbytes, extra  # at least the float32 copy of ka
    else:
        # below the copies' bytes with room for the allocator's rounding and small scratch
        assert extra < (1 if form == "mul in place" else 2) * nbytes, extra
