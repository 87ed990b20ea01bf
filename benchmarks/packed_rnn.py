"""Recurrent layers over a PackedSequence: kiln's algorithm against two alternatives and torch.

kiln.nn.LSTM / GRU / RNN run packed input one run of equal batch size at a time (one C++ time
loop per run, layer and direction; python/kiln/nn/modules/rnn.py). This script times, on one
LSTM (identical weights everywhere), forward + backward and no-grad forward of:

  runs       kiln's module on the PackedSequence (the shipped algorithm)
  steps      every step a cell op (_nn.rnn_cell) over the shrinking batch, from Python
  groups     sequences grouped by length, the whole stack (_nn.rnn) once per group
  padded     kiln on the padded batch (not exact past each length; the floor to aim at)
  torch      torch 2.13's LSTM on the PackedSequence

    .venv/bin/python benchmarks/packed_rnn.py [--threads 2] [--batch 32] [--hidden 128]
"""
import argparse
import os
import random
import sys

import numpy as np
import torch

import kiln
from kiln._C import _nn
from kiln.nn.utils import rnn as krnn

sys.path.insert(0, os.path.dirname(__file__))
from harness import median, time_interleaved  # noqa: E402


def steps_forward(m, packed):
    """The per-step alternative: one _nn.rnn_cell call per step, layer and direction."""
    data, sizes = packed.data, [int(b) for b in packed.batch_sizes.tolist()]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    D, H = 2 if m.bidirectional else 1, m.hidden_size
    zeros = kiln.zeros(sizes[0], H)
    x, weights = data, m._weights()
    for layer in range(m.num_layers):
        outs = []
        for d in range(D):
            w = weights[layer * D + d]
            rows = [None] * len(sizes)
            h = c = None
            order = range(len(sizes) - 1, -1, -1) if d else range(len(sizes))
            for t in order:
                b = sizes[t]
                if h is None:
                    h, c = zeros[:b], zeros[:b]
                elif h.size(0) > b:  # forward: sequences ended (their finals dropped here)
                    h, c = h[:b], c[:b]
                elif h.size(0) < b:  # reverse: sequences start
                    h = kiln.cat([h, zeros[h.size(0):b]])
                    c = kiln.cat([c, zeros[c.size(0):b]])
                h, c = _nn.rnn_cell("LSTM", x[offsets[t]:offsets[t + 1]], h, c, *w)
                rows[t] = h
            outs.append(kiln.cat(rows))
        x = kiln.cat(outs, 1) if D == 2 else outs[0]
    return x


def groups_forward(m, packed):
    """The group alternative: the sequences of one length gathered into a dense batch and
    run through the whole stack at once; the outputs scattered back into packed order."""
    data, sizes = packed.data, [int(b) for b in packed.batch_sizes.tolist()]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    lengths = krnn._lengths_of(sizes)
    outs, rows = [], []
    i = 0
    while i < len(lengths):
        j = i
        while j < len(lengths) and lengths[j] == lengths[i]:
            j += 1
        n = lengths[i]
        idx = (offsets[:n, None] + np.arange(i, j)[None, :])  # [n, g] rows of data
        block = data.index_select(0, kiln.tensor(idx.reshape(-1))).reshape(n, j - i, -1)
        out, _, _ = _nn.rnn("LSTM", block, None, None, m._weights(), m.num_layers,
                            m.bidirectional, False, 0.0, False)
        outs.append(out.reshape(n * (j - i), -1))
        rows.append(idx.reshape(-1))
        i = j
    where = np.concatenate(rows)
    inverse = np.empty_like(where)
    inverse[where] = np.arange(len(where))
    return kiln.cat(outs).index_select(0, kiln.tensor(inverse))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--min-len", type=int, default=5)
    ap.add_argument("--max-len", type=int, default=100)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per system")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    random.seed(0)
    torch.manual_seed(0)

    lengths = [random.randint(args.min_len, args.max_len) for _ in range(args.batch)]
    t_mod = torch.nn.LSTM(args.input, args.hidden, args.layers, bidirectional=True)
    k_mod = kiln.nn.LSTM(args.input, args.hidden, args.layers, bidirectional=True)
    with kiln.no_grad():
        for name, p in k_mod.named_parameters():
            p.copy_(kiln.tensor(t_mod.state_dict()[name].numpy()))
    x = torch.randn(max(lengths), args.batch, args.input)
    xt, xk = x.clone().requires_grad_(), kiln.tensor(x.numpy()).requires_grad_()

    def t_pack():
        return torch.nn.utils.rnn.pack_padded_sequence(xt, lengths, enforce_sorted=False)

    def k_pack():
        return krnn.pack_padded_sequence(xk, lengths, enforce_sorted=False)

    # The alternatives must agree with the module before their times mean anything.
    ref = k_mod(k_pack())[0].data.detach().numpy()
    for alt in (steps_forward, groups_forward):
        got = alt(k_mod, k_pack()).detach().numpy()
        assert np.allclose(ref, got, atol=1e-5), alt.__name__
    # Compared padded: with equal lengths, torch's sort may order the batch differently.
    k_pad = krnn.pad_packed_sequence(k_mod(k_pack())[0])[0].detach().numpy()
    t_pad = torch.nn.utils.rnn.pad_packed_sequence(t_mod(t_pack())[0])[0].detach().numpy()
    assert np.allclose(k_pad, t_pad, atol=1e-5)

    systems = {
        "runs": lambda: k_mod(k_pack())[0].data,
        "steps": lambda: steps_forward(k_mod, k_pack()),
        "groups": lambda: groups_forward(k_mod, k_pack()),
        "padded": lambda: k_mod(xk)[0],
        "torch": lambda: t_mod(t_pack())[0].data,
    }

    def train(fn):
        return lambda: fn().sum().backward()

    def infer(fn, torch_side):
        def call():
            with (torch.no_grad() if torch_side else kiln.no_grad()):
                fn()
        return call

    print(f"LSTM {args.layers} layers bidirectional, input {args.input}, hidden {args.hidden}, "
          f"batch {args.batch}, lengths in [{args.min_len}, {args.max_len}] "
          f"({len(set(lengths))} distinct, {sum(lengths)} steps in all), float32, "
          f"{args.threads} threads")
    names = list(systems)
    for label, wrap in (("forward+backward", lambda n, f: train(f)),
                        ("no-grad forward", lambda n, f: infer(f, n == "torch"))):
        fns = [wrap(n, systems[n]) for n in names]
        samples, load = time_interleaved(fns, budget_s=args.budget, min_iters=5)
        cells = ", ".join(f"{n} {median(s) * 1e3:.1f} ms" for n, s in zip(names, samples))
        print(f"{label}: {cells} (other load {load:.2f} cores)")


if __name__ == "__main__":
    main()
