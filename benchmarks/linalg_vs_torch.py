"""The factorisations of kiln.linalg (LAPACK from OpenBLAS, decision 0076) against PyTorch 2.13
(MKL's LAPACK in its CPU wheel) in the same process: one 64x64, 256x256 and 1024x1024 matrix
and a batch of 256 8x8 matrices, float32 and float64. Prints each call's best-of-5 time in both
libraries and the ratio kiln / torch (below 1: kiln is faster). Not part of RESULTS.md.

    .venv/bin/python benchmarks/linalg_vs_torch.py [--threads 2] [--dtype f32|f64] [name ...]
"""
import argparse
import os
import sys

import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import best_seconds  # noqa: E402



def cases(L, A, S, B):
    """name -> thunk for library L, A a general square batch, S positive-definite, B [.., n, 4]."""
    la = L.linalg
    return {
        "solve": lambda: la.solve(A, B),
        "inv": lambda: la.inv(A),
        "det": lambda: la.det(A),
        "cholesky": lambda: la.cholesky(S),
        "qr": lambda: la.qr(A),
        "eigh": lambda: la.eigh(S),
        "svd": lambda: la.svd(A, full_matrices=False),
        "svdvals": lambda: la.svdvals(A),
        "lstsq": lambda: la.lstsq(A, B),
        "pinv": lambda: la.pinv(A),
        "matrix_exp": lambda: la.matrix_exp(A / A.shape[-1]),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="f64", choices=["f32", "f64"])
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "f64" else torch.float32
    print(f"{'case':24s} {'kiln ms':>10s} {'torch ms':>10s} {'kiln/torch':>10s}")
    for batch, n in ((256, 8), (1, 64), (1, 256), (1, 1024)):
        g = torch.Generator().manual_seed(n)
        A = torch.randn(batch, n, n, generator=g, dtype=dtype) + n ** 0.5 * torch.eye(n, dtype=dtype)
        S = A @ A.mT + n * torch.eye(n, dtype=dtype)
        B = torch.randn(batch, n, 4, generator=g, dtype=dtype)
        k = [kiln.from_numpy(t.numpy().copy()) for t in (A, S, B)]
        kc, tc = cases(kiln, *k), cases(torch, A, S, B)
        for name in kc:
            if args.names and not any(s in name for s in args.names):
                continue
            if n == 1024 and name in ("matrix_exp", "pinv", "lstsq"):
                continue  # seconds each in both libraries, nothing new over svd / solve
            km, tm = best_seconds(kc[name], 5) * 1e3, best_seconds(tc[name], 5) * 1e3
            print(f"{name + f' {batch}x{n}x{n}':24s} {km:10.3f} {tm:10.3f} {km / tm:10.2f}")


if __name__ == "__main__":
    main()
