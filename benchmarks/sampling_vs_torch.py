"""Random sampling and data loading against PyTorch 2.13 in the same process (timed
interleaved, harness.time_interleaved): the fixed-draw fills (rand, randn, bernoulli), the
rejection samplers (_standard_gamma, poisson, binomial; decision 0096), the Gamma derivative,
and DataLoader epochs with worker processes over a dataset whose items cost CPU time in
Python (decision 0097). Prints median times and kiln / torch (below 1: kiln is faster).
Not part of RESULTS.md.

    .venv/bin/python benchmarks/sampling_vs_torch.py [--threads 2] [--n 1000000]
"""
import argparse
import os
import sys

import numpy as np
import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import time_interleaved, median  # noqa: E402


def sampler_cases(L, n):
    two = L.full([n], 2.0)
    half = L.full([n], 0.5)
    rate = L.full([n], 20.0)
    count, prob = L.full([n], 200.0), L.full([n], 0.3)
    return {
        "rand": lambda: L.rand(n),
        "randn": lambda: L.randn(n),
        "bernoulli(0.5)": lambda: L.bernoulli(half),
        "_standard_gamma(2)": lambda: L._standard_gamma(two),
        "_standard_gamma(0.5)": lambda: L._standard_gamma(half),
        "poisson(20)": lambda: L.poisson(rate),
        "binomial(200, 0.3)": lambda: L.binomial(count, prob),
        "_standard_gamma_grad": lambda: L._standard_gamma_grad(two, rate),
    }


class Items:
    """Items that cost Python + numpy time (a small image's normalisation), as a typical
    decoding / augmentation step; returned as the library's tensors."""

    def __init__(self, lib, n=512):
        self.lib, self.n = lib, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = rng.standard_normal((3, 64, 64)).astype(np.float32)
        for _ in range(4):
            img = np.tanh(img * 1.1 + 0.1)
        return self.lib.from_numpy(img), i


def loader_epoch(lib, data, workers):
    mod = kiln.utils.data if lib is kiln else torch.utils.data
    ds = Items(lib)
    loader = mod.DataLoader(ds, batch_size=32, num_workers=workers)

    def run():
        for x, _ in loader:
            pass
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=1_000_000)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    print(f"{'case':32s} {'kiln ms':>10s} {'torch ms':>10s} {'kiln/torch':>10s}")
    kc, tc = sampler_cases(kiln, args.n), sampler_cases(torch, args.n)
    for name in kc:
        (ks, ts), _ = time_interleaved([kc[name], tc[name]])
        k, t = median(ks) * 1e3, median(ts) * 1e3
        print(f"{name + f' n={args.n}':32s} {k:10.3f} {t:10.3f} {k / t:10.2f}", flush=True)
    for workers in (0, 2):
        (ks, ts), _ = time_interleaved([loader_epoch(kiln, None, workers),
                                        loader_epoch(torch, None, workers)],
                                       budget_s=2.0, min_iters=3, max_iters=10, warmup=1)
        k, t = median(ks) * 1e3, median(ts) * 1e3
        label = f"DataLoader epoch, {workers} workers"
        print(f"{label:32s} {k:10.3f} {t:10.3f} {k / t:10.2f}", flush=True)


if __name__ == "__main__":
    main()
