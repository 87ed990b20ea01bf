"""The PyTorch side of the kernel benchmarks (GEMM, elementwise, Python dispatch), in a process
of its own so that only PyTorch's OpenMP runtime runs here. The shapes, forms and record names
match `kiln bench` (tools/bench/) so that benchmarks/run.py can put them on one line.

    python benchmarks/torch_peer.py --json out.json [--threads 2] [--quick] [--full]

PyTorch at its best on CPU: torch.set_num_threads(threads), inference mode, bf16 tensors (not
autocast) for bf16, torch._int_mm (s8 x s8 -> s32) for int8. At M = 1 the weights rotate among
copies totalling >= 1 GiB, as in kiln bench, so they stream from DRAM.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import record, time_interleaved, median, write_json  # noqa: E402


def size_name(n):
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def gemm_shapes(sizes, quick):
    shapes = [(n, n, n, False) for n in sizes]
    if quick:
        shapes += [(1, 256, 256, True), (16, 256, 256, True)]
    else:
        shapes += [(m, n, k, True) for m in (1, 8, 128) for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008))]
    return shapes


def shape_name(M, N, K, linear):
    if linear:
        return f"linear M={M} N={N} K={K}"
    return f"{M}^3" if M == N == K else f"{M}x{N}x{K}"


def bench_gemm(args, out):
    sizes = [int(s) for s in args.gemm_sizes.split(",")]
    print("\n== gemm (PyTorch)")
    for dt_name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("int8", torch.int8)):
        for (M, N, K, linear) in gemm_shapes(sizes, args.quick):
            name = f"{dt_name} {shape_name(M, N, K, linear)}"
            esz = torch.tensor([], dtype=dt).element_size()
            R = 1
            if M < 16:  # weight-streaming rows: copies beyond the L3, as kiln bench
                R = max(1, math.ceil((8e6 if args.quick else 2 ** 30) / (N * K * esz)))
            g = torch.Generator().manual_seed(0)
            if dt == torch.int8:
                ws = [torch.randint(-64, 64, (N, K) if linear else (K, N), dtype=torch.int8, generator=g)
                      for _ in range(R)]
                x = torch.randint(-64, 64, (M, K), dtype=torch.int8, generator=g)
            else:
                ws = [torch.randn((N, K) if linear else (K, N), generator=g).to(dt) for _ in range(R)]
                x = torch.randn(M, K, generator=g).to(dt)
            state = {"i": 0}

            def call():
                w = ws[state["i"] % R]
                state["i"] += 1
                if dt == torch.int8:
                    return torch._int_mm(x, w.t() if linear else w)
                return F.linear(x, w) if linear else torch.mm(x, w)

            try:
                with torch.inference_mode():
                    call()
                    samples, foreign = time_interleaved([call], args.budget, args.min_iters, args.max_iters)
            except RuntimeError as e:
                msg = str(e).splitlines()[0][:120]
                print(f"  {name:40s} not available: {msg}")
                out.append(record("gemm", name, "torch", "note", "", 0, note=f"not available: {msg}"))
                continue
            t = median(samples[0])
            rate = 2.0 * M * N * K / t / 1e9
            unit = "GOP/s" if dt == torch.int8 else "GFLOP/s"
            note = "torch._int_mm s8 x s8 -> s32" if dt == torch.int8 else ""
            out.append(record("gemm", name, "torch", "rate", unit, rate, n=len(samples[0]),
                              foreign_cores=foreign, note=note))
            line = f"  {name:40s} {rate:9.4g} {unit}"
            if M < 16:
                gbs = N * K * esz / t / 1e9
                out.append(record("gemm", name, "torch", "weight_gbs", "GB/s", gbs, n=len(samples[0]),
                                  foreign_cores=foreign))
                line += f"  {gbs:7.3g} GB/s of weights"
            print(line + f"  load {foreign:.2f}", flush=True)
            del ws


def bench_elementwise(args, out):
    sizes = [int(s) for s in args.elt_sizes.split(",")]
    print("\n== elementwise (PyTorch, float32): GB/s")
    for n in sizes:
        rows = max(1, n // 1024)
        cols = n // rows
        g = torch.Generator().manual_seed(0)
        x = torch.randn(rows, cols, generator=g)
        y = torch.randn(rows, cols, generator=g)
        o = torch.empty(rows, cols)
        w = torch.randn(cols, generator=g)
        b = torch.randn(cols, generator=g)
        eb = 4.0 * n
        ops = [
            ("copy_", "out=", 2 * eb, lambda: o.copy_(x)),
            ("add", "out=", 3 * eb, lambda: torch.add(x, y, out=o)),
            ("mul", "out=", 3 * eb, lambda: torch.mul(x, y, out=o)),
            ("relu", "in-place", 2 * eb, lambda: torch.relu_(o)),
            ("exp", "out=", 2 * eb, lambda: torch.exp(x, out=o)),
            ("gelu", "alloc", 2 * eb, lambda: F.gelu(x)),
            ("sum", "reduce", eb, lambda: x.sum()),
            ("mean", "reduce", eb, lambda: x.mean()),
            ("max", "reduce", eb, lambda: x.max()),
            ("softmax", "alloc", 2 * eb, lambda: torch.softmax(x, -1)),
            ("layer_norm", "alloc", 2 * eb, lambda: F.layer_norm(x, (cols,), w, b)),
        ]
        with torch.inference_mode():
            for op, form, nbytes, fn in ops:
                samples, foreign = time_interleaved([fn], args.budget, args.min_iters, args.max_iters)
                gbs = nbytes / median(samples[0]) / 1e9
                out.append(record("elementwise", f"{op} {size_name(n)}", "torch", "gbs", "GB/s", gbs,
                                  n=len(samples[0]), foreign_cores=foreign, note=form))
                print(f"  {op:12s} {size_name(n):6s} {form:10s} {gbs:9.4g} GB/s  load {foreign:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--sections", default="gemm,elementwise")
    ap.add_argument("--gemm-sizes", default=None)
    ap.add_argument("--elt-sizes", default=None)
    ap.add_argument("--budget", type=float, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.gemm_sizes is None:
        args.gemm_sizes = "128" if args.quick else ("256,512,1024,2048,4096" if args.full else "256,512,1024,2048")
    if args.elt_sizes is None:
        args.elt_sizes = str(1 << 16) if args.quick else ",".join(str(x << 20) for x in (1, 16, 64))
    if args.budget is None:
        args.budget = 0.02 if args.quick else 0.4
    args.min_iters, args.max_iters = (2, 5) if args.quick else (5, 200)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.backends.cpu.get_cpu_capability()}", flush=True)
    out = []
    secs = args.sections.split(",")
    if "gemm" in secs:
        bench_gemm(args, out)
    if "elementwise" in secs:
        bench_elementwise(args, out)
    write_json(args.json, out, torch=torch.__version__, threads=torch.get_num_threads(),
               cpu_capability=torch.backends.cpu.get_cpu_capability())


if __name__ == "__main__":
    main()
