"""An LLM head's loss: nn.functional.linear_cross_entropy (hidden states [N, D] against a
[vocab, D] weight, forward + backward) with the chunked path (LinearCrossEntropyOptions(),
decision 0098) and the reference composition (options=None), kiln against PyTorch 2.13's
same two paths, timed interleaved in one process. Also kiln's peak CPU allocation of each
(its allocator's peak counter; the reference path holds the [N, vocab] logits and their
gradient). Prints median ms and kiln / torch. Not part of RESULTS.md.

    .venv/bin/python benchmarks/linear_cross_entropy.py [--n 2048] [--d 768] [--vocab 50257]
"""
import argparse
import os
import sys

import numpy as np
import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import time_interleaved, median  # noqa: E402


def step(lib, x, w, t, options):
    F = lib.nn.functional

    def run():
        xx = x.detach().requires_grad_()
        ww = w.detach().requires_grad_()
        F.linear_cross_entropy(xx, ww, t, options=options).backward()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    kiln.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.n, a.d)).astype(np.float32)
    w = (rng.standard_normal((a.vocab, a.d)) * 0.02).astype(np.float32)
    t = rng.integers(0, a.vocab, a.n)
    kx, kw, kt = kiln.from_numpy(x), kiln.from_numpy(w), kiln.from_numpy(t)
    tx, tw, tt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(t)
    cpu = kiln.device("cpu")
    print(f"N={a.n} D={a.d} vocab={a.vocab} float32, forward + backward")
    print(f"{'path':12s} {'kiln ms':>10s} {'torch ms':>10s} {'kiln/torch':>10s} "
          f"{'kiln peak MB':>13s}")
    for name, kopt, topt in (("chunked", kiln.nn.LinearCrossEntropyOptions(),
                              torch.nn.LinearCrossEntropyOptions()),
                             ("reference", None, None)):
        kiln.reset_peak_memory_stats(cpu)
        base = kiln.memory_allocated(cpu)
        step(kiln, kx, kw, kt, kopt)()
        peak = (kiln.max_memory_allocated(cpu) - base) / 2 ** 20
        (ks, ts), _ = time_interleaved([step(kiln, kx, kw, kt, kopt), step(torch, tx, tw, tt, topt)],
                                       budget_s=3.0, min_iters=3, max_iters=10, warmup=1)
        k, tm = median(ks) * 1e3, median(ts) * 1e3
        print(f"{name:12s} {k:10.1f} {tm:10.1f} {k / tm:10.2f} {peak:13.0f}", flush=True)


if __name__ == "__main__":
    main()
