"""Linear layers whose weights kiln does not keep packed (decision 0120), in two parts:
1. weights kiln does not own: imported from NumPy (kiln.from_numpy) or through DLPack, or kiln
   weights with a live NumPy view. Their owner may write them without kiln seeing it, so kiln
   keeps no packed copy of them (weight_identity.h) and reads them as they are. F.linear with
   such a weight against the same weight owned by kiln and against PyTorch 2.13 with the same
   values; GFLOP/s and time ratios.
2. weights used once: nn.Linear layers under autocast(bfloat16), which casts every weight anew
   in each autocast region, kiln.nn against torch.nn; ms per pass and kiln's time over torch's.
All interleaved in one process.

    .venv/bin/python benchmarks/foreign_weights.py [--threads 2] [--dtypes f32,bf16]
"""
import argparse
import os
import sys

import numpy as np
import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import median, time_interleaved  # noqa: E402

SHAPES = [(16, 768, 3072), (128, 768, 3072), (128, 3072, 768), (512, 1024, 1024),
          (128, 4096, 4096)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtypes", default="f32,bf16")
    args = ap.parse_args()
    kiln.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    kF, tF = kiln.nn.functional, torch.nn.functional
    print(f"{'case':28s} {'kiln owned':>11s} {'kiln foreign':>13s} {'torch':>8s}  "
          f"foreign/torch time  foreign/owned time")
    with kiln.inference_mode(), torch.inference_mode():
        for dt in args.dtypes.split(","):
            tdt = {"f32": torch.float32, "bf16": torch.bfloat16}[dt]
            kdt = {"f32": kiln.float32, "bf16": kiln.bfloat16}[dt]
            for (M, K, N) in SHAPES:
                g = torch.Generator().manual_seed(M + K + N)
                tx = torch.randn(M, K, generator=g).to(tdt)
                tw = torch.randn(N, K, generator=g).to(tdt)
                tb = torch.randn(N, generator=g).to(tdt)
                kx = kiln.from_numpy(tx.float().numpy().copy()).to(kdt)
                kb = kiln.from_numpy(tb.float().numpy().copy()).to(kdt)
                owned = kiln.from_numpy(tw.float().numpy()).to(kdt).clone()  # kiln memory
                # float32: the NumPy array itself; bfloat16 (NumPy has none): torch's tensor
                # through DLPack, both foreign to kiln.
                foreign = kiln.from_numpy(tw.numpy()) if dt == "f32" else kiln.from_dlpack(tw)
                samples, _ = time_interleaved([
                    lambda: kF.linear(kx, owned, kb),
                    lambda: kF.linear(kx, foreign, kb),
                    lambda: tF.linear(tx, tw, tb),
                ], budget_s=0.5)
                t_own, t_for, t_torch = (median(s) for s in samples)
                gf = lambda t: 2 * M * N * K / t / 1e9  # noqa: E731
                print(f"{dt} {M}x{K}x{N:<18} {gf(t_own):8.0f} GF {gf(t_for):10.0f} GF "
                      f"{gf(t_torch):5.0f} GF  {t_for / t_torch:17.2f}x  {t_for / t_own:17.2f}x",
                      flush=True)
    autocast_part()


def autocast_part(layers=4):
    print(f"\n{'autocast(bfloat16), ' + str(layers) + ' x nn.Linear':34s} {'kiln':>9s} {'torch':>9s}"
          f"  kiln/torch time")
    for (M, K, N) in SHAPES[1:]:
        kl = [kiln.nn.Linear(K, N) for _ in range(layers)]
        tl = [torch.nn.Linear(K, N) for _ in range(layers)]
        kx, tx = kiln.randn(M, K), torch.randn(M, K)

        def k_pass():
            with kiln.no_grad(), kiln.autocast("cpu", dtype=kiln.bfloat16):
                for lin in kl:
                    lin(kx)

        def t_pass():
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                for lin in tl:
                    lin(tx)

        samples, _ = time_interleaved([k_pass, t_pass], budget_s=0.8)
        tk, tt = (median(s) for s in samples)
        print(f"{M}x{K}x{N:<28} {tk * 1e3:6.2f} ms {tt * 1e3:6.2f} ms  {tk / tt:14.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
