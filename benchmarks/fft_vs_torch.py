"""kiln.fft (kiln's own FFT engine, decision 0092) against PyTorch 2.13 (pocketfft in its CPU
wheel) in the same process: fft / rfft / irfft of one long signal (powers of two, a smooth
length and a prime that takes Bluestein's path), a batch of audio-sized frames, fft2 of an
image and an stft, float32 and float64. The two libraries' calls are timed interleaved
(harness.time_interleaved, so a busy machine slows both alike); prints the median time of each
and the ratio kiln / torch (below 1: kiln is faster). Not part of RESULTS.md.

    .venv/bin/python benchmarks/fft_vs_torch.py [--threads 2] [--dtype f32|f64] [name ...]
"""
import argparse
import os
import sys

import torch

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import time_interleaved, median  # noqa: E402


def cases(L, x1, xb, img, audio):
    """name -> thunk for library L on a long signal, a batch of frames, an image, audio."""
    window = L.hann_window(400, dtype=audio.dtype)
    return {
        "fft": lambda: L.fft.fft(x1),
        "rfft": lambda: L.fft.rfft(x1),
        "irfft": lambda: L.fft.irfft(L.fft.rfft(x1)),
        "rfft batch": lambda: L.fft.rfft(xb),
        "fft2": lambda: L.fft.fft2(img),
        "stft": lambda: L.stft(audio, 400, 160, window=window, return_complex=True),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "f64" else torch.float32
    print(f"{'case':28s} {'kiln ms':>10s} {'torch ms':>10s} {'kiln/torch':>10s}")
    g = torch.Generator().manual_seed(0)
    audio = torch.randn(16000 * 10, generator=g, dtype=dtype)  # 10 s at 16 kHz
    img = torch.randn(512, 512, generator=g, dtype=dtype)
    xb = torch.randn(1000, 512, generator=g, dtype=dtype)
    for n in (4096, 1 << 20, 3 ** 7 * 5 ** 3, 10007):
        x1 = torch.randn(n, generator=g, dtype=dtype)
        t_args = (x1, xb, img, audio)
        k_args = [kiln.from_numpy(t.numpy().copy()) for t in t_args]
        kc, tc = cases(kiln, *k_args), cases(torch, *t_args)
        for name in kc:
            if args.names and name not in args.names:
                continue
            if name in ("rfft batch", "fft2", "stft") and n != 4096:
                continue  # fixed shapes: once
            label = name if name in ("rfft batch", "fft2", "stft") else f"{name} n={n}"
            (ks, ts), _ = time_interleaved([kc[name], tc[name]])
            k, t = median(ks) * 1e3, median(ts) * 1e3
            print(f"{label:28s} {k:10.3f} {t:10.3f} {k / t:10.2f}", flush=True)


if __name__ == "__main__":
    main()
