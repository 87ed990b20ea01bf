"""A sweep of everyday tensor ops, kiln against PyTorch 2.13 in the same process: reductions
along each dim, scans, sorting and selection, indexing, concatenation, pointwise ops with
broadcasting, softmax along a leading dim, norms, shape ops (pad, repeat, flip, roll, tril),
pooling, interpolation, losses and strided copies (transposes, permutes, channels-last).
Prints each op's best-of-7 time in both libraries and the ratio kiln / torch (below 1: kiln is
faster). Not part of RESULTS.md; its purpose is to find the ops that lag PyTorch.

    .venv/bin/python benchmarks/op_sweep.py [--dtype f32|bf16|f16] [--threads 2] [substring ...]
"""
import argparse
import time

import torch

import kiln


def best_ms(f, reps=7):
    f()
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t)
    return b * 1e3


def to_kiln(t):
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    if t.dtype == torch.float16:
        return kiln.from_numpy(t.numpy().copy())
    return kiln.from_numpy(t.numpy().copy())


def cases(L, a, b, img, idx, mask, rm, rv):
    """name -> thunk, for library L (kiln or torch) and its tensors."""
    F = L.nn.functional
    cl = L.channels_last
    return {
        "sum dim0": lambda: a.sum(0),
        "sum dim1": lambda: a.sum(1),
        "mean (2,3) NCHW": lambda: img.mean((2, 3)),
        "amax dim1": lambda: a.amax(1),
        "argmax dim1": lambda: a.argmax(1),
        "max dim0 (values, indices)": lambda: a.max(0),
        "cumsum dim1": lambda: a.cumsum(1),
        "cumsum dim0": lambda: a.cumsum(0),
        "sort dim1": lambda: a.sort(1),
        "topk 10 dim1": lambda: a.topk(10, 1),
        "index_select rows": lambda: a.index_select(0, idx),
        "cat dim0": lambda: L.cat([a, b], 0),
        "cat dim1": lambda: L.cat([a, b], 1),
        "stack": lambda: L.stack([a, b], 0),
        "where": lambda: L.where(mask, a, b),
        "masked_fill": lambda: a.masked_fill(mask, 0.0),
        "clamp": lambda: a.clamp(-0.5, 0.5),
        "pow 2": lambda: a.pow(2),
        "div": lambda: a / b,
        "a * b[0] + a": lambda: a * b[0] + a,
        "a + b[:, :1]": lambda: a + b[:, :1],
        "sigmoid": lambda: a.sigmoid(),
        "tanh": lambda: a.tanh(),
        "silu": lambda: F.silu(a),
        "gelu": lambda: F.gelu(a),
        "log_softmax dim1": lambda: a.log_softmax(1),
        "softmax dim0": lambda: a.softmax(0),
        "var dim1": lambda: a.var(1),
        "norm dim1": lambda: a.norm(dim=1),
        "abs().sum()": lambda: a.abs().sum(),
        "a.t() + b": lambda: a.t() + b,
        "a.t().contiguous()": lambda: a.t().contiguous(),
        "permute(0,2,1,3)": lambda: img.permute(0, 2, 1, 3).contiguous(),
        "to channels_last": lambda: img.contiguous(memory_format=cl),
        "relu NCHW": lambda: img.relu(),
        "batch_norm eval NCHW": lambda: F.batch_norm(img, rm, rv, training=False),
        "avg_pool2d 2": lambda: F.avg_pool2d(img, 2),
        "max_pool2d 3 s2": lambda: F.max_pool2d(img, 3, 2, 1),
        "interpolate nearest x2": lambda: F.interpolate(img[:4], scale_factor=2),
        "interpolate bilinear x2": lambda: F.interpolate(img[:4], scale_factor=2, mode="bilinear"),
        "cross_entropy": lambda: F.cross_entropy(a, idx[:2048]),
        "embedding": lambda: F.embedding(idx, a),
        "pad 1": lambda: F.pad(img, (1, 1, 1, 1)),
        "repeat": lambda: a[:256].repeat(4, 2),
        "flip": lambda: a.flip(1),
        "roll": lambda: a.roll(3, 1),
        "tril": lambda: a.tril(),
        "masked_select": lambda: a.masked_select(mask),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("only", nargs="*", help="run the ops whose name contains one of these")
    args = ap.parse_args()
    kiln.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    g = torch.Generator().manual_seed(0)
    t = dict(a=torch.randn(2048, 2048, generator=g).to(tdt),
             b=torch.randn(2048, 2048, generator=g).to(tdt),
             img=torch.randn(16, 64, 56, 56, generator=g).to(tdt),
             idx=torch.randint(0, 2048, (4096,), generator=g),
             mask=torch.rand(2048, 2048, generator=g) > 0.5,
             rm=torch.randn(64, generator=g).to(tdt),
             rv=(torch.rand(64, generator=g) + 0.5).to(tdt))
    k = {n: to_kiln(v) for n, v in t.items()}
    kc, tc = cases(kiln, **k), cases(torch, **t)
    print(f"kiln {kiln.__version__} vs torch {torch.__version__}, {args.dtype}, "
          f"{args.threads} threads: best of 7, ms")
    for name in tc:
        if args.only and not any(o in name for o in args.only):
            continue
        tk, tt = best_ms(kc[name]), best_ms(tc[name])
        print(f"{name:28s} kiln {tk:9.3f}  torch {tt:9.3f}  kiln/torch {tk / tt:5.2f}", flush=True)


if __name__ == "__main__":
    main()
