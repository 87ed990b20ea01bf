"""Data movement and simple arithmetic on randomly laid-out tensors against PyTorch 2.13.

The oracle suites use fixed shapes and a few layouts. Here hypothesis draws the shape (up to
4 dims, some long enough for the threaded and row-copy paths: rows of 1-8 KB, where the copy
kernels switch strategies), the dtype, a chain of views (permute, stepped slice with an
offset, narrow, transpose, expand) applied to both libraries' copies of the same values, and
one op, then compares values exactly (data movement, integer results) or within the dtype's
rounding (float arithmetic). Copies into a strided destination view are drawn the same way.
Derandomized, so CI runs the same examples every time; a failure prints the drawn example.
A longer random hunt (KILN_LAYOUT_EXAMPLES=3000 KILN_LAYOUT_RANDOM=1) found the reduction
over expanded kept dims that wrote past its result (Reduction.ExpandedKeptDims).
"""
import os

import numpy as np
import pytest
import torch

import kiln

from hypothesis import HealthCheck, given, settings  # installed by scripts/test.sh
from hypothesis import strategies as st

DTYPES = {"float32": (torch.float32, kiln.float32), "bfloat16": (torch.bfloat16, kiln.bfloat16),
          "int64": (torch.int64, kiln.int64), "uint8": (torch.uint8, kiln.uint8)}
# KILN_LAYOUT_EXAMPLES=5000 (and a random seed: KILN_LAYOUT_RANDOM=1) for a longer hunt.
SETTINGS = settings(max_examples=int(os.environ.get("KILN_LAYOUT_EXAMPLES", "120")),
                    derandomize=os.environ.get("KILN_LAYOUT_RANDOM") != "1",
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def to_kiln(t):
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    return kiln.from_numpy(t.numpy().copy())


def to_numpy(k):
    if k.dtype == kiln.bfloat16:
        k = k.float()
    return k.contiguous().numpy()


@st.composite
def shapes(draw):
    nd = draw(st.integers(1, 4))
    dims = [draw(st.integers(1, 7)) for _ in range(nd)]
    if draw(st.booleans()):  # one long dim: rows of kilobytes, threaded sizes
        dims[draw(st.integers(0, nd - 1))] = draw(st.sampled_from([257, 600, 1031, 2050]))
    return dims


def base_tensor(shape, dtype_name, seed):
    g = torch.Generator().manual_seed(seed)
    tdt, _ = DTYPES[dtype_name]
    if tdt.is_floating_point:
        t = (torch.randn(*shape, generator=g) * 4).to(tdt)
    else:
        t = torch.randint(0, 200, tuple(shape), generator=g).to(tdt)
    return t, to_kiln(t)


@st.composite
def view_chain(draw, nd):
    """A list of (kind, args) views valid for any tensor of nd dims (sizes checked at apply)."""
    chain = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["permute", "slice", "narrow", "transpose", "expand"]))
        if kind == "permute":
            chain.append((kind, draw(st.permutations(range(nd)))))
        elif kind == "transpose":
            chain.append((kind, (draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1)))))
        elif kind == "slice":
            chain.append((kind, (draw(st.integers(0, nd - 1)), draw(st.integers(0, 3)),
                                 draw(st.integers(1, 3)))))
        elif kind == "narrow":
            chain.append((kind, (draw(st.integers(0, nd - 1)), draw(st.integers(0, 2)))))
        else:
            chain.append((kind, (draw(st.integers(0, nd - 1)), draw(st.integers(2, 3)))))
    return chain


def apply_views(x, chain):
    for kind, a in chain:
        if kind == "permute":
            x = x.permute(*a)
        elif kind == "transpose":
            x = x.transpose(*a)
        elif kind == "slice":
            d, start, step = a
            if x.shape[d] > start:
                idx = [slice(None)] * x.dim()
                idx[d] = slice(start, None, step)
                x = x[tuple(idx)]
        elif kind == "narrow":
            d, cut = a
            if x.shape[d] > 2 * cut:
                x = x.narrow(d, cut, x.shape[d] - 2 * cut)
        else:  # expand a size-1 dim (made by taking one element along d)
            d, n = a
            x = x.narrow(d, 0, 1)
            sizes = list(x.shape)
            sizes[d] = n
            x = x.expand(*sizes)
    return x


def assert_same(k, t, exact):
    assert tuple(k.shape) == tuple(t.shape)
    kv = to_numpy(k)
    tv = (t.float() if t.dtype == torch.bfloat16 else t).contiguous().numpy()
    if exact:
        np.testing.assert_array_equal(kv, tv)
    else:  # one bfloat16 / a few float32 roundings of the result's scale
        rtol = 1e-2 if t.dtype == torch.bfloat16 else 1e-5
        scale = max(1.0, float(np.abs(tv).max()) if tv.size else 1.0)
        np.testing.assert_allclose(kv, tv, rtol=rtol, atol=rtol * scale)


MOVES = ["contiguous", "clone", "roll", "flip", "cat", "index_select", "to_float32",
         "to_int64", "channels_last", "reshape_flat", "pad", "repeat", "tril", "gather",
         "masked_fill"]
ARITH = ["add_self_view", "mul_scalar", "sum_dim", "amax_dim", "cumsum_dim", "where",
         "argmax_dim", "max_dim", "prod_dim", "mean_dim", "softmax_dim", "add_broadcast"]
FLOAT_ONLY = {"mean_dim", "softmax_dim"}


def run_op(L, x, op, d, shift):
    if op == "contiguous":
        return x.contiguous()
    if op == "clone":
        return x.clone()
    if op == "roll":
        return x.roll(shift, d)
    if op == "flip":
        return x.flip(d)
    if op == "cat":
        return L.cat([x, x.flip(d)], d)
    if op == "index_select":
        n = x.shape[d]
        idx = [(i * 7 + shift) % n for i in range(n + 2)]
        return x.index_select(d, L.tensor(idx))
    if op == "to_float32":
        return x.to(L.float32)
    if op == "to_int64":
        return x.to(L.int64)
    if op == "channels_last":
        return x.contiguous(memory_format=L.channels_last) if x.dim() == 4 else x.contiguous()
    if op == "reshape_flat":
        return x.reshape(-1)
    if op == "pad":
        return L.nn.functional.pad(x, (1, 2) if d % 2 else (0, 0, 2, 1) if x.dim() > 1 else (3, 0))
    if op == "repeat":
        reps = [1] * x.dim()
        reps[d] = 2
        return x.repeat(*reps)
    if op == "tril":
        return x.tril(shift) if x.dim() >= 2 else x.clone()
    if op == "gather":
        n = x.shape[d]
        idx = L.tensor([(i * 5 + shift) % n for i in range(x.numel())]).reshape(*x.shape)
        return x.gather(d, idx)
    if op == "masked_fill":
        return x.masked_fill(x > x.flip(d), 7)
    if op == "add_self_view":
        return x + x.flip(d)
    if op == "mul_scalar":
        return x * 3
    if op == "sum_dim":
        return x.sum(d)
    if op == "amax_dim":
        return x.amax(d)
    if op == "cumsum_dim":
        return x.cumsum(d)
    if op == "where":
        return L.where(x > x.flip(d), x, x.flip(d))
    if op == "argmax_dim":
        return x.argmax(d)
    if op == "max_dim":  # values and first indices of the maximum, as one tensor
        v, i = x.max(d)
        return L.stack([v.to(L.float32), i.to(L.float32)])
    if op == "prod_dim":
        return (x.remainder(3) - 1).prod(d) if x.is_floating_point() else (x % 3).prod(d)
    if op == "mean_dim":
        return x.mean(d)
    if op == "softmax_dim":
        return x.softmax(d)
    if op == "add_broadcast":  # a column of x (size 1 along d) broadcast against x
        return x + x.narrow(d, x.shape[d] - 1, 1)
    raise AssertionError(op)


@SETTINGS
@given(shape=shapes(), dtype=st.sampled_from(sorted(DTYPES)), data=st.data(),
       op=st.sampled_from(MOVES + ARITH), seed=st.integers(0, 2**16))
def test_op_on_random_views_matches_torch(shape, dtype, data, op, seed):
    t, k = base_tensor(shape, dtype, seed)
    chain = data.draw(view_chain(len(shape)))
    tv, kv = apply_views(t, chain), apply_views(k, chain)
    assert tuple(kv.stride()) == tuple(tv.stride()) and kv.storage_offset() == tv.storage_offset()
    if tv.numel() == 0:
        return
    d = data.draw(st.integers(0, tv.dim() - 1))
    shift = data.draw(st.integers(-5, 5))
    if op == "cumsum_dim" and dtype == "bfloat16":
        # torch accumulates bfloat16 in float32, kiln in float64: compare against float64
        want = tv.double().cumsum(d).to(torch.bfloat16)
        assert_same(run_op(kiln, kv, op, d, shift), want, exact=False)
        return
    if op in FLOAT_ONLY and dtype in ("int64", "uint8"):
        return
    exact = op in MOVES or op in ("amax_dim", "where", "argmax_dim", "max_dim")
    exact = exact or dtype in ("int64", "uint8")
    if op == "sum_dim" and dtype == "uint8":
        exact = True  # both promote to int64
    assert_same(run_op(kiln, kv, op, d, shift), run_op(torch, tv, op, d, shift), exact)


@SETTINGS
@given(shape=shapes(), dtype=st.sampled_from(sorted(DTYPES)),
       src_dtype=st.sampled_from(sorted(DTYPES)), data=st.data(), seed=st.integers(0, 2**16))
def test_copy_into_random_destination_view_matches_torch(shape, dtype, src_dtype, data, seed):
    """copy_ from a randomly viewed source into a randomly viewed destination of the same
    shape (a larger buffer's slice, permuted or stepped): the bytes outside the view stay."""
    dst_t, dst_k = base_tensor(shape, dtype, seed)
    chain = data.draw(view_chain(len(shape)))
    chain = [c for c in chain if c[0] != "expand"]  # an expanded destination overlaps itself
    dv_t, dv_k = apply_views(dst_t, chain), apply_views(dst_k, chain)
    if dv_t.numel() == 0:
        return
    src_shape = list(dv_t.shape)
    perm = data.draw(st.permutations(range(len(src_shape))))
    s_t, s_k = base_tensor([src_shape[p] for p in perm], src_dtype, seed + 1)
    inv = [perm.index(i) for i in range(len(perm))]
    s_t, s_k = s_t.permute(*inv), s_k.permute(*inv)  # same shape as the view, other layout
    if DTYPES[dtype][0].is_floating_point is False and DTYPES[src_dtype][0].is_floating_point:
        s_t, s_k = s_t.abs() % 100, s_k.abs() % 100  # defined float -> int conversions
    dv_t.copy_(s_t)
    dv_k.copy_(s_k)
    assert_same(dst_k, dst_t, exact=True)


UNARY = ["relu", "exp", "tanh", "sigmoid", "gelu", "silu", "abs", "neg", "sqrt_abs", "clamp",
         "round", "floor"]
FAMILIES = UNARY + ["binary_views", "compare", "layer_norm", "sort", "topk", "matmul",
                    "max_pool", "avg_pool", "conv2d", "scatter_add", "masked_select", "nonzero"]


def run_family(L, x, y, op, d):
    F = L.nn.functional
    if op in UNARY:
        return {"relu": lambda: x.relu(), "exp": lambda: (x / 4).exp(), "tanh": lambda: x.tanh(),
                "sigmoid": lambda: x.sigmoid(), "gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x),
                "abs": lambda: x.abs(), "neg": lambda: -x, "sqrt_abs": lambda: x.abs().sqrt(),
                "clamp": lambda: x.clamp(-1, 2), "round": lambda: x.round(),
                "floor": lambda: x.floor()}[op]()
    if op == "binary_views":  # two differently laid out operands of one shape
        return L.stack([x + y, x - y, x * y, L.maximum(x, y)])
    if op == "compare":
        return L.stack([(x > y), (x <= y), (x == x)]).to(L.float32)
    if op == "layer_norm":
        return F.layer_norm(x, (x.shape[-1],))
    if op == "sort":
        v, i = x.sort(dim=d, stable=True)
        return L.stack([v, i.to(x.dtype)]) if x.dtype == L.float32 else v
    if op == "topk":
        return x.topk(min(3, x.shape[d]), d)[0]
    if op == "matmul":  # x's last two dims against y's, transposed
        return L.matmul(x, y.transpose(-1, -2)) if x.dim() >= 2 else (x * y).sum()
    if op == "max_pool":
        return F.max_pool2d(x, 2, 1) if x.dim() == 4 and min(x.shape[2:]) >= 2 else x.clone()
    if op == "avg_pool":
        return F.avg_pool2d(x, 2, 2, 1) if x.dim() == 4 and min(x.shape[2:]) >= 2 else x.clone()
    if op == "conv2d":
        if x.dim() != 4:
            return x.clone()
        w = L.arange(x.shape[1] * 3 * 3 * 2).reshape(2, x.shape[1], 3, 3).to(x.dtype) / 50 - 0.3
        return F.conv2d(x, w, None, 1, 1)
    if op == "scatter_add":
        idx = (L.arange(x.numel()).reshape(*x.shape) * 7) % x.shape[d]
        return L.zeros(*x.shape, dtype=x.dtype).scatter_add(d, idx, x)
    if op == "masked_select":
        return x.masked_select(x > y)
    if op == "nonzero":
        return (x > y).nonzero().to(L.float32)
    raise AssertionError(op)


@SETTINGS
@given(shape=shapes(), dtype=st.sampled_from(["float32", "bfloat16"]), data=st.data(),
       op=st.sampled_from(FAMILIES), seed=st.integers(0, 2**16))
def test_float_op_families_on_random_views_match_torch(shape, dtype, data, op, seed):
    """Unary and binary float ops, norms, sorting, products, pooling and convolution on two
    independently viewed operands (same shape, different layouts) against torch."""
    if op in ("matmul", "conv2d", "layer_norm") and max(shape) > 600:
        shape = [min(s, 64) for s in shape]  # keep products and norms small
    t, k = base_tensor(shape, dtype, seed)
    chain = data.draw(view_chain(len(shape)))
    tx, kx = apply_views(t, chain), apply_views(k, chain)
    if tx.numel() == 0:
        return
    # y: other values, laid out as a permuted contiguous tensor viewed back to x's shape
    perm = data.draw(st.permutations(range(tx.dim())))
    u, ku = base_tensor([tx.shape[p] for p in perm], dtype, seed + 7)
    inv = [perm.index(i) for i in range(len(perm))]
    ty, ky = u.permute(*inv), ku.permute(*inv)
    d = data.draw(st.integers(0, tx.dim() - 1))
    want = run_family(torch, tx, ty, op, d)
    got = run_family(kiln, kx, ky, op, d)
    if op == "matmul" and dtype == "bfloat16":
        want = run_family(torch, tx.double(), ty.double(), op, d).to(torch.bfloat16)
    exact = op in ("relu", "abs", "neg", "clamp", "round", "floor", "compare", "sort", "topk",
                   "max_pool", "masked_select", "nonzero")
    if op == "sort" and dtype == "bfloat16":
        exact = True
    if op in ("matmul", "conv2d", "scatter_add", "layer_norm", "avg_pool") and not exact:
        # sums in another order (and bfloat16 results of float32 sums): loosen by the depth
        depth = tx.shape[-1] if op in ("matmul", "layer_norm") else 9 * (tx.shape[1] if tx.dim() == 4 else 1)
        if op == "scatter_add":
            depth = tx.shape[d]
        rtol = (2e-2 if dtype == "bfloat16" else 2e-5) * max(1.0, depth ** 0.5)
        kv, tv = to_numpy(got), (want.float() if want.dtype == torch.bfloat16 else want).numpy()
        assert kv.shape == tv.shape
        scale = max(1.0, float(np.abs(tv).max()) if tv.size else 1.0)
        np.testing.assert_allclose(kv, tv, rtol=rtol, atol=rtol * scale)
        return
    assert_same(got, want, exact)


INPLACE = ["add_", "sub_", "mul_scalar_", "div_", "relu_", "clamp_", "fill_", "zero_",
           "masked_fill_", "neg_", "abs_", "tanh_", "exp_", "addcmul_", "add_broadcast_"]


def run_inplace(L, x, y, op):
    """Applies op to the view x in place (y: another operand of x's shape)."""
    {"add_": lambda: x.add_(y), "sub_": lambda: x.sub_(y), "mul_scalar_": lambda: x.mul_(3),
     "div_": lambda: x.div_(y.abs() + 1), "relu_": lambda: x.relu_(),
     "clamp_": lambda: x.clamp_(-1, 2), "fill_": lambda: x.fill_(5), "zero_": lambda: x.zero_(),
     "masked_fill_": lambda: x.masked_fill_(y > 0, -2), "neg_": lambda: x.neg_(),
     "abs_": lambda: x.abs_(), "tanh_": lambda: x.tanh_(), "exp_": lambda: x.div_(8).exp_(),
     "addcmul_": lambda: x.addcmul_(y, y, value=0.5),
     "add_broadcast_": lambda: x.add_(y.narrow(-1, 0, 1))}[op]()


@SETTINGS
@given(shape=shapes(), dtype=st.sampled_from(["float32", "bfloat16"]), data=st.data(),
       op=st.sampled_from(INPLACE), seed=st.integers(0, 2**16))
def test_inplace_ops_on_random_destination_views_match_torch(shape, dtype, data, op, seed):
    """In-place ops on a random view of a larger tensor (stepped, permuted, narrowed): the view
    gets torch's values and every element outside it keeps its own."""
    buf_t, buf_k = base_tensor(shape, dtype, seed)
    chain = [c for c in data.draw(view_chain(len(shape))) if c[0] != "expand"]
    tx, kx = apply_views(buf_t, chain), apply_views(buf_k, chain)
    if tx.numel() == 0:
        return
    perm = data.draw(st.permutations(range(tx.dim())))
    u, ku = base_tensor([tx.shape[p] for p in perm], dtype, seed + 3)
    inv = [perm.index(i) for i in range(len(perm))]
    run_inplace(torch, tx, u.permute(*inv), op)
    run_inplace(kiln, kx, ku.permute(*inv), op)
    exact = op in ("relu_", "clamp_", "fill_", "zero_", "masked_fill_", "neg_", "abs_",
                   "mul_scalar_", "add_", "sub_", "add_broadcast_")
    assert_same(buf_k, buf_t, exact)


GRAD_OPS = ["mul_other", "exp", "tanh", "relu", "softmax", "log_softmax", "layer_norm",
            "matmul", "index_select", "gather", "cat", "roll", "flip", "mean", "cumsum", "pad",
            "repeat", "amax", "expand_sum", "reshape", "sigmoid", "gelu", "div_other", "pow"]


def run_grad_op(L, x, y, op, d):
    F = L.nn.functional
    n = x.shape[d]
    if op == "mul_other":
        return x * y
    if op == "div_other":
        return x / (y.abs() + 1)
    if op == "pow":
        return (x.abs() + 0.5).pow(1.5)
    if op in ("exp", "tanh", "relu", "sigmoid"):
        return getattr(x / 4, op)()
    if op == "gelu":
        return F.gelu(x)
    if op == "softmax":
        return x.softmax(d) * y
    if op == "log_softmax":
        return x.log_softmax(d) * y
    if op == "layer_norm":  # a ramp keeps expanded rows from being constant (0 variance)
        ramp = L.arange(x.shape[-1]).to(x.dtype) * 0.25
        return F.layer_norm(x + ramp, (x.shape[-1],)) * y
    if op == "matmul":
        return L.matmul(x, y.transpose(-1, -2)) if x.dim() >= 2 else x * y
    if op == "index_select":
        return x.index_select(d, L.tensor([(i * 3 + 1) % n for i in range(n + 1)]))
    if op == "gather":
        idx = (L.arange(x.numel()).reshape(*x.shape) * 5) % n
        return x.gather(d, idx) * y
    if op == "cat":
        return L.cat([x, x * 2], d)
    if op == "roll":
        return x.roll(2, d) * y
    if op == "flip":
        return x.flip(d) * y
    if op == "mean":
        return x.mean(d)
    if op == "cumsum":
        return x.cumsum(d) * y
    if op == "pad":
        return F.pad(x, (2, 1))
    if op == "repeat":
        reps = [1] * x.dim()
        reps[d] = 3
        return x.repeat(*reps)
    if op == "amax":  # distinct values (x + a ramp), so no ties share the gradient
        return (x + L.arange(x.numel()).reshape(*x.shape) * 1e-3).amax(d)
    if op == "expand_sum":
        return x.narrow(d, 0, 1).expand(*x.shape) * y
    if op == "reshape":
        return x.reshape(-1) * y.reshape(-1)
    raise AssertionError(op)


@SETTINGS
@given(shape=shapes(), data=st.data(), op=st.sampled_from(GRAD_OPS),
       seed=st.integers(0, 2**16))
def test_gradients_through_random_views_match_torch(shape, data, op, seed):
    """float32 gradients of sum(w * op(view(x))) with respect to x (the view's backward too),
    against torch's."""
    if op in ("matmul", "layer_norm") and max(shape) > 600:
        shape = [min(s, 64) for s in shape]
    t0, k0 = base_tensor(shape, "float32", seed)
    t = t0.clone().requires_grad_()
    k = k0.clone().requires_grad_()
    chain = data.draw(view_chain(len(shape)))
    tx, kx = apply_views(t, chain), apply_views(k, chain)
    if tx.numel() == 0:
        return
    perm = data.draw(st.permutations(range(tx.dim())))
    u, ku = base_tensor([tx.shape[p] for p in perm], "float32", seed + 5)
    inv = [perm.index(i) for i in range(len(perm))]
    ty, ky = u.permute(*inv), ku.permute(*inv)
    d = data.draw(st.integers(0, tx.dim() - 1))
    if op == "layer_norm" and tx.shape[-1] < 3:
        return  # one or two normalized values do not depend on x: the gradient is rounding noise
    tout, kout = run_grad_op(torch, tx, ty, op, d), run_grad_op(kiln, kx, ky, op, d)
    wt = torch.linspace(-1, 1, tout.numel()).reshape(tout.shape)
    wk = kiln.from_numpy(wt.numpy().copy())
    (tout * wt).sum().backward()
    (kout * wk).sum().backward()
    depth = max(tx.shape) if op in ("matmul", "layer_norm", "softmax", "log_softmax",
                                    "cumsum", "mean") else 1
    rtol = 2e-5 * max(1.0, depth ** 0.5)
    kg, tg = k.grad.numpy(), t.grad.numpy()
    scale = max(1.0, float(np.abs(tg).max()))
    np.testing.assert_allclose(kg, tg, rtol=rtol, atol=rtol * scale)


PROMO_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64"]
PROMO_OPS = ["add", "sub", "mul", "div", "maximum", "eq", "lt", "where", "add_scalar_int",
             "mul_scalar_float", "floor_divide", "remainder", "pow_int"]


def promo_tensor(shape, name, seed):
    g = torch.Generator().manual_seed(seed)
    v = torch.randint(-20, 21, tuple(shape), generator=g)
    if name == "bool":
        t = v > 0
    elif name == "uint8":
        t = v.abs().to(torch.uint8)
    else:
        t = v.to(getattr(torch, name))
    if t.is_floating_point():
        t = t / 4  # exact quarters in every float dtype
    k = kiln.from_numpy(t.float().numpy().copy()).to(getattr(kiln, name)) if name in (
        "bfloat16", "float16") else kiln.from_numpy(t.numpy().copy())
    return t, k


def run_promo(L, a, b, op):
    if op == "sub" and (a.dtype == L.bool or b.dtype == L.bool):
        return a.to(L.int64) - b.to(L.int64)  # bool - bool is an error in both
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "div": lambda: a / b, "maximum": lambda: L.maximum(a, b), "eq": lambda: a == b,
            "lt": lambda: a < b, "where": lambda: L.where(a > 0, a, b),
            "add_scalar_int": lambda: a + 3, "mul_scalar_float": lambda: a * 1.5,
            "floor_divide": lambda: L.floor_divide(a, b),
            "remainder": lambda: L.remainder(a, b), "pow_int": lambda: a.abs() ** 2}[op]()


@SETTINGS
@given(da=st.sampled_from(PROMO_DTYPES), db=st.sampled_from(PROMO_DTYPES),
       op=st.sampled_from(PROMO_OPS), shape=st.sampled_from([[5], [3, 4], [2, 1, 3], [700]]),
       broadcast=st.booleans(), seed=st.integers(0, 2**16))
def test_type_promotion_of_mixed_dtype_ops_matches_torch(da, db, op, shape, broadcast, seed):
    """Result dtype and values of binary ops between any two dtypes (and Python scalars),
    broadcasting included, as torch: the dtype exactly; values exactly where both are exact
    (integer and small quarter-valued float results), else within the result dtype's rounding."""
    ta, ka = promo_tensor(shape, da, seed)
    tb, kb = promo_tensor(shape[-1:] if broadcast else shape, db, seed + 1)
    if op in ("div", "floor_divide", "remainder"):
        int_div = not (ta.is_floating_point() or tb.is_floating_point())
        if int_div and op != "div":
            tb = torch.where(tb == 0, torch.ones_like(tb), tb)  # integer division by zero
            kb = kiln.from_numpy(tb.numpy().copy()) if db not in ("bfloat16", "float16") else kb
        if db == "bool" and int_div:
            return
    try:
        want = run_promo(torch, ta, tb, op)
    except RuntimeError:
        with pytest.raises((TypeError, RuntimeError, ValueError)):
            run_promo(kiln, ka, kb, op)
        return
    got = run_promo(kiln, ka, kb, op)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    kv = got.float().numpy() if got.dtype in (kiln.bfloat16, kiln.float16) else got.numpy()
    tv = want.float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else want.numpy()
    if want.is_floating_point():
        np.testing.assert_allclose(kv, tv, rtol=1e-2 if want.dtype in (torch.bfloat16,
                                   torch.float16) else 1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(kv, tv)
