"""kiln.nn.functional convolution and pooling against torch.nn.functional: randomized shapes
and options (stride, padding incl. "same"/"valid", dilation, groups, output_padding,
ceil_mode, count_include_pad, divisor_override, unbatched and non-contiguous inputs), forward
and backward in float32/float64 and forward in bfloat16 (loose tolerance); the modules
against their torch.nn twins on identical weights; error cases (same exception type)."""
import dataclasses

import numpy as np
import pytest
import torch

import kiln
import module_oracle
import oracle

DT = ["float32", "float64", "bfloat16"]
N_RANDOM = 10  # random configurations per function


def _F(L):
    return torch.nn.functional if L is torch else kiln.nn.functional


def _maybe_int(rng, t):
    """A per-dim tuple, or its single int when every entry is equal (half of the time)."""
    t = tuple(int(v) for v in t)
    if len(set(t)) == 1 and rng.random() < 0.5:
        return t[0]
    return t


def _x_spec(rng, shape):
    # Sometimes a non-contiguous input (a transposed tensor) when the last two dims exist.
    if len(shape) >= 2 and rng.random() < 0.3:
        return ("t", tuple(shape))
    return tuple(shape)


def conv_ops(nd, n):
    rng = np.random.default_rng(100 + nd)
    ops = []
    fname = f"conv{nd}d"
    for i in range(n):
        groups = int(rng.choice([1, 1, 2, 3]))
        cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        k = rng.integers(1, 4, nd)
        dil = rng.integers(1, 3, nd) if rng.random() < 0.5 else np.ones(nd, int)
        mode = rng.choice(["int", "int", "same", "valid"])
        stride = rng.integers(1, 3, nd) if mode != "same" else np.ones(nd, int)
        pad = np.array([rng.integers(0, kk // 2 + 2) for kk in k]) if mode == "int" \
            else np.zeros(nd, int)
        size = [int(dil[d] * (k[d] - 1) + 1 - 2 * pad[d] + rng.integers(0, 4)) for d in range(nd)]
        size = [max(s, 1) for s in size]
        batched = rng.random() < 0.8
        x = ((int(rng.integers(1, 3)),) if batched else ()) + (cin,) + tuple(size)
        w = (cout, cin // groups) + tuple(int(v) for v in k)
        kw = {"stride": _maybe_int(rng, stride), "dilation": _maybe_int(rng, dil),
              "groups": groups}
        kw["padding"] = str(mode) if mode in ("same", "valid") else _maybe_int(rng, pad)
        specs = (_x_spec(rng, x), w) + (((cout,),) if rng.random() < 0.7 else ())
        ops.append(oracle.Op(f"F.{fname}", lambda L, *a, _f=fname, **kw: getattr(_F(L), _f)(*a, **kw),
                             [specs], kwargs=[kw], dtypes=DT, tol=4))
    return ops


def conv_transpose_ops(nd, n):
    rng = np.random.default_rng(200 + nd)
    ops = []
    fname = f"conv_transpose{nd}d"
    for i in range(n):
        groups = int(rng.choice([1, 1, 2]))
        cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        k = rng.integers(1, 4, nd)
        stride = rng.integers(1, 4, nd)
        dil = rng.integers(1, 3, nd) if rng.random() < 0.4 else np.ones(nd, int)
        pad = np.array([rng.integers(0, dil[d] * (k[d] - 1) // 2 + 1) for d in range(nd)])
        outpad = np.array([rng.integers(0, max(stride[d], dil[d])) for d in range(nd)])
        size = tuple(int(v) for v in rng.integers(1, 5, nd))
        batched = rng.random() < 0.8
        x = ((int(rng.integers(1, 3)),) if batched else ()) + (cin,) + size
        w = (cin, cout // groups) + tuple(int(v) for v in k)
        kw = {"stride": _maybe_int(rng, stride), "padding": _maybe_int(rng, pad),
              "output_padding": _maybe_int(rng, outpad), "groups": groups,
              "dilation": _maybe_int(rng, dil)}
        specs = (_x_spec(rng, x), w) + (((cout,),) if rng.random() < 0.7 else ())
        ops.append(oracle.Op(f"F.{fname}", lambda L, *a, _f=fname, **kw: getattr(_F(L), _f)(*a, **kw),
                             [specs], kwargs=[kw], dtypes=DT, tol=4))
    return ops


def _pool_geometry(rng, nd, dilation=True):
    k = rng.integers(1, 4, nd)
    stride = rng.integers(1, 4, nd)
    pad = np.array([rng.integers(0, kk // 2 + 1) for kk in k])
    dil = rng.integers(1, 3, nd) if dilation and rng.random() < 0.4 else np.ones(nd, int)
    size = [int(dil[d] * (k[d] - 1) + 1 - 2 * pad[d] + rng.integers(0, 5)) for d in range(nd)]
    size = tuple(max(s, 1) for s in size)
    return k, stride, pad, dil, size


def _all_padding_window(size, k, stride, pad, dil, ceil_mode):
    """Whether some output window of max pooling lies entirely in the padding."""
    nd = len(size)
    k, stride, pad, dil = (np.broadcast_to(np.asarray(v), (nd,)) for v in (k, stride, pad, dil))
    for d in range(nd):
        span = dil[d] * (k[d] - 1) + 1
        num = size[d] + 2 * pad[d] - span
        out = (-(-num // stride[d]) if ceil_mode else num // stride[d]) + 1
        if ceil_mode and (out - 1) * stride[d] >= size[d] + pad[d]:
            out -= 1
        for o in range(out):
            taps = [o * stride[d] - pad[d] + j * dil[d] for j in range(k[d])]
            if not any(0 <= t < size[d] for t in taps):
                return True
    return False


def max_pool_ops(nd, n):
    rng = np.random.default_rng(300 + nd)
    ops = []
    fname = f"max_pool{nd}d"
    for i in range(n):
        while True:  # see test_max_pool_window_in_padding
            k, stride, pad, dil, size = _pool_geometry(rng, nd)
            if not _all_padding_window(size, k, stride, pad, dil, False) and \
                    not _all_padding_window(size, k, stride, pad, dil, True):
                break
        batched = rng.random() < 0.8
        x = ((int(rng.integers(1, 3)),) if batched else ()) + (int(rng.integers(1, 4)),) + size
        kw = {"kernel_size": _maybe_int(rng, k), "padding": _maybe_int(rng, pad),
              "dilation": _maybe_int(rng, dil), "ceil_mode": bool(rng.random() < 0.5)}
        if rng.random() < 0.7:
            kw["stride"] = _maybe_int(rng, stride)
        ri = bool(rng.random() < 0.5)
        # Distinct values ("spread"): no ties, so the chosen indices are the same.
        ops.append(oracle.Op(f"F.{fname}", lambda L, x, _f=fname, _ri=ri, **kw:
                             getattr(_F(L), _f)(x, return_indices=_ri, **kw),
                             [(_x_spec(rng, x),)], kwargs=[kw], dtypes=["float32", "float64"],
                             domain="spread", grad_of=(lambda r: r[0]) if ri else None))
        ops.append(oracle.Op(f"F.{fname}", lambda L, x, _f=fname, **kw: getattr(_F(L), _f)(x, **kw),
                             [(tuple(x),)], kwargs=[kw], dtypes=["bfloat16"], domain="spread"))
    return ops


def avg_pool_ops(nd, n):
    rng = np.random.default_rng(400 + nd)
    ops = []
    fname = f"avg_pool{nd}d"
    for i in range(n):
        k, stride, pad, _, size = _pool_geometry(rng, nd, dilation=False)
        batched = rng.random() < 0.8
        x = ((int(rng.integers(1, 3)),) if batched else ()) + (int(rng.integers(1, 4)),) + size
        kw = {"kernel_size": _maybe_int(rng, k), "padding": _maybe_int(rng, pad),
              "ceil_mode": bool(rng.random() < 0.5),
              "count_include_pad": bool(rng.random() < 0.5)}
        if rng.random() < 0.7:
            kw["stride"] = _maybe_int(rng, stride)
        if nd == 2 and rng.random() < 0.3:
            kw["divisor_override"] = int(rng.integers(1, 6))
        ops.append(oracle.Op(f"F.{fname}", lambda L, x, _f=fname, **kw: getattr(_F(L), _f)(x, **kw),
                             [(_x_spec(rng, x),)], kwargs=[kw], dtypes=DT, tol=4))
    return ops


def adaptive_ops(n):
    rng = np.random.default_rng(500)
    ops = []
    for i in range(n):
        batched = rng.random() < 0.8
        lead = ((int(rng.integers(1, 3)),) if batched else ()) + (int(rng.integers(1, 4)),)
        size1 = int(rng.integers(1, 9))
        out1 = int(rng.integers(1, 2 * size1 + 1))
        ops.append(oracle.Op("F.adaptive_avg_pool1d",
                             lambda L, x, **kw: _F(L).adaptive_avg_pool1d(x, **kw),
                             [(lead + (size1,),)], kwargs=[{"output_size": out1}], dtypes=DT,
                             tol=4))
        size2 = tuple(int(v) for v in rng.integers(1, 8, 2))
        out2 = [int(rng.integers(1, s + 3)) for s in size2]
        if rng.random() < 0.3:
            out2[int(rng.integers(0, 2))] = None
        out2 = tuple(out2) if rng.random() < 0.8 or out2[0] != out2[1] else out2[0]
        ops.append(oracle.Op("F.adaptive_avg_pool2d",
                             lambda L, x, **kw: _F(L).adaptive_avg_pool2d(x, **kw),
                             [(_x_spec(rng, lead + size2),)], kwargs=[{"output_size": out2}],
                             dtypes=DT, tol=4))
        ri = bool(rng.random() < 0.5)
        ops.append(oracle.Op("F.adaptive_max_pool2d",
                             lambda L, x, _ri=ri, **kw:
                             _F(L).adaptive_max_pool2d(x, return_indices=_ri, **kw),
                             [(_x_spec(rng, lead + size2),)], kwargs=[{"output_size": out2}],
                             dtypes=["float32", "float64"], domain="spread",
                             grad_of=(lambda r: r[0]) if ri else None))
    return ops


# Hand-picked cases on top of the random ones: 3-D pools, asymmetric "same" padding.
EXTRA_OPS = [
    oracle.Op("F.conv2d", lambda L, x, w, b, **kw: _F(L).conv2d(x, w, b, **kw),
              [((2, 3, 6, 5), (4, 3, 2, 4), (4,))],
              kwargs=[{"padding": "same"}, {"padding": "same", "dilation": (2, 1)},
                      {"padding": "valid", "stride": 2}], dtypes=DT, tol=4),
    oracle.Op("F.conv1d", lambda L, x, w, **kw: _F(L).conv1d(x, w, **kw),
              [((1, 4, 9), (6, 2, 4))], kwargs=[{"groups": 2, "padding": "same"}], dtypes=DT,
              tol=4),
    oracle.Op("F.max_pool3d", lambda L, x, **kw: _F(L).max_pool3d(x, **kw),
              [((1, 2, 5, 4, 6),)], kwargs=[{"kernel_size": 2}, {"kernel_size": (3, 2, 2),
                                                                  "stride": 1, "padding": 1,
                                                                  "ceil_mode": True}],
              dtypes=["float32", "float64"], domain="spread"),
    oracle.Op("F.avg_pool3d", lambda L, x, **kw: _F(L).avg_pool3d(x, **kw),
              [((1, 2, 5, 4, 6),)], kwargs=[{"kernel_size": 2}, {"kernel_size": 3, "stride": 2,
                                                                  "padding": 1,
                                                                  "count_include_pad": False}],
              dtypes=["float32", "float64"]),
    oracle.Op("F.adaptive_avg_pool3d", lambda L, x, **kw: _F(L).adaptive_avg_pool3d(x, **kw),
              [((2, 5, 4, 6),)], kwargs=[{"output_size": (2, 3, 4)}],
              dtypes=["float32", "float64"]),
    oracle.Op("F.adaptive_max_pool1d", lambda L, x, **kw: _F(L).adaptive_max_pool1d(x, **kw),
              [((2, 3, 7),)], kwargs=[{"output_size": 3}, {"output_size": 5,
                                                           "return_indices": True}],
              dtypes=["float32", "float64"], domain="spread",
              grad_of=lambda r: r[0] if isinstance(r, tuple) else r),
]

OPS = (conv_ops(1, N_RANDOM) + conv_ops(2, N_RANDOM) + conv_ops(3, N_RANDOM // 2)
       + conv_transpose_ops(1, N_RANDOM) + conv_transpose_ops(2, N_RANDOM)
       + conv_transpose_ops(3, N_RANDOM // 2)
       + max_pool_ops(1, N_RANDOM) + max_pool_ops(2, N_RANDOM)
       + avg_pool_ops(1, N_RANDOM) + avg_pool_ops(2, N_RANDOM)
       + adaptive_ops(N_RANDOM) + EXTRA_OPS)


def _params(ops):
    out, seen = [], {}
    for op in ops:
        for d in op.dtypes:
            key = f"{op.name}-{d}"
            seen[key] = seen.get(key, -1) + 1
            out.append(pytest.param(op, d, id=f"{key}-{seen[key]}"))
    return out


@pytest.mark.parametrize("op,dtype", _params(OPS))
def test_conv_pool_functional_vs_torch(op, dtype):
    if dtype == "bfloat16":  # forward only; bf16 rounding of the accumulations differs
        op = dataclasses.replace(op, grad=False, tol=op.tol * 2)
    oracle.run_op(op, dtype)


def test_max_pool_window_in_padding():
    # A dilated window can lie entirely in the padding: torch gives -inf there (and the index
    # of the window's start stepped past the padding).
    x = np.arange(8, dtype=np.float32).reshape(2, 1, 1, 4)
    kw = {"kernel_size": (2, 3), "padding": 1, "dilation": 2}
    assert _all_padding_window((1, 4), (2, 3), 1, 1, 2, False)
    t = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    k = kiln.nn.functional.max_pool2d(kiln.tensor(x), return_indices=True, **kw)
    assert tuple(k[0].shape) == tuple(t[0].shape)
    np.testing.assert_array_equal(oracle.to_numpy(k[0]), oracle.to_numpy(t[0]))
    np.testing.assert_array_equal(oracle.to_numpy(k[1]), oracle.to_numpy(t[1]))
    oracle.record("F.max_pool2d")


# --- modules -----------------------------------------------------------------------------

C = module_oracle.Case
MODULE_CASES = [
    C("Conv1d", lambda nn: nn.Conv1d(3, 4, 3), [(2, 3, 7)]),
    C("Conv1d_strided_nobias", lambda nn: nn.Conv1d(4, 6, 2, stride=2, padding=1, bias=False,
                                                    groups=2), [(2, 4, 9)]),
    C("Conv1d_same_reflect", lambda nn: nn.Conv1d(2, 3, 4, padding="same",
                                                  padding_mode="reflect"), [(2, 2, 8)]),
    C("Conv2d", lambda nn: nn.Conv2d(3, 5, 3, padding=1), [(2, 3, 6, 5)]),
    C("Conv2d_rect", lambda nn: nn.Conv2d(2, 4, (3, 2), stride=(2, 1), dilation=(1, 2),
                                          padding=(1, 0)), [(2, 2, 7, 6)]),
    C("Conv2d_groups_unbatched", lambda nn: nn.Conv2d(4, 4, 3, groups=4), [(4, 5, 5)]),
    C("Conv2d_same", lambda nn: nn.Conv2d(3, 2, 4, padding="same", dilation=2), [(1, 3, 7, 8)]),
    C("Conv2d_valid", lambda nn: nn.Conv2d(3, 2, 2, padding="valid"), [(1, 3, 4, 4)]),
    C("Conv2d_circular", lambda nn: nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"),
      [(2, 2, 5, 5)]),
    C("Conv2d_replicate", lambda nn: nn.Conv2d(2, 3, 3, padding=(2, 1),
                                               padding_mode="replicate"), [(1, 2, 5, 6)]),
    C("Conv3d", lambda nn: nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=1),
      [(1, 2, 4, 5, 4)]),
    C("ConvTranspose1d", lambda nn: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1,
                                                       output_padding=1), [(2, 3, 5)]),
    C("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(4, 2, (3, 2), stride=2, groups=2,
                                                       dilation=(1, 2)), [(2, 4, 3, 4)]),
    C("ConvTranspose2d_nobias_unbatched",
      lambda nn: nn.ConvTranspose2d(3, 3, 3, padding=1, bias=False), [(3, 4, 4)]),
    C("ConvTranspose2d_output_size", lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=2),
      [(1, 2, 4, 4)], call=lambda m, xs, L: m(xs[0], output_size=[10, 9])),
    C("ConvTranspose3d", lambda nn: nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2),
                                                       padding=1, output_padding=(1, 0, 1),
                                                       groups=2), [(2, 4, 3, 4, 3)]),
    C("ConvTranspose3d_output_size", lambda nn: nn.ConvTranspose3d(2, 3, 3, stride=2),
      [(1, 2, 3, 3, 2)], call=lambda m, xs, L: m(xs[0], output_size=[8, 7, 6])),
    C("MaxPool1d", lambda nn: nn.MaxPool1d(3, stride=2, padding=1), [(2, 3, 9)]),
    C("MaxPool2d", lambda nn: nn.MaxPool2d(2), [(2, 3, 6, 5)]),
    C("MaxPool2d_ceil_dilation", lambda nn: nn.MaxPool2d((3, 2), stride=2, padding=1,
                                                         dilation=(1, 2), ceil_mode=True),
      [(1, 2, 7, 8)]),
    C("MaxPool2d_indices", lambda nn: nn.MaxPool2d(3, 2, return_indices=True), [(2, 2, 7, 7)]),
    C("AvgPool1d", lambda nn: nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
      [(2, 3, 8)]),
    C("AvgPool2d", lambda nn: nn.AvgPool2d(2), [(2, 3, 6, 5)]),
    C("AvgPool2d_options", lambda nn: nn.AvgPool2d((3, 2), stride=(2, 1), padding=1,
                                                   ceil_mode=True, divisor_override=3),
      [(1, 2, 7, 6)]),
    C("AdaptiveAvgPool1d", lambda nn: nn.AdaptiveAvgPool1d(4), [(2, 3, 9)]),
    C("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((3, None)), [(2, 3, 7, 5)]),
    C("AdaptiveAvgPool2d_int", lambda nn: nn.AdaptiveAvgPool2d(1), [(2, 3, 7, 5)]),
    C("AdaptiveMaxPool2d", lambda nn: nn.AdaptiveMaxPool2d((2, 3)), [(2, 3, 7, 5)]),
    C("AdaptiveMaxPool2d_indices", lambda nn: nn.AdaptiveMaxPool2d(3, return_indices=True),
      [(2, 7, 6)]),
    C("CNN", lambda nn: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(4, 8, 3), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten(), nn.Linear(8, 3)), [(2, 1, 8, 8)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", MODULE_CASES, ids=[c.name for c in MODULE_CASES])
def test_conv_pool_modules_vs_torch(case, dtype):
    module_oracle.run(case, dtype)


def test_conv_module_init_statistics():
    # Default init as torch: weights U(-b, b) with b = 1/sqrt(fan_in) (kaiming_uniform,
    # a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    kiln.manual_seed(0)
    m = kiln.nn.Conv2d(8, 64, 3)
    fan_in = 8 * 9
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= 1 / np.sqrt(fan_in) + 1e-7
    assert abs(w.std() - (1 / np.sqrt(fan_in)) / np.sqrt(3)) < 0.01
    assert np.abs(m.bias.detach().numpy()).max() <= 1 / np.sqrt(fan_in) + 1e-7
    t = kiln.nn.ConvTranspose2d(8, 4, 3, groups=2)
    assert tuple(t.weight.shape) == (8, 2, 3, 3)
    oracle.record("nn.Conv_init")


ERRORS = {
    "conv2d_channels": lambda nn, L, F: F.conv2d(L.ones(1, 3, 5, 5), L.ones(2, 2, 3, 3)),
    "conv2d_weight_dims": lambda nn, L, F: F.conv2d(L.ones(1, 3, 5, 5), L.ones(2, 3, 3)),
    "conv2d_input_dims": lambda nn, L, F: F.conv2d(L.ones(5, 5), L.ones(2, 1, 3, 3)),
    "conv2d_too_small": lambda nn, L, F: F.conv2d(L.ones(1, 1, 2, 2), L.ones(1, 1, 3, 3)),
    "conv2d_same_strided": lambda nn, L, F: F.conv2d(L.ones(1, 1, 5, 5), L.ones(1, 1, 3, 3),
                                                     stride=2, padding="same"),
    "conv2d_bad_padding_string": lambda nn, L, F: F.conv2d(L.ones(1, 1, 5, 5),
                                                           L.ones(1, 1, 3, 3), padding="full"),
    "conv_transpose2d_channels": lambda nn, L, F: F.conv_transpose2d(L.ones(1, 3, 4, 4),
                                                                     L.ones(2, 2, 3, 3)),
    "max_pool2d_big_padding": lambda nn, L, F: F.max_pool2d(L.ones(1, 1, 6, 6), 2, padding=2),
    "max_pool2d_too_small": lambda nn, L, F: F.max_pool2d(L.ones(1, 1, 2, 2), 3),
    "max_pool1d_dims": lambda nn, L, F: F.max_pool1d(L.ones(4), 2),
    "avg_pool2d_divisor_zero": lambda nn, L, F: F.avg_pool2d(L.ones(1, 1, 4, 4), 2,
                                                             divisor_override=0),
    "avg_pool2d_big_padding": lambda nn, L, F: F.avg_pool2d(L.ones(1, 1, 6, 6), 2, padding=2),
    "adaptive_avg_pool2d_dims": lambda nn, L, F: F.adaptive_avg_pool2d(L.ones(4), 2),
    "adaptive_max_pool2d_dims": lambda nn, L, F: F.adaptive_max_pool2d(L.ones(4), 2),
    "Conv2d_groups": lambda nn, L, F: nn.Conv2d(4, 6, 3, groups=4),
    "Conv2d_groups_zero": lambda nn, L, F: nn.Conv2d(4, 6, 3, groups=0),
    "Conv2d_same_strided": lambda nn, L, F: nn.Conv2d(2, 2, 3, stride=2, padding="same"),
    "Conv2d_bad_padding_string": lambda nn, L, F: nn.Conv2d(2, 2, 3, padding="full"),
    "Conv2d_bad_padding_mode": lambda nn, L, F: nn.Conv2d(2, 2, 3, padding_mode="mirror"),
    "ConvTranspose2d_padding_mode": lambda nn, L, F: nn.ConvTranspose2d(2, 2, 3,
                                                                        padding_mode="reflect"),
    "ConvTranspose2d_bad_output_size": lambda nn, L, F: nn.ConvTranspose2d(1, 1, 3, stride=2)(
        L.ones(1, 1, 4, 4), output_size=[20, 20]),
    "Conv2d_wrong_channels": lambda nn, L, F: nn.Conv2d(3, 2, 3)(L.ones(1, 2, 5, 5)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_conv_pool_errors_vs_torch(name):
    module_oracle.errors_agree(name, ERRORS[name])
    oracle.record("nn.conv_pool_errors")
