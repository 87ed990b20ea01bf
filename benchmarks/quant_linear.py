"""Quantised Linear products (kiln.quant.GGMLWeight.linear: ggml's Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)
against kiln's and PyTorch 2.13's bfloat16 Linear on the same shapes, in one process, two
threads: milliseconds per product and GB/s of weight bytes. M = 1 is a decoding step (weights
streamed once), M >= 16 a prefill (weights dequantised to bfloat16 for the GEMM). --dram
cycles several weight matrices so that none is in any cache.

usage: python benchmarks/quant_linear.py [--shapes 4096x4096,11008x4096] [--rows 1,4,16,128] [--dram]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ForeignLoad  # noqa: E402

K_QUANT_F16 = {"Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}  # float16 fields of a block


def weight(kind, n, k, rng):
    if kind in ("Q8_0", "Q4_0"):
        return kiln.quant.quantize(kiln.randn(n, k), kind)
    # No K-quant quantiser in kiln: random blocks with finite float16 scales.
    _, elems, nbytes, _ = kiln.quant.GGML_TYPES[kind]
    raw = rng.integers(0, 256, size=(n, k // elems, nbytes), dtype=np.uint8)
    for off in K_QUANT_F16[kind]:
        raw[:, :, off:off + 2] = rng.uniform(-0.02, 0.02, (n, k // elems)).astype(np.float16).view(np.uint8).reshape(n, k // elems, 2)
    return kiln.quant.GGMLWeight(kiln.from_numpy(raw.reshape(n, -1)), kind, (n, k))


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096x4096,11008x4096,4096x11008")
    ap.add_argument("--rows", default="1,4,16,128")
    ap.add_argument("--types", default="Q8_0,Q4_0,Q4_K,Q5_K,Q6_K")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dram", action="store_true", help="cycle 8 weights of each kind (out of cache)")
    a = ap.parse_args()
    torch.set_num_threads(2)
    kiln.set_num_threads(2)
    rng = np.random.default_rng(0)
    print(f"kiln kernels: {kiln.quant.kernel_isa()}; torch {torch.__version__}")
    load = ForeignLoad()
    for shape in a.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        copies = 8 if a.dram else 1
        weights = {t: [weight(t, n, k, rng) for _ in range(copies)] for t in a.types.split(",")}
        wb = [kiln.randn(n, k).to(kiln.bfloat16) for _ in range(min(copies, 4))]
        tw = [torch.randn(n, k).to(torch.bfloat16) for _ in range(min(copies, 4))]
        for m in (int(v) for v in a.rows.split(",")):
            x = kiln.randn(m, k)
            xb, tx = x.to(kiln.bfloat16), torch.randn(m, k).to(torch.bfloat16)
            with kiln.inference_mode(), torch.inference_mode():
                cyc = {"i": 0}

                def cycled(ws, f):
                    def run():
                        cyc["i"] = (cyc["i"] + 1) % len(ws)
                        f(ws[cyc["i"]])
                    return run
                t_b = median_ms(cycled(wb, lambda w: kiln.nn.functional.linear(xb, w)), a.reps)
                t_t = median_ms(cycled(tw, lambda w: torch.nn.functional.linear(tx, w)), a.reps)
                line = f"{n}x{k} M={m:<4d} kiln bf16 {t_b:7.2f} ms  torch bf16 {t_t:7.2f} ms |"
                for kind, ws in weights.items():
                    t = median_ms(cycled(ws, lambda w: w.linear(x)), a.reps)
                    line += f" {kind} {t:6.2f} ms ({ws[0].nbytes / t / 1e6:5.1f} GB/s, {t_t / t:4.1f}x torch)"
                print(line, flush=True)
    print(f"other load during the run: {load.cores():.2f} cores")


if __name__ == "__main__":
    main()
