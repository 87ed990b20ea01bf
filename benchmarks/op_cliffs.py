"""Hunts performance cliffs: about 120 ops (elementwise, activations, reductions, indexing,
random, losses, shape ops, image ops) at small, medium, narrow and wide shapes, float32 and
bfloat16, planar and channels-last, kiln against PyTorch 2.13 in one process. Prints only the
cases where kiln takes more than --ratio times torch's time (default 1.5), worst first, and
the ops kiln lacks. op_sweep.py times a few large cases; this one looks for the layouts and
sizes that fall off a fast path (a channels-last pad that walked single elements: 32x; a
where that branched on a random mask; cat of column chunks: 73x). Strided operands too:
transposed, column-sliced and row-stepped views of [512, 512] and [2048, 512] matrices
(max(-1) of a row step took the single-threaded element loop: 3.6x).

Run it on an idle machine: another process holding a core makes the two threads of every
parallel region wait on each other, and showed 10-300x "cliffs" that were not there (session
54; decision 0131). The script measures the other load before and after and says so.

    .venv/bin/python benchmarks/op_cliffs.py [--ratio 1.5] [--threads 2] [substring ...]
"""
import argparse
import os
import sys
import time

import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import machine_load  # noqa: E402


def best_us(f, reps=7):
    """Best of reps rounds, each long enough (about 2 ms) to dwarf the timer."""
    f()
    f()
    t = time.perf_counter()
    f()
    once = time.perf_counter() - t
    n = max(1, min(200, int(2e-3 / max(once, 1e-7))))
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            f()
        b = min(b, (time.perf_counter() - t) / n)
    return b * 1e6


def to_kiln(t):
    """The same values (and layout, for channels-last 4-D tensors) as a kiln tensor, in
    memory kiln allocated (64-byte aligned, as torch's): NumPy's buffers start 16 bytes past
    a 64-byte boundary, and kiln's vector loads from them ran reductions in L2 up to 1.4x
    slower than from torch's (sum of [512, 512] float32, one thread: 20 against 14 us)."""
    if t.dtype == torch.bfloat16:
        k = kiln.from_numpy(t.float().contiguous().numpy().copy()).to(kiln.bfloat16)
    else:
        k = kiln.from_numpy(t.contiguous().numpy().copy()).clone()
    if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last):
        k = k.to(memory_format=kiln.channels_last)
    return k


def matrix_ops(L, x, y, r, i, m, w, e, tgt, ri):
    """name -> thunk for 2-D operands x, y [R, C], row r [C], column indices i [R, C/2] and
    tgt [R], row indices ri [R], mask m [R, C], weight w [256, C], table e [C, 64]."""
    F = L.nn.functional
    return {
        "add": lambda: x + y, "mul scalar": lambda: x * 2.0, "add row": lambda: x + r,
        "relu": lambda: x.relu(), "gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x),
        "sigmoid": lambda: x.sigmoid(), "tanh": lambda: x.tanh(), "exp": lambda: x.exp(),
        "sqrt abs": lambda: x.abs().sqrt(), "rsqrt": lambda: (x * x + 1).rsqrt(),
        "clamp": lambda: x.clamp(-1, 1), "floor": lambda: x.floor(), "round": lambda: x.round(),
        "sign": lambda: x.sign(), "log1p abs": lambda: x.abs().log1p(), "sin": lambda: x.sin(),
        "erf": lambda: x.erf(), "softplus": lambda: F.softplus(x),
        "leaky_relu": lambda: F.leaky_relu(x, 0.1), "pow 3": lambda: x.pow(3),
        "where": lambda: L.where(m, x, y), "masked_fill": lambda: x.masked_fill(m, 0.0),
        "lerp": lambda: L.lerp(x, y, 0.3), "maximum": lambda: L.maximum(x, y),
        "sum": lambda: x.sum(), "sum -1": lambda: x.sum(-1), "sum 0": lambda: x.sum(0),
        "mean -1": lambda: x.mean(-1, keepdim=True), "amax -1": lambda: x.amax(-1),
        "argmax -1": lambda: x.argmax(-1), "var -1": lambda: x.var(-1), "prod -1": lambda: x.prod(-1),
        "logsumexp -1": lambda: L.logsumexp(x, -1), "norm": lambda: x.norm(),
        "softmax -1": lambda: x.softmax(-1), "softmax 0": lambda: x.softmax(0),
        "log_softmax -1": lambda: x.log_softmax(-1),
        "layer_norm": lambda: F.layer_norm(x, (x.shape[-1],)),
        "cumsum -1": lambda: x.cumsum(-1), "sort -1": lambda: x.sort(-1),
        "topk 5": lambda: x.topk(5, -1), "nonzero": lambda: (x > 1).nonzero(),
        "x[mask]": lambda: x[m], "gather 1": lambda: x.gather(1, i),
        "index_select 0": lambda: x.index_select(0, ri),
        "transpose copy": lambda: x.t().contiguous(), "x[::2] copy": lambda: x[::2].contiguous(),
        "cat 0": lambda: L.cat([x, y], 0), "cat -1": lambda: L.cat([x, y], -1),
        "chunk cat": lambda: L.cat(x.chunk(4, -1), 0), "flip -1": lambda: x.flip(-1),
        "to bf16": lambda: x.to(L.bfloat16), "to int64": lambda: x.to(L.int64),
        "linear": lambda: F.linear(x, w), "embedding": lambda: F.embedding(tgt, e),
        "cross_entropy": lambda: F.cross_entropy(x, tgt), "nll_loss": lambda: F.nll_loss(x, tgt),
        "mse_loss": lambda: F.mse_loss(x, y),
        "bce_logits": lambda: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        "zeros_like": lambda: L.zeros_like(x), "full": lambda: L.full(tuple(x.shape), 1.5),
        "randn": lambda: L.randn(tuple(x.shape)), "rand": lambda: L.rand(tuple(x.shape)),
        "dropout train": lambda: F.dropout(x, 0.1, True),
    }


def strided_ops(L, x, y):
    """name -> thunk for two operands of one shape and any layout (views included)."""
    F = L.nn.functional
    return {
        "add": lambda: x + y, "exp": lambda: x.exp(), "gelu": lambda: F.gelu(x),
        "abs": lambda: x.abs(), "clamp": lambda: x.clamp(-1, 1),
        "nan_to_num": lambda: x.nan_to_num(), "sum": lambda: x.sum(), "sum -1": lambda: x.sum(-1),
        "sum 0": lambda: x.sum(0), "amax -1": lambda: x.amax(-1), "var -1": lambda: x.var(-1),
        "argmax -1": lambda: x.argmax(-1), "max -1": lambda: x.max(-1), "min 0": lambda: x.min(0),
        "norm -1": lambda: L.linalg.vector_norm(x, dim=-1), "logsumexp -1": lambda: L.logsumexp(x, -1),
        "softmax -1": lambda: x.softmax(-1), "softmax 0": lambda: x.softmax(0),
        "log_softmax -1": lambda: x.log_softmax(-1),
        "layer_norm": lambda: F.layer_norm(x, (x.shape[-1],)), "cumsum -1": lambda: x.cumsum(-1),
        "sort -1": lambda: x.sort(-1), "topk 5": lambda: x.topk(5, -1),
        "count_nonzero": lambda: L.count_nonzero(x), "contiguous": lambda: x.contiguous(),
        "cat -1": lambda: L.cat([x, y], -1),
    }


VIEWS = {"t": lambda v: v.t(), "cols 3/4": lambda v: v[:, : v.shape[1] * 3 // 4],
         "rows ::2": lambda v: v[::2]}


def image_ops(L, x, w, rm, rv):
    """name -> thunk for an image batch x [N, C, H, W] and a 3x3 weight w [C, C, 3, 3]."""
    F = L.nn.functional
    return {
        "conv3x3": lambda: F.conv2d(x, w, padding=1), "relu": lambda: x.relu(),
        "add self": lambda: x + x, "bn eval": lambda: F.batch_norm(x, rm, rv, training=False),
        "maxpool 3s2": lambda: F.max_pool2d(x, 3, 2, 1), "avgpool 2": lambda: F.avg_pool2d(x, 2),
        "adaptive avg 1": lambda: F.adaptive_avg_pool2d(x, 1), "mean 2,3": lambda: x.mean((2, 3)),
        "sum 1": lambda: x.sum(1), "softmax 1": lambda: x.softmax(1), "gelu": lambda: F.gelu(x),
        "interp nearest": lambda: F.interpolate(x, scale_factor=2),
        "interp bilinear": lambda: F.interpolate(x, scale_factor=2, mode="bilinear"),
        "pad 1": lambda: F.pad(x, (1, 1, 1, 1)), "group_norm": lambda: F.group_norm(x, 8),
        "flatten copy": lambda: x.flatten(1).contiguous(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ratio", type=float, default=1.5, help="report kiln/torch above this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("only", nargs="*", help="run the ops whose name contains one of these")
    args = ap.parse_args()
    kiln.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    load_before = machine_load(1.0)
    g = torch.Generator().manual_seed(0)
    rows, missing = [], set()

    def run(case, name, kf, tf):
        if args.only and not any(o in name for o in args.only):
            return
        try:
            with torch.inference_mode(), kiln.inference_mode():
                k, t = best_us(kf), best_us(tf)
        except AttributeError as ex:
            missing.add(f"{name}: {ex}")
            return
        except Exception as ex:  # a failing case is a finding too
            rows.append((float("inf"), f"{case:28s} {name:18s} {type(ex).__name__}: {str(ex)[:60]}"))
            return
        if k / t > args.ratio:
            rows.append((k / t, f"{case:28s} {name:18s} kiln {k:9.1f} us  torch {t:9.1f} us  {k / t:6.2f}x"))

    for dt in (torch.float32, torch.bfloat16):
        for shape in ((64, 64), (512, 512), (8, 4096), (4096, 8), (2048, 512)):
            R, C = shape
            x = torch.randn(R, C, generator=g).to(dt)
            y = torch.randn(R, C, generator=g).to(dt)
            r = torch.randn(C, generator=g).to(dt)
            i = torch.randint(0, C, (R, max(C // 2, 1)), generator=g)
            m = torch.rand(R, C, generator=g) > 0.5
            w = torch.randn(256, C, generator=g).to(dt)
            e = torch.randn(C, 64, generator=g).to(dt)
            tgt = torch.randint(0, C, (R,), generator=g)
            ri = torch.randint(0, R, (R,), generator=g)
            tops = matrix_ops(torch, x, y, r, i, m, w, e, tgt, ri)
            kops = matrix_ops(kiln, *[to_kiln(v) for v in (x, y, r, i, m, w, e, tgt, ri)])
            for name in tops:
                run(f"{str(dt)[6:]} {shape}", name, kops[name], tops[name])
        for shape in ((512, 512), (2048, 512)):
            x = torch.randn(*shape, generator=g).to(dt)
            y = torch.randn(*shape, generator=g).to(dt)
            kx, ky = to_kiln(x), to_kiln(y)
            for view, fn in VIEWS.items():
                tops = strided_ops(torch, fn(x), fn(y))
                kops = strided_ops(kiln, fn(kx), fn(ky))
                for name in tops:
                    run(f"{str(dt)[6:]} {shape} {view}", name, kops[name], tops[name])
        for shape in ((1, 32, 14, 14), (8, 32, 28, 28)):
            for cl in (False, True):
                x = torch.randn(*shape, generator=g).to(dt)
                w = (torch.randn(32, 32, 3, 3, generator=g) * 0.1).to(dt)
                rm = torch.randn(32, generator=g).to(dt)
                rv = (torch.rand(32, generator=g) + 0.5).to(dt)
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                    w = w.to(memory_format=torch.channels_last)
                tops = image_ops(torch, x, w, rm, rv)
                kops = image_ops(kiln, *[to_kiln(v) for v in (x, w, rm, rv)])
                for name in tops:
                    run(f"{str(dt)[6:]} {shape}{' cl' if cl else ''}", name, kops[name], tops[name])
    load_after = machine_load(1.0)
    print(f"kiln {kiln.__version__} vs torch {torch.__version__}, {args.threads} threads: cases "
          f"above {args.ratio}x of torch's time (best of 7), worst first; other load "
          f"{load_before:.2f} cores before, {load_after:.2f} after")
    if max(load_before, load_after) > 0.3:
        print("WARNING: the machine was busy; parallel ops' ratios are not to be trusted")
    for _, line in sorted(rows, key=lambda r: -r[0]):
        print(line)
    for line in sorted(missing):
        print("missing in kiln:", line)


if __name__ == "__main__":
    main()
