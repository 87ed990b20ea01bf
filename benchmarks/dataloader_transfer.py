"""How fast batches leave DataLoader worker processes: kiln (batches collated in shared
memory, sent as memory-file descriptors: kiln.multiprocessing), kiln with the copying path it
had before (batches pickled through the result pipe), and PyTorch 2.13 (shared memory), timed
interleaved in one process. Items are large and cheap to make (a clone of a 3x224x224 float32
image from a bank), so the transfer dominates. Persistent workers: process start-up is not
timed. Prints median epoch times and kiln / torch (below 1: kiln is faster).

    .venv/bin/python benchmarks/dataloader_transfer.py [--workers 2] [--batch 32] [--items 256]
"""
import argparse
import os
import sys
from multiprocessing.reduction import ForkingPickler

import torch

import kiln
import kiln.utils.data.dataloader as kiln_dataloader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import time_interleaved, median  # noqa: E402


class Images:
    def __init__(self, lib, items):
        self.bank = lib.rand(16, 3, 224, 224)
        self.items = items

    def __len__(self):
        return self.items

    def __getitem__(self, i):
        return self.bank[i % 16].clone(), i


def epoch(lib, args):
    mod = kiln.utils.data if lib is kiln else torch.utils.data
    loader = mod.DataLoader(Images(lib, args.items), batch_size=args.batch,
                            num_workers=args.workers, persistent_workers=True)

    def run():
        n = 0
        for x, _ in loader:
            n += x.shape[0]
        assert n == args.items
    return run


class CopyingTransfer:
    """kiln's path before shared memory: plain stacking, tensors pickled by value."""

    def __enter__(self):
        self.stack, self.reducer = kiln_dataloader._stack, ForkingPickler._extra_reducers.pop(kiln.Tensor)
        kiln_dataloader._stack = lambda ts: kiln.stack(ts, 0)
        return self

    def __exit__(self, *exc):
        kiln_dataloader._stack = self.stack
        ForkingPickler.register(kiln.Tensor, self.reducer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--items", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    shared = epoch(kiln, args)
    with CopyingTransfer():
        copying = epoch(kiln, args)
        copying()  # starts its (persistent) workers with the copying path in place
    reference = epoch(torch, args)

    def copying_run():
        with CopyingTransfer():
            copying()
    (ks, kc, ts), _ = time_interleaved([shared, copying_run, reference], budget_s=3.0,
                                       min_iters=5, max_iters=15, warmup=1)
    mb = args.items * 3 * 224 * 224 * 4 / 1e6
    print(f"{args.items} images of 3x224x224 float32 ({mb:.0f} MB), batch {args.batch}, "
          f"{args.workers} workers")
    print(f"{'case':34s} {'ms':>9s} {'/ torch':>8s}")
    t = median(ts) * 1e3
    for name, xs in [("kiln, shared memory", ks), ("kiln, pickled copies (before)", kc),
                     ("torch 2.13", ts)]:
        v = median(xs) * 1e3
        print(f"{name:34s} {v:9.1f} {v / t:8.2f}", flush=True)


if __name__ == "__main__":
    main()
