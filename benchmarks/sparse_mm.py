"""kiln.sparse.mm against torch.sparse.mm (PyTorch 2.13) in one process: a random 10000 x 10000
adjacency with about 100k nonzeros (COO, coalesced, and the same as CSR) times a [10000, 64]
float32 feature matrix, forward and forward + backward (gradients for the values and the
features), best-of-N milliseconds and the ratio kiln / torch (below 1: kiln is faster).
Not part of RESULTS.md.

    .venv/bin/python benchmarks/sparse_mm.py [--threads 2] [--reps 20] [--nnz 100000]
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch

import kiln
import kiln.sparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import best_seconds  # noqa: E402



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--nnz", type=int, default=100000)
    p.add_argument("--features", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # torch's sparse beta / invariant-check warnings

    rng = np.random.default_rng(0)
    idx = rng.integers(0, args.n, (2, args.nnz))
    vals = rng.random(args.nnz).astype(np.float32)
    feats = rng.normal(size=(args.n, args.features)).astype(np.float32)
    shape = (args.n, args.n)
    ks = kiln.sparse_coo_tensor(kiln.tensor(idx), kiln.tensor(vals), shape).coalesce()
    ts = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), shape).coalesce()
    kx, tx = kiln.tensor(feats), torch.tensor(feats)
    np.testing.assert_allclose(kiln.sparse.mm(ks, kx).numpy(), torch.sparse.mm(ts, tx).numpy(),
                               rtol=1e-4, atol=1e-4)

    def fwd_bwd(L, s, x, make):
        v = s._values().detach().requires_grad_(True)
        xg = x.detach().requires_grad_(True)
        s = make(s, v)
        L.sparse.mm(s, xg).sum().backward()

    def remake_coo(L):
        return lambda s, v: L.sparse_coo_tensor(s._indices(), v, s.shape, is_coalesced=True,
                                                check_invariants=False)

    def remake_csr(L):
        return lambda s, v: L.sparse_csr_tensor(s.crow_indices(), s.col_indices(), v, s.shape,
                                                check_invariants=False)

    print(f"sparse.mm: {shape[0]}x{shape[1]} with {ks._nnz()} nonzeros @ "
          f"[{args.n}, {args.features}] float32, {args.threads} threads, best of {args.reps}")
    print(f"{'case':<26}{'kiln ms':>10}{'torch ms':>10}{'kiln/torch':>12}")
    kc, tc = ks.to_sparse_csr(), ts.to_sparse_csr()
    cases = [
        ("COO forward", lambda: kiln.sparse.mm(ks, kx), lambda: torch.sparse.mm(ts, tx)),
        ("COO forward+backward", lambda: fwd_bwd(kiln, ks, kx, remake_coo(kiln)),
         lambda: fwd_bwd(torch, ts, tx, remake_coo(torch))),
        ("CSR forward", lambda: kiln.sparse.mm(kc, kx), lambda: torch.sparse.mm(tc, tx)),
    ]
    for name, kf, tf in cases:
        k_ms = best_seconds(kf, args.reps, warmup=2) * 1e3
        t_ms = best_seconds(tf, args.reps, warmup=2) * 1e3
        print(f"{name:<26}{k_ms:>10.2f}{t_ms:>10.2f}{k_ms / t_ms:>12.2f}")


if __name__ == "__main__":
    main()
