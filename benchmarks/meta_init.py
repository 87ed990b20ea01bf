"""Building a model without initialising it: kiln's meta device against PyTorch's, in one
process. For each library: the time to build 8 x Linear(4096, 4096) (512 MiB of float32
weights) on the CPU (allocation + kaiming/uniform initialisation), on the meta device (shapes
only), and to give the meta model uninitialised CPU memory with to_empty(). Prints each
time (best of --repeat) and the kiln / torch ratios (below 1: kiln is faster).

    .venv/bin/python benchmarks/meta_init.py [--threads 2] [--repeat 3] [--layers 8] [--dim 4096]
"""
import argparse
import os
import sys

import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import best_seconds  # noqa: E402


def build(lib, device, layers, dim):
    with lib.device(device):
        return lib.nn.Sequential(*[lib.nn.Linear(dim, dim) for _ in range(layers)])



def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=4096)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    kiln.set_num_threads(a.threads)
    rows = {}
    for lib in (kiln, torch):
        cpu = best_seconds(lambda: build(lib, "cpu", a.layers, a.dim), a.repeat, warmup=0) * 1e3
        meta = best_seconds(lambda: build(lib, "meta", a.layers, a.dim), a.repeat, warmup=0) * 1e3
        empty = best_seconds(lambda: build(lib, "meta", a.layers, a.dim).to_empty(
            device="cpu"), a.repeat, warmup=0) * 1e3
        rows[lib.__name__] = (cpu, meta, empty)
    print(f"{a.layers} x Linear({a.dim}, {a.dim}), {a.threads} threads, best of {a.repeat} (ms)")
    print(f"{'step':28s} {'kiln':>10s} {'torch':>10s} {'kiln/torch':>11s}")
    for i, step in enumerate(["build on cpu (initialised)", "build on meta",
                              "build on meta + to_empty"]):
        k, t = rows["kiln"][i], rows["torch"][i]
        print(f"{step:28s} {k:10.2f} {t:10.2f} {k / t:10.2f}x")


if __name__ == "__main__":
    main()
