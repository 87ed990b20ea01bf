"""The xpu (OpenCL) backend against PyTorch on the CPU: the runtime contract (copies, streams,
events, memory), every op with an xpu kernel, and small models run wholly on the device.
On machines without a GPU the device is PoCL's CPU OpenCL driver (conftest sets
KILN_XPU_DEVICE_TYPES=all; scripts/install_deps.sh installs pocl-opencl-icd)."""
import numpy as np
import pytest
import torch

import kiln

from xpu_testing import XPU, k2t, seeded, t2k  # noqa: F401  (seeded: an autouse fixture)



def test_xpu_is_available():
    assert kiln.xpu.is_available(), (
        "no xpu device: install an OpenCL driver (pocl-opencl-icd) and ocl-icd-libopencl1")
    assert kiln.xpu.device_count() >= 1
    props = kiln.xpu.get_device_properties(0)
    assert props.name and props.total_memory > 0 and "OpenCL" in props.capabilities




def close(k, t, rtol=1e-5, atol=1e-6):
    got = k2t(k)
    want = t.float() if t.dtype == torch.bfloat16 else t
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    if want.dtype == torch.bool:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True)


# ---- runtime contract ----
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "int64", "int32",
                                   "int16", "int8", "uint8", "bool"])
def test_roundtrip_is_bit_exact(dtype):
    g = torch.Generator().manual_seed(1)
    t = (torch.randn(37, 5, generator=g) * 100)
    t = t.to(getattr(torch, dtype))
    k = kiln.tensor(t.float().numpy()).to(getattr(kiln, dtype)) if dtype == "bfloat16" else kiln.tensor(t.numpy())
    on = k.to(XPU)
    assert on.device.type == "xpu"
    back = on.cpu()
    assert kiln.equal(back, k)
    # A strided (transposed) view moves as its values.
    assert kiln.equal(k.t().to(XPU).cpu(), k.t().contiguous())
    assert kiln.equal(on.t().contiguous().cpu(), k.t().contiguous())
    # Conversion on the device agrees with the CPU's.
    for other in ["float32", "int64", "bool"]:
        assert kiln.equal(on.to(getattr(kiln, other)).cpu(), k.to(getattr(kiln, other))), other


def test_memory_is_counted_and_freed():
    kiln.xpu.synchronize()
    before = kiln.xpu.memory_allocated()
    x = kiln.empty(1 << 20, device=XPU)
    assert kiln.xpu.memory_allocated() >= before + 4 * (1 << 20)
    del x
    assert kiln.xpu.memory_allocated() == before


def test_streams_and_events_order_work():
    s = kiln.xpu.Stream()
    x = kiln.ones(1000, 100, device=XPU)
    start, end = kiln.xpu.Event(enable_timing=True), kiln.xpu.Event(enable_timing=True)
    start.record()
    y = (x * 3).sum()
    end.record()
    done = kiln.xpu.Event()
    done.record()
    done.wait(s)  # s waits for y
    with kiln.stream(s) if hasattr(kiln, "stream") else _nullcontext():
        z = y + 1
    s.synchronize()
    assert z.item() == 300001.0
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_device_mismatch_is_an_error():
    with pytest.raises(RuntimeError):
        kiln.ones(3, device=XPU) + kiln.ones(3)


def test_op_without_kernel_says_how_to_fall_back():
    a = kiln.ones(32, 8, dtype=kiln.int8, device=XPU)
    b = kiln.ones(8, 16, dtype=kiln.int8, device=XPU)
    with pytest.raises(NotImplementedError, match="KILN_FALLBACK"):
        kiln._int_mm(a, b)
    kiln._C._set_cpu_fallback_enabled(True)
    try:
        before = kiln._C._total_fallback_calls()
        r = kiln._int_mm(a, b * 2)
        assert r.device.type == "xpu" and kiln._C._total_fallback_calls() > before
        assert kiln.equal(r.cpu(), kiln.full((32, 16), 16, dtype=kiln.int32))
    finally:
        kiln._C._set_cpu_fallback_enabled(False)


# ---- elementwise ----
UNARY_FLOAT = ["neg", "abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt",
               "sin", "cos", "tan", "tanh", "sigmoid", "relu", "erf", "erfc", "reciprocal",
               "floor", "ceil", "round", "trunc", "isnan", "isinf", "isfinite", "logical_not"]


def _unary_input(name, g):
    x = torch.randn(64, 33, generator=g, dtype=torch.float64) * 3
    if name in ("log", "log2", "sqrt", "rsqrt", "log1p"):
        x = x.abs() + 0.01
    if name in ("tan",):
        x = x.clamp(-1.4, 1.4)
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_unary(name, dtype):
    g = torch.Generator().manual_seed(hash(name) % 1000)
    x = _unary_input(name, g).to(getattr(torch, dtype))
    want = getattr(torch, name)(x)
    got = getattr(kiln, name)(t2k(x))
    tol = {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-12), "bfloat16": (1e-2, 1e-2)}[dtype]
    if name in ("erfc", "lgamma", "tan", "expm1", "exp2"):
        tol = (max(tol[0], 1e-5), max(tol[1], 1e-6))
    close(got, want, *tol)
    # Through a transposed (strided) view.
    close(getattr(kiln, name)(t2k(x).t()), getattr(torch, name)(x.t()), *tol)


@pytest.mark.parametrize("name", ["neg", "abs", "relu", "floor", "logical_not"])
def test_unary_integers(name):
    x = torch.randint(-50, 50, (40, 3), dtype=torch.int64)
    close(getattr(kiln, name)(t2k(x)), getattr(torch, name)(x), 0, 0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_silu_softplus_leaky(approximate):
    x = torch.randn(300, 7, dtype=torch.float32, generator=torch.Generator().manual_seed(4)) * 4
    x[0, :3] = torch.tensor([-9.0, -6.5, -5.0])  # gelu's tail: 0.5 x (1 + erf) would cancel
    close(kiln.nn.functional.gelu(t2k(x), approximate=approximate),
          torch.nn.functional.gelu(x, approximate=approximate), 1e-5, 1e-6)
    close(kiln.nn.functional.silu(t2k(x)), torch.nn.functional.silu(x), 1e-5, 1e-6)
    close(kiln.nn.functional.softplus(t2k(x), beta=2.0, threshold=5.0),
          torch.nn.functional.softplus(x, beta=2.0, threshold=5.0), 1e-5, 1e-6)
    close(kiln.nn.functional.leaky_relu(t2k(x), 0.2), torch.nn.functional.leaky_relu(x, 0.2))


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod", "remainder", "atan2",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast(name, dtype):
    g = torch.Generator().manual_seed(7)
    a = torch.randn(5, 1, 31, generator=g, dtype=torch.float64) * 3
    b = torch.randn(6, 31, generator=g, dtype=torch.float64) * 3
    if name == "pow":
        a = a.abs() + 0.1
    if name in ("fmod", "remainder", "div"):
        b = torch.where(b.abs() < 0.1, torch.full_like(b, 0.5), b)
    a[0, 0, 0] = float("nan")
    a, b = a.to(getattr(torch, dtype)), b.to(getattr(torch, dtype))
    tol = {"float32": (3e-6, 1e-6), "float64": (1e-12, 1e-12), "bfloat16": (1e-2, 1e-2)}[dtype]
    close(getattr(kiln, name)(t2k(a), t2k(b)), getattr(torch, name)(a, b), *tol)
    # A 0-d right-hand side and a strided left-hand side.
    s = torch.tensor(1.5, dtype=b.dtype)
    close(getattr(kiln, name)(t2k(b).t(), t2k(s)), getattr(torch, name)(b.t(), s), *tol)


def test_binary_integers_and_bool():
    a = torch.randint(-20, 20, (9, 8), dtype=torch.int64)
    b = torch.randint(1, 5, (8,), dtype=torch.int64)
    for name in ["add", "sub", "mul", "maximum", "minimum", "pow", "bitwise_and", "bitwise_or",
                 "bitwise_xor", "eq", "lt"]:
        close(getattr(kiln, name)(t2k(a), t2k(b)), getattr(torch, name)(a, b), 0, 0)
    p, q = torch.rand(10) > 0.5, torch.rand(10) > 0.5
    for name in ["logical_and", "logical_or", "logical_xor", "bitwise_xor", "add", "mul"]:
        close(getattr(kiln, name)(t2k(p), t2k(q)), getattr(torch, name)(p, q), 0, 0)
    close(kiln.add(t2k(a), t2k(b), alpha=3), torch.add(a, b, alpha=3), 0, 0)


def test_alpha_where_clamp_addcmul_masked_fill():
    a, b, c = (torch.randn(4, 17) for _ in range(3))
    close(kiln.add(t2k(a), t2k(b), alpha=0.25), torch.add(a, b, alpha=0.25))
    close(kiln.sub(t2k(a), t2k(b), alpha=2), torch.sub(a, b, alpha=2))
    cond = a > 0
    close(kiln.where(t2k(cond), t2k(b), t2k(c)), torch.where(cond, b, c))
    close(kiln.clamp(t2k(a), min=-0.5, max=0.3), torch.clamp(a, min=-0.5, max=0.3))
    close(kiln.clamp(t2k(a), max=0.1), torch.clamp(a, max=0.1))
    close(kiln.addcmul(t2k(a), t2k(b), t2k(c), value=0.5), torch.addcmul(a, b, c, value=0.5))
    close(kiln.addcdiv(t2k(a), t2k(b), t2k(c.abs() + 1), value=2), torch.addcdiv(a, b, c.abs() + 1, value=2))
    close(t2k(a).masked_fill(t2k(cond[0]), -7.0), a.masked_fill(cond[0], -7.0))
    close(kiln.div(t2k(a), t2k(b.abs() + 0.5), rounding_mode="floor"),
          torch.div(a, b.abs() + 0.5, rounding_mode="floor"))


def test_in_place_and_out_forms():
    a, b = torch.randn(8, 8), torch.randn(8)
    ka = t2k(a)
    ka.mul_(t2k(b)).add_(1.0)
    close(ka, a.mul(b).add(1.0))
    kv = t2k(a)
    kv[:, 2:5] = 0.0  # fill_ through a strided view
    a2 = a.clone()
    a2[:, 2:5] = 0.0
    close(kv, a2)


def test_factories_on_device():
    close(kiln.arange(0, 1, 0.1, device=XPU), torch.arange(0, 1, 0.1), 0, 0)
    close(kiln.arange(5, 50, 3, device=XPU), torch.arange(5, 50, 3), 0, 0)
    close(kiln.full((3, 4), 2.5, device=XPU), torch.full((3, 4), 2.5), 0, 0)
    close(kiln.zeros(5, dtype=kiln.int32, device=XPU), torch.zeros(5, dtype=torch.int32), 0, 0)
    close(kiln.tril(t2k(torch.arange(30.).reshape(5, 6)), 1), torch.tril(torch.arange(30.).reshape(5, 6), 1), 0, 0)
    close(kiln.triu(t2k(torch.arange(24.).reshape(2, 3, 4)), -1), torch.triu(torch.arange(24.).reshape(2, 3, 4), -1), 0, 0)


def test_random_matches_the_cpu_for_a_seed():
    kiln.manual_seed(123)
    a = kiln.rand(100, 7)
    kiln.manual_seed(123)
    b = kiln.rand(100, 7, device=XPU)
    assert b.device.type == "xpu" and kiln.equal(a, b.cpu())
    kiln.manual_seed(5)
    c = kiln.randn(50)
    kiln.manual_seed(5)
    d = kiln.randn(50, device=XPU)
    assert kiln.equal(c, d.cpu())


# ---- reductions, softmax, norms ----
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("dims,keepdim", [((1,), False), ((0, 2), True), ((), False), ((-1,), True)])
def test_reductions(dims, keepdim, dtype):
    x = torch.randn(6, 9, 35, dtype=torch.float64).to(getattr(torch, dtype))
    tol = {"float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12), "bfloat16": (2e-2, 2e-2)}[dtype]
    kx = t2k(x)
    d = list(dims)
    close(kiln.sum(kx, d, keepdim=keepdim) if d else kiln.sum(kx),
          torch.sum(x, d, keepdim=keepdim) if d else torch.sum(x), *tol)
    close(kiln.mean(kx, d, keepdim=keepdim) if d else kiln.mean(kx),
          torch.mean(x, d, keepdim=keepdim) if d else torch.mean(x), *tol)
    close(kiln.amax(kx, d, keepdim=keepdim), torch.amax(x, d, keepdim=keepdim), 0, 0)
    close(kiln.amin(kx, d, keepdim=keepdim), torch.amin(x, d, keepdim=keepdim), 0, 0)
    if d:
        close(kiln.prod(kx[:, :3, :4], d[0], keepdim=keepdim), torch.prod(x[:, :3, :4], d[0], keepdim=keepdim), *tol)


def test_long_rows_split_across_groups():
    x = torch.randn(3, 200000, dtype=torch.float32)
    close(kiln.sum(t2k(x), 1), x.double().sum(1).float(), 1e-5, 1e-3)
    close(kiln.amax(t2k(x), 1), x.amax(1), 0, 0)
    close(kiln.mean(t2k(x)), x.double().mean().float(), 1e-5, 1e-6)
    i = torch.arange(100000, dtype=torch.int64)
    close(kiln.sum(t2k(i)), i.sum(), 0, 0)


def test_nan_and_integer_reductions():
    x = torch.randn(4, 50)
    x[1, 7] = float("nan")
    close(kiln.amax(t2k(x), [1]), torch.amax(x, 1), 0, 0)
    close(kiln.sum(t2k(x), [1]), torch.sum(x, 1), 1e-5, 1e-5)
    b = x > 0
    close(kiln.all(t2k(b), 1), torch.all(b, 1), 0, 0)
    close(kiln.any(t2k(b), 1), torch.any(b, 1), 0, 0)
    close(kiln.sum(t2k(b)), torch.sum(b), 0, 0)
    n = torch.randint(-9, 9, (7, 11), dtype=torch.int32)
    close(kiln.sum(t2k(n), [0]), torch.sum(n, 0), 0, 0)


def test_argmax_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [float("nan"), 5.0, float("nan"), 1.0], [0.0, 0.0, 0.0, 0.0]])
    close(kiln.argmax(t2k(x), 1), torch.argmax(x, 1), 0, 0)
    close(kiln.argmin(t2k(x), 1), torch.argmin(x, 1), 0, 0)
    y = torch.randn(40, 600)
    v, i = kiln.max(t2k(y), 1)
    tv, ti = torch.max(y, 1)
    close(v, tv, 0, 0)
    close(i, ti, 0, 0)
    v, i = kiln.min(t2k(y), 0, keepdim=True)
    tv, ti = torch.min(y, 0, keepdim=True)
    close(v, tv, 0, 0)
    close(i, ti, 0, 0)
    close(kiln.argmax(t2k(y)), torch.argmax(y), 0, 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(dim, dtype):
    x = (torch.randn(7, 300, 3, dtype=torch.float64) * 5).to(getattr(torch, dtype))
    tol = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "bfloat16": (1e-2, 1e-2)}[dtype]
    close(kiln.softmax(t2k(x), dim), torch.softmax(x, dim), *tol)
    close(kiln.log_softmax(t2k(x), dim), torch.log_softmax(x, dim), *(t * 10 for t in tol))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layer_norm_and_rms_norm(dtype):
    td = getattr(torch, dtype)
    x = torch.randn(4, 10, 96).to(td)
    w, b = torch.randn(96).to(td), torch.randn(96).to(td)
    tol = (1e-5, 1e-5) if dtype == "float32" else (2e-2, 2e-2)
    close(kiln.nn.functional.layer_norm(t2k(x), (96,), t2k(w), t2k(b), 1e-5),
          torch.nn.functional.layer_norm(x.float(), (96,), w.float(), b.float(), 1e-5).to(td), *tol)
    close(kiln.nn.functional.layer_norm(t2k(x), (10, 96)),
          torch.nn.functional.layer_norm(x.float(), (10, 96)).to(td), *tol)
    close(kiln.nn.functional.rms_norm(t2k(x), (96,), t2k(w), 1e-6),
          torch.nn.functional.rms_norm(x.float(), (96,), w.float(), 1e-6).to(td), *tol)


# ---- matrix products ----
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 17, 31), (65, 130, 67), (1, 257, 129), (128, 64, 1),
                                   (3, 300, 70), (8, 129, 9), (9, 33, 40), (260, 40, 300)])
def test_mm_odd_sizes_and_layouts(m, k, n):
    g = torch.Generator().manual_seed(m * 1000 + n)
    a = torch.randn(m, k, generator=g, dtype=torch.float64)
    b = torch.randn(k, n, generator=g, dtype=torch.float64)
    want = a @ b
    close(kiln.mm(t2k(a), t2k(b)), want, 1e-12, 1e-12)
    af, bf = a.float(), b.float()
    close(kiln.mm(t2k(af), t2k(bf)), want.float(), 1e-4, 1e-4)
    # Transposed operands (a Linear's weight is read as w.t()).
    close(kiln.mm(t2k(af.t().contiguous()).t(), t2k(bf.t().contiguous()).t()), want.float(), 1e-4, 1e-4)
    close(kiln.mm(t2k(a.bfloat16()), t2k(b.bfloat16())), (a.bfloat16().double() @ b.bfloat16().double()).bfloat16(),
          2e-2, 2e-2)


@pytest.mark.parametrize("m,k", [(1, 300), (3, 300), (1, 257), (8, 1024)])
def test_bfloat16_linear_few_rows(m, k):
    """Decoding's product: few rows times W.t() (the bfloat16 pairs path where K is even)."""
    x = torch.randn(m, k).bfloat16()
    w = torch.randn(70, k).bfloat16()
    want = (x.double() @ w.double().t()).bfloat16()
    close(kiln.nn.functional.linear(t2k(x), t2k(w)), want, 1e-2, 1e-2)
    # A batch of 2 over a shared weight, and an odd start (a view one element in).
    close(kiln.matmul(t2k(torch.stack([x, x])), t2k(w).t()), torch.stack([want, want]), 1e-2, 1e-2)
    w2 = torch.randn(70, k + 1).bfloat16()
    close(kiln.nn.functional.linear(t2k(x), t2k(w2)[:, 1:]),
          (x.double() @ w2[:, 1:].double().t()).bfloat16(), 1e-2, 1e-2)


def test_matmul_batched_vectors_addmm_linear():
    a = torch.randn(3, 1, 9, 20)
    b = torch.randn(4, 20, 11)
    close(kiln.matmul(t2k(a), t2k(b)), torch.matmul(a, b), 1e-4, 1e-4)
    v = torch.randn(20)
    close(kiln.matmul(t2k(a), t2k(v)), torch.matmul(a, v), 1e-4, 1e-4)
    close(kiln.matmul(t2k(v), t2k(b)), torch.matmul(v, b), 1e-4, 1e-4)
    close(kiln.dot(t2k(v), t2k(v)), torch.dot(v, v), 1e-5, 1e-5)
    close(kiln.bmm(t2k(b.transpose(1, 2)), t2k(b)), torch.bmm(b.transpose(1, 2), b), 1e-4, 1e-4)
    c, x, y = torch.randn(5, 7), torch.randn(5, 3), torch.randn(3, 7)
    close(kiln.addmm(t2k(c), t2k(x), t2k(y), beta=0.5, alpha=2.0),
          torch.addmm(c, x, y, beta=0.5, alpha=2.0), 1e-5, 1e-5)
    close(kiln.addmm(t2k(c[0]), t2k(x), t2k(y)), torch.addmm(c[0], x, y), 1e-5, 1e-5)
    w, bias = torch.randn(13, 20), torch.randn(13)
    close(kiln.nn.functional.linear(t2k(a), t2k(w), t2k(bias)),
          torch.nn.functional.linear(a, w, bias), 1e-4, 1e-4)


# ---- indexing ----
def test_index_select_embedding_cat():
    w = torch.randn(50, 16)
    idx = torch.tensor([3, 0, 49, 3])
    close(kiln.index_select(t2k(w), 0, t2k(idx)), torch.index_select(w, 0, idx), 0, 0)
    close(kiln.index_select(t2k(w), 1, t2k(torch.tensor([15, 2]))), torch.index_select(w, 1, torch.tensor([15, 2])), 0, 0)
    ids = torch.randint(0, 50, (2, 9))
    close(kiln.nn.functional.embedding(t2k(ids), t2k(w)), torch.nn.functional.embedding(ids, w), 0, 0)
    for bad in (50, -1):
        with pytest.raises(IndexError):
            kiln.index_select(t2k(w), 0, t2k(torch.tensor([bad])))
    parts = [torch.randn(2, 3), torch.randn(2, 5), torch.randn(2, 1)]
    close(kiln.cat([t2k(p) for p in parts], 1), torch.cat(parts, 1), 0, 0)
    close(kiln.cat([t2k(p.t()) for p in parts], 0), torch.cat([p.t() for p in parts], 0), 0, 0)


def test_dynamic_shape_and_sort_ops():
    x = torch.randn(6, 7)
    close(kiln.nonzero(t2k(x > 0.5)), torch.nonzero(x > 0.5), 0, 0)
    close(kiln.masked_select(t2k(x), t2k(x > 0)), torch.masked_select(x, x > 0), 0, 0)
    v, i = kiln.topk(t2k(x), 3, 1)
    tv, ti = torch.topk(x, 3, 1)
    close(v, tv, 0, 0)
    close(i, ti, 0, 0)
    v, i = kiln.sort(t2k(x), 0)
    tv, ti = torch.sort(x, 0)
    close(v, tv, 0, 0)


# ---- models ----
def test_transformer_block_runs_on_the_device_without_fallback():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    kl = kiln.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    kl.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in layer.state_dict().items()})
    kl = kl.to(XPU)
    x = torch.randn(2, 10, 64)
    before = kiln._C._total_fallback_calls()
    with kiln.no_grad():
        y = kl(t2k(x))
    assert y.device.type == "xpu"
    assert kiln._C._total_fallback_calls() == before
    with torch.no_grad():
        close(y, layer(x), 1e-4, 1e-4)


def test_mlp_training_step_matches_the_cpu():
    """Forward and backward on the device, no op on the CPU: the gradients equal torch's."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
    knet = kiln.nn.Sequential(kiln.nn.Linear(12, 32), kiln.nn.GELU(), kiln.nn.Linear(32, 3))
    knet.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in net.state_dict().items()})
    knet = knet.to(XPU)
    x, target = torch.randn(16, 12), torch.randint(0, 3, (16,))
    loss = torch.nn.functional.cross_entropy(net(x), target)
    loss.backward()
    before = kiln._C._total_fallback_calls()
    kloss = kiln.nn.functional.cross_entropy(knet(t2k(x)), t2k(target))
    kloss.backward()
    assert kiln._C._total_fallback_calls() == before
    close(kloss, loss.detach(), 1e-5, 1e-6)
    for (name, p), (_, kp) in zip(net.named_parameters(), knet.named_parameters()):
        assert kp.grad.device.type == "xpu", name
        close(kp.grad, p.grad, 1e-4, 1e-5)


def test_language_model_training_steps_match_the_cpu():
    """Embedding, a transformer layer, layer norm, cross-entropy, clip_grad_norm_ and AdamW:
    two steps on xpu (no CPU fallback) give the parameters the same steps give on the CPU."""
    def build():
        kiln.manual_seed(3)
        emb = kiln.nn.Embedding(50, 32)
        layer = kiln.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        head = kiln.nn.Sequential(kiln.nn.LayerNorm(32), kiln.nn.Linear(32, 50))
        return kiln.nn.ModuleList([emb, layer, head])

    def train(model, device):
        model = model.to(device)
        opt = kiln.optim.AdamW(model.parameters(), lr=1e-2)
        ids = kiln.tensor([[3, 7, 1, 49, 0, 12], [5, 5, 8, 2, 30, 11]]).to(device)
        losses = []
        for _ in range(2):
            h = model[2](model[1](model[0](ids)))
            loss = kiln.nn.functional.cross_entropy(h.reshape(-1, 50), ids.reshape(-1), ignore_index=5)
            opt.zero_grad()
            loss.backward()
            kiln.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            losses.append(loss.item())
        return model, losses

    cpu_model, cpu_losses = train(build(), "cpu")
    before = kiln._C._total_fallback_calls()
    xpu_model, xpu_losses = train(build(), XPU)
    assert kiln._C._total_fallback_calls() == before
    np.testing.assert_allclose(xpu_losses, cpu_losses, rtol=1e-5)
    for (name, a), (_, b) in zip(cpu_model.named_parameters(), xpu_model.named_parameters()):
        assert b.device.type == "xpu"
        a, b = a.detach().numpy(), b.detach().cpu().numpy()
        if name.endswith("in_proj_bias"):
            # The key bias has a zero gradient (softmax ignores a shift): Adam turns the two
            # devices' different rounding noise into full-size steps. Compare the rest.
            a, b = np.concatenate([a[:32], a[64:]]), np.concatenate([b[:32], b[64:]])
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_and_cross_entropy(reduction):
    x = torch.randn(9, 5, 3, dtype=torch.float64).log_softmax(1)
    t = torch.randint(0, 5, (9, 3))
    t[0, 0] = -100
    w = torch.rand(5, dtype=torch.float64) + 0.5
    kx = t2k(x).requires_grad_(True)
    tx = x.clone().requires_grad_(True)
    got = kiln.nn.functional.nll_loss(kx, t2k(t), weight=t2k(w), reduction=reduction)
    want = torch.nn.functional.nll_loss(tx, t, weight=w, reduction=reduction)
    close(got, want.detach(), 1e-12, 1e-12)
    got.sum().backward()
    want.sum().backward()
    close(kx.grad, tx.grad, 1e-12, 1e-12)
    with pytest.raises(IndexError):
        kiln.nn.functional.nll_loss(t2k(x[:, :, 0]), t2k(torch.tensor([5] * 9)))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), float("-inf"), 0.0])
def test_vector_norm(p):
    x = torch.randn(7, 300000 if p == 2.0 else 40)
    x[0, 3] = 0.0
    for dims in ([1], [0, 1]):
        # Against float64: torch's float32 2-norm of 2.1M values is 3e-5 off (1449.146 vs 1449.190).
        close(kiln.linalg.vector_norm(t2k(x), p, dims), torch.linalg.vector_norm(x.double(), p, dims).float(),
              1e-5, 1e-5)


def test_lerp_and_scatter_add():
    a, b, w = torch.randn(6, 5), torch.randn(6, 5), torch.rand(6, 5) * 1.5 - 0.25
    close(kiln.lerp(t2k(a), t2k(b), t2k(w)), torch.lerp(a, b, w))
    close(kiln.lerp(t2k(a), t2k(b), 0.3), torch.lerp(a, b, 0.3))
    idx = torch.randint(0, 4, (3, 5))
    src = torch.randn(3, 5)
    close(kiln.scatter_add(t2k(torch.zeros(4, 5)), 0, t2k(idx), t2k(src)),
          torch.zeros(4, 5).scatter_add(0, idx, src), 1e-6, 1e-6)


def test_flip_roll_repeat():
    x = torch.randn(3, 4, 5)
    close(kiln.flip(t2k(x), [0, 2]), torch.flip(x, [0, 2]), 0, 0)
    close(kiln.flip(t2k(x).transpose(0, 2), [1]), torch.flip(x.transpose(0, 2), [1]), 0, 0)
    close(kiln.roll(t2k(x), 2, -1), torch.roll(x, 2, -1), 0, 0)
    close(kiln.roll(t2k(x), (1, -3), (0, 1)), torch.roll(x, (1, -3), (0, 1)), 0, 0)
    close(t2k(x).repeat(2, 1, 3), x.repeat(2, 1, 3), 0, 0)
    close(t2k(x[0]).repeat(2, 2, 1), x[0].repeat(2, 2, 1), 0, 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_llama_decoder_on_the_device_matches_the_cpu(dtype, tmp_path):
    """kiln.llm on xpu: the same logits and greedy tokens as on the CPU, and a Q8_0 GGUF file
    loaded onto the device (dequantised at load) as the CPU computes it dequantised."""
    from test_llm_llama import hf_model, gguf_weights, gguf_metadata, to_kiln, random_ids, write_gguf
    from kiln.llm.llama import LlamaConfig, LlamaModel
    from kiln.llm.generate import generate
    from kiln.llm.loader import load as llm_load
    m = hf_model()
    weights = {n: to_kiln(t) for n, t in gguf_weights(m).items()}
    config = LlamaConfig.from_gguf_metadata(gguf_metadata(m))
    kd = getattr(kiln, dtype)
    cpu = LlamaModel(config, weights, dtype=kd)
    xpu = LlamaModel(config, weights, dtype=kd, device=XPU)
    ids = to_kiln(random_ids(9))
    before = kiln._C._total_fallback_calls()
    got = xpu(ids)
    assert got.device.type == "xpu" and kiln._C._total_fallback_calls() == before
    tol = 1e-4 if dtype == "float32" else 5e-2
    close(got, k2t(cpu(ids)), tol, tol)
    assert list(generate(xpu, [1, 2, 3], 8)) == list(generate(cpu, [1, 2, 3], 8))
    if dtype == "float32":
        path = tmp_path / "q8.gguf"
        write_gguf(path, m, quantise=True)
        model, _ = llm_load(str(path), device=XPU)
        reference, _ = llm_load(str(path), dequantize=True)  # the same dense weights on the CPU
        close(model(ids), k2t(reference(ids)), 1e-4, 1e-4)


@pytest.mark.parametrize("dims,groups,stride,padding,dilation", [
    (2, 1, 1, 1, 1), (2, 2, 2, 0, 1), (2, 4, 1, 2, 2), (1, 1, 2, 1, 1), (3, 1, 1, 1, 1)])
def test_convolution_forward(dims, groups, stride, padding, dilation):
    spatial = {1: (19,), 2: (11, 9), 3: (6, 7, 5)}[dims]
    x = torch.randn(2, 4, *spatial, dtype=torch.float64)
    w = torch.randn(8, 4 // groups, *([3] * dims), dtype=torch.float64)
    b = torch.randn(8, dtype=torch.float64)
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[dims]
    kconv = {1: kiln.nn.functional.conv1d, 2: kiln.nn.functional.conv2d, 3: kiln.nn.functional.conv3d}[dims]
    want = conv(x, w, b, stride, padding, dilation, groups)
    close(kconv(t2k(x), t2k(w), t2k(b), stride, padding, dilation, groups), want, 1e-12, 1e-12)
    close(kconv(t2k(x.float()), t2k(w.float()), None, stride, padding, dilation, groups),
          conv(x, w, None, stride, padding, dilation, groups).float(), 1e-4, 1e-4)
    if dims == 2:
        xl = t2k(x.float()).to(memory_format=kiln.channels_last)
        close(kconv(xl, t2k(w.float()), t2k(b.float()), stride, padding, dilation, groups), want.float(), 1e-4, 1e-4)
        close(kconv(t2k(x.bfloat16()), t2k(w.bfloat16()), t2k(b.bfloat16()), stride, padding, dilation, groups),
              conv(x.bfloat16().double(), w.bfloat16().double(), b.bfloat16().double(), stride, padding, dilation,
                   groups).bfloat16(), 3e-2, 3e-2)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_pooling_forward(dims):
    spatial = {1: (17,), 2: (9, 11), 3: (5, 6, 7)}[dims]
    x = torch.randn(2, 3, *spatial)
    x.view(-1)[5] = float("nan")
    F, KF = torch.nn.functional, kiln.nn.functional
    mp = {1: (F.max_pool1d, KF.max_pool1d), 2: (F.max_pool2d, KF.max_pool2d), 3: (F.max_pool3d, KF.max_pool3d)}[dims]
    ap = {1: (F.avg_pool1d, KF.avg_pool1d), 2: (F.avg_pool2d, KF.avg_pool2d), 3: (F.avg_pool3d, KF.avg_pool3d)}[dims]
    aa = {1: (F.adaptive_avg_pool1d, KF.adaptive_avg_pool1d), 2: (F.adaptive_avg_pool2d, KF.adaptive_avg_pool2d),
          3: (F.adaptive_avg_pool3d, KF.adaptive_avg_pool3d)}[dims]
    for kw in ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
               {"kernel_size": 2}, {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2}):
        want, wi = mp[0](x, return_indices=True, **kw)
        got, gi = mp[1](t2k(x), return_indices=True, **kw)
        close(got, want, 0, 0)
        close(gi, wi, 0, 0)
    for kw in ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
               {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 2, "divisor_override": 3}):
        if dims == 1 and "divisor_override" in kw:
            continue  # torch's avg_pool1d has no divisor_override
        close(ap[1](t2k(x), **kw), ap[0](x, **kw), 1e-6, 1e-6)
    close(aa[1](t2k(x), [3] * dims), aa[0](x, [3] * dims), 1e-6, 1e-6)
    close(aa[1](t2k(x), [1] * dims), aa[0](x, [1] * dims), 1e-6, 1e-6)


def test_cnn_inference_on_the_device_without_fallback():
    """Conv / BatchNorm (eval) / ReLU / pooling / Linear, a ResNet stem and head in miniature."""
    def body(nn):
        return nn.Sequential(nn.Conv2d(3, 8, 7, stride=2, padding=3), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.MaxPool2d(3, stride=2, padding=1), nn.Conv2d(8, 16, 3, padding=1, groups=2),
                             nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5))
    net = body(torch.nn)
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    net.eval()
    knet = body(kiln.nn)
    knet.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in net.state_dict().items()})
    knet = knet.to(XPU).eval()
    x = torch.randn(2, 3, 32, 32)
    before = kiln._C._total_fallback_calls()
    with kiln.no_grad():
        y = knet(t2k(x))
        yl = knet(t2k(x).to(memory_format=kiln.channels_last))
    assert kiln._C._total_fallback_calls() == before
    with torch.no_grad():
        close(y, net(x), 1e-4, 1e-5)
        close(yl, net(x), 1e-4, 1e-5)


@pytest.mark.parametrize("dims,groups,stride,padding,dilation", [
    (2, 1, 1, 1, 1), (2, 2, 2, 1, 1), (1, 1, 3, 0, 2), (3, 2, 1, 1, 1), (2, 4, 2, 0, 1)])
def test_convolution_backward_and_transposed(dims, groups, stride, padding, dilation):
    spatial = {1: (20,), 2: (10, 9), 3: (5, 6, 5)}[dims]
    F, KF = torch.nn.functional, kiln.nn.functional
    x = torch.randn(2, 4, *spatial, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 4 // groups, *([3] * dims), dtype=torch.float64, requires_grad=True)
    b = torch.randn(8, dtype=torch.float64, requires_grad=True)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    kconv = {1: KF.conv1d, 2: KF.conv2d, 3: KF.conv3d}[dims]
    y = conv(x, w, b, stride, padding, dilation, groups)
    g = torch.randn_like(y)
    y.backward(g)
    kx, kw, kb = (t2k(t.detach()).requires_grad_(True) for t in (x, w, b))
    before = kiln._C._total_fallback_calls()
    ky = kconv(kx, kw, kb, stride, padding, dilation, groups)
    ky.backward(t2k(g))
    assert kiln._C._total_fallback_calls() == before
    close(ky, y.detach(), 1e-12, 1e-12)
    close(kx.grad, x.grad, 1e-12, 1e-12)
    close(kw.grad, w.grad, 1e-12, 1e-12)
    close(kb.grad, b.grad, 1e-12, 1e-12)
    if dims == 2:
        tconv, ktconv = F.conv_transpose2d, KF.conv_transpose2d
        wt = torch.randn(4, 6 // groups if 6 % groups == 0 else 2, 3, 3, dtype=torch.float64, requires_grad=True)
        bt = torch.randn(wt.shape[1] * groups, dtype=torch.float64, requires_grad=True)
        xt = x.detach().requires_grad_(True)
        out_pad = 1 if stride > 1 else 0
        want = tconv(xt, wt, bt, stride, padding, out_pad, groups, dilation)
        gt = torch.randn_like(want)
        want.backward(gt)
        kxt, kwt, kbt = (t2k(t.detach()).requires_grad_(True) for t in (xt, wt, bt))
        before = kiln._C._total_fallback_calls()
        got = ktconv(kxt, kwt, kbt, stride, padding, out_pad, groups, dilation)
        got.backward(t2k(gt))
        assert kiln._C._total_fallback_calls() == before
        close(got, want.detach(), 1e-12, 1e-12)
        close(kxt.grad, xt.grad, 1e-12, 1e-12)
        close(kwt.grad, wt.grad, 1e-12, 1e-12)  # the transposed convolution's weight gradient
        close(kbt.grad, bt.grad, 1e-12, 1e-12)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_pooling_backward(dims):
    spatial = {1: (17,), 2: (9, 11), 3: (5, 6, 7)}[dims]
    F, KF = torch.nn.functional, kiln.nn.functional
    ap = {1: (F.avg_pool1d, KF.avg_pool1d), 2: (F.avg_pool2d, KF.avg_pool2d), 3: (F.avg_pool3d, KF.avg_pool3d)}[dims]
    aa = {1: (F.adaptive_avg_pool1d, KF.adaptive_avg_pool1d), 2: (F.adaptive_avg_pool2d, KF.adaptive_avg_pool2d),
          3: (F.adaptive_avg_pool3d, KF.adaptive_avg_pool3d)}[dims]
    mp = {1: (F.max_pool1d, KF.max_pool1d), 2: (F.max_pool2d, KF.max_pool2d), 3: (F.max_pool3d, KF.max_pool3d)}[dims]
    cases = [(ap, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
             (ap, {"kernel_size": 3, "stride": 2, "padding": 1}), (ap, {"kernel_size": 2, "stride": 1}),
             (aa, {"output_size": [3] * dims}), (aa, {"output_size": [4] * dims}),
             (mp, {"kernel_size": 3, "stride": 2, "padding": 1})]
    if dims > 1:
        cases.append((ap, {"kernel_size": 2, "divisor_override": 3}))
    for (fn, kfn), kw in cases:
        x = torch.randn(2, 3, *spatial, dtype=torch.float64, requires_grad=True)
        y = fn(x, **kw)
        g = torch.randn_like(y)
        y.backward(g)
        kx = t2k(x.detach()).requires_grad_(True)
        before = kiln._C._total_fallback_calls()
        kfn(kx, **kw).backward(t2k(g))
        assert kiln._C._total_fallback_calls() == before
        close(kx.grad, x.grad, 1e-12, 1e-12)


def test_var_std_and_cnn_training_step():
    x = torch.randn(6, 7, 33, dtype=torch.float64)
    for dims, corr in (([2], 1), ([0, 2], 0), ([1], 2)):
        close(kiln.var(t2k(x), dims, correction=corr), torch.var(x, dims, correction=corr), 1e-12, 1e-12)
        close(kiln.std(t2k(x), dims, correction=corr, keepdim=True), torch.std(x, dims, correction=corr, keepdim=True),
              1e-12, 1e-12)

    def body(nn):
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                             nn.Linear(32, 4))
    net = body(torch.nn).double()
    knet = body(kiln.nn).to(kiln.float64)
    knet.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in net.state_dict().items()})
    knet = knet.to(XPU)
    x, t = torch.randn(4, 3, 12, 12, dtype=torch.float64), torch.randint(0, 4, (4,))
    loss = torch.nn.functional.cross_entropy(net(x), t)
    loss.backward()
    before = kiln._C._total_fallback_calls()
    kloss = kiln.nn.functional.cross_entropy(knet(t2k(x)), t2k(t))
    kloss.backward()
    assert kiln._C._total_fallback_calls() == before
    close(kloss, loss.detach(), 1e-12, 1e-12)
    for (name, p), (_, kp) in zip(net.named_parameters(), knet.named_parameters()):
        close(kp.grad, p.grad, 1e-10, 1e-12)
    close(knet[1].running_var, net[1].running_var, 1e-12, 1e-12)


def _pointwise_chain(x, y):
    z = (x * 0.5 + 1.0).relu() * y
    w = kiln.erf(x / 1.4142135) + 1
    return z.sum(-1), x * 0.5 * w, (x - 3).clamp(-1, 2).abs().sqrt(), kiln.maximum(x, y) - kiln.minimum(y, x)


def test_compiled_pointwise_chains_fuse_into_one_kernel_on_the_device():
    """Graph mode on xpu: fuse_pointwise's groups become pointwise_program nodes, which run as
    one generated kernel each, equal bit for bit to the eager xpu ops (and close to torch)."""
    cf = kiln.compile(_pointwise_chain)
    tx, ty = torch.randn(5, 37) * 3, torch.randn(5, 37)
    tx[0, :3] = float("nan")
    x, y = t2k(tx), t2k(ty)
    before = kiln._C._total_fallback_calls()
    with kiln.no_grad():
        for _ in range(2):
            got = cf(x, y)
            want = _pointwise_chain(x, y)
            for g, w in zip(got, want):
                assert g.device.type == "xpu"
                np.testing.assert_array_equal(k2t(g).numpy(), k2t(w).numpy())
    assert kiln._C._total_fallback_calls() == before
    assert cf.captures == 1 and cf.replays == 1
    assert cf.graphs()[0].count("pointwise_program") >= 2
    tw = torch.erf(tx / 1.4142135) + 1
    close(got[1], tx * 0.5 * tw, 1e-5, 1e-6)
    close(got[2], (tx - 3).clamp(-1, 2).abs().sqrt(), 1e-6, 1e-6)
    close(got[3], torch.maximum(tx, ty) - torch.minimum(ty, tx), 0, 0)


def test_hardswish_runs_as_one_program_on_the_device():
    x = torch.randn(4, 8, 5, 5) * 4
    for fn, kfn in ((torch.nn.functional.hardswish, kiln.nn.functional.hardswish),
                    (torch.nn.functional.hardsigmoid, kiln.nn.functional.hardsigmoid)):
        with kiln.no_grad():
            got = kfn(t2k(x))
            cl = kfn(t2k(x).to(memory_format=kiln.channels_last))
        close(got, fn(x), 1e-6, 1e-7)
        close(cl, fn(x), 1e-6, 1e-7)
        # The same program as ops (autograd records them): the same bits.
        kx = t2k(x).requires_grad_(True)
        np.testing.assert_array_equal(k2t(kfn(kx).detach()).numpy(), k2t(got).numpy())


def test_sign_nan_to_num_and_gelu_backward_kernels():
    x = torch.tensor([float("nan"), -0.0, 0.0, -2.5, 3.0, float("inf"), -float("inf"), 1e-30])
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        close(kiln.sign(t2k(x.to(dt))), torch.sign(x.to(dt)), 0, 0)
        close(kiln.nan_to_num(t2k(x.to(dt))), torch.nan_to_num(x.to(dt)), 0, 0)
        close(kiln.nan_to_num(t2k(x.to(dt)), nan=1.5, posinf=7.0, neginf=-7.0),
              torch.nan_to_num(x.to(dt), nan=1.5, posinf=7.0, neginf=-7.0), 0, 0)
    for dt in (torch.int8, torch.uint8, torch.int64, torch.bool):
        v = torch.tensor([-3, 0, 5, 1]).to(dt) if dt != torch.uint8 else torch.tensor([0, 3, 200, 1], dtype=dt)
        close(kiln.sign(t2k(v)), torch.sign(v), 0, 0)
    # gelu's backward as one kernel on the device (float32) against torch float64.
    for approximate in ("none", "tanh"):
        xs = torch.randn(3, 257, dtype=torch.float64) * 3
        xs.requires_grad_(True)
        g = torch.randn(3, 257, dtype=torch.float64)
        torch.nn.functional.gelu(xs, approximate=approximate).backward(g)
        kx = t2k(xs.detach().float()).requires_grad_(True)
        before = kiln._C._total_fallback_calls()
        kiln.nn.functional.gelu(kx, approximate=approximate).backward(t2k(g.float()))
        assert kiln._C._total_fallback_calls() == before
        close(kx.grad, xs.grad, 1e-5, 1e-6)


def test_gather_on_the_device():
    x = torch.randn(4, 5, 6)
    cases = [(0, torch.randint(0, 4, (3, 5, 6))), (1, torch.randint(0, 5, (4, 2, 3))),
             (-1, torch.randint(0, 6, (2, 5, 7))), (2, torch.randint(0, 6, (4, 5, 0)))]
    for dim, idx in cases:
        close(kiln.gather(t2k(x), dim, t2k(idx)), torch.gather(x, dim, idx), 0, 0)
        # A transposed (non-contiguous) source, and other dtypes.
        xt = x.transpose(0, 2).contiguous().transpose(0, 2)
        close(kiln.gather(t2k(x).transpose(0, 2).contiguous().transpose(0, 2), dim, t2k(idx)),
              torch.gather(xt, dim, idx), 0, 0)
        for dt in (torch.bfloat16, torch.int32, torch.bool):
            close(kiln.gather(t2k(x.to(dt)), dim, t2k(idx)), torch.gather(x.to(dt), dim, idx), 0, 0)
    s = torch.tensor(3.5)
    close(kiln.gather(t2k(s), 0, t2k(torch.tensor(0))), torch.gather(s, 0, torch.tensor(0)), 0, 0)
    before = kiln._C._total_fallback_calls()
    kx = t2k(x).requires_grad_(True)
    kiln.gather(kx, 1, t2k(cases[1][1])).sum().backward()
    tx = x.clone().requires_grad_(True)
    torch.gather(tx, 1, cases[1][1]).sum().backward()
    close(kx.grad, tx.grad, 0, 0)
    assert kiln._C._total_fallback_calls() == before
    with pytest.raises(RuntimeError, match="out of bounds"):
        kiln.gather(t2k(x), 1, t2k(torch.tensor([[[5]]])))
