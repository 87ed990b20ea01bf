"""Graph mode (kiln.compile, decision 0081) against eager kiln and eager PyTorch 2.13 in one
process, on models small enough that per-op costs matter: an MLP at batch 1 and 8, a
two-layer transformer encoder (d 128, 32 tokens), a small CNN, and an elementwise chain. Prints
each forward's best-of-N time (inference mode) and the ratios compiled / eager and compiled /
torch (below 1: compiled kiln is faster). Not part of RESULTS.md.

    .venv/bin/python benchmarks/compile_vs_eager.py [--threads 2] [--reps 50]
"""
import argparse
import os
import sys

import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import best_seconds  # noqa: E402



def models(L):
    nn = L.nn
    return {
        "mlp b1": (lambda: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128),
                                         nn.ReLU(), nn.Linear(128, 10)), (1, 64)),
        "mlp b8": (lambda: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128),
                                         nn.ReLU(), nn.Linear(128, 10)), (8, 64)),
        "encoder 2x d128 s32": (lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True), 2),
            (1, 32, 128)),
        "cnn 3x32x32": (lambda: nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.Hardswish(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)), (1, 3, 32, 32)),
    }


def chain(L):
    return lambda x: ((x * 0.5 + 1.0).clamp(-2.0, 2.0) * 3.0 - 1.0).relu().sqrt() / 2.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    print(f"{'case':24s} {'eager us':>10s} {'compiled':>10s} {'torch us':>10s} "
          f"{'comp/eager':>10s} {'comp/torch':>10s}")
    cases = []
    for name, (build_k, shape) in models(kiln).items():
        build_t = models(torch)[name][0]
        torch.manual_seed(0)
        tm = build_t().eval()
        km = build_k().eval()
        km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                            for k, v in tm.state_dict().items()})
        x = torch.randn(*shape)
        cases.append((name, km, tm, x))
    for n in (4096, 1 << 20):
        x = torch.randn(n)
        cases.append((f"chain {n}", chain(kiln), chain(torch), x))
    for name, kf, tf, x in cases:
        kx = kiln.from_numpy(x.numpy().copy())
        compiled = kiln.compile(kf if not isinstance(kf, kiln.nn.Module) else build_copy(kf))
        with torch.inference_mode(), kiln.inference_mode():
            eager = best_seconds(lambda: kf(kx), args.reps, warmup=3) * 1e6
            comp = best_seconds(lambda: compiled(kx), args.reps, warmup=3) * 1e6
            ref = best_seconds(lambda: tf(x), args.reps, warmup=3) * 1e6
            diff = (torch.from_numpy(compiled(kx).numpy()) - tf(x)).abs().max().item()
        print(f"{name:24s} {eager:10.1f} {comp:10.1f} {ref:10.1f} {comp / eager:10.2f} "
              f"{comp / ref:10.2f}   max |compiled - torch| {diff:.1e}")


def build_copy(module):
    """A second module with the same weights, so the eager timing runs the uncompiled one."""
    import copy
    return copy.deepcopy(module)


if __name__ == "__main__":
    main()
