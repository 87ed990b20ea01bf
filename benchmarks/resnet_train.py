"""One ResNet-50 training step (train-mode BatchNorm, cross-entropy, backward, SGD with
momentum) with kiln.nn and torch.nn on identical weights, timed interleaved in one process, and
the ratio kiln / torch. Not part of `run.py`'s suite (the issue's training target is GPT-2);
it measures the convolution and batch-norm training paths (decisions 0050, 0051).

    python benchmarks/resnet_train.py [--batch 8] [--steps 4] [--threads 2] [--bf16]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

import kiln  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4, help="timed steps after one warm-up step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--bf16", action="store_true", help="weights and activations in bfloat16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)

    class Cfg:
        image = args.image
        resnet_batches = [args.batch]

    tm, km = models.twin(models.resnet50_cls, Cfg, init_std=0)
    if args.bf16:
        tm, km = tm.to(torch.bfloat16), km.to(kiln.bfloat16)
    tm.train()
    km.train()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    if args.bf16:
        x = x.to(torch.bfloat16)
    labels = torch.randint(0, 1000, (args.batch,), generator=g)
    kx, klabels = models.to_kiln(x), models.to_kiln(labels)
    topt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)
    kopt = kiln.optim.SGD(km.parameters(), lr=0.01, momentum=0.9)

    def step(lib, model, opt, inp, lab):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(inp).float(), lab)
        loss.backward()
        opt.step()
        return float(loss.item())

    times = {"kiln": [], "torch": []}
    losses = {"kiln": [], "torch": []}
    for i in range(args.steps + 1):
        for name, run in (("kiln", lambda: step(kiln, km, kopt, kx, klabels)),
                          ("torch", lambda: step(torch, tm, topt, x, labels))):
            t0 = time.perf_counter()
            losses[name].append(run())
            if i > 0:
                times[name].append(time.perf_counter() - t0)
    k, t = statistics.median(times["kiln"]), statistics.median(times["torch"])
    dt = "bf16" if args.bf16 else "fp32"
    print(f"resnet50 b{args.batch} {dt} training step (SGD momentum): kiln {k * 1e3:.0f} ms, "
          f"torch {t * 1e3:.0f} ms, kiln/torch {k / t:.2f}x (median of {args.steps})")
    print(f"first loss kiln {losses['kiln'][0]:.4f} torch {losses['torch'][0]:.4f}")


if __name__ == "__main__":
    main()
