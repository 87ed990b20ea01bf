"""Whole models with kiln.nn and with torch.nn on identical weights, timed interleaved in one
process (kiln, torch, kiln, torch, ...):

  bert     BERT-base-shaped encoder, batch 1, seq 128 (12 post-LN layers, d 768, 12 heads,
           ff 3072, erf GELU), built from nn.Embedding / Linear / LayerNorm and functional ops
  resnet   ResNet-50 (bottleneck v1.5), batch 1 and 16, eval-mode BatchNorm
  gpt2     GPT-2-small-shaped decoder (12 pre-LN layers, d 768, vocab 50257, tied LM head):
           prefill 128 tokens, then 64 greedy decode steps with a KV cache
  train    one GPT-2-small training step, batch 4, seq 256: forward, cross-entropy, backward,
           AdamW

The model code below is written once against the shared torch/kiln API and instantiated with
either library; torch's initial weights are copied into kiln (load_state_dict), and the outputs
are compared before timing. fp32, and bf16 (weights and activations converted to bfloat16, which
is faster than autocast for PyTorch on CPU) where both libraries run it.

    python benchmarks/models.py --json out.json [--threads 2] [--quick] [--models bert,gpt2]
"""
import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (record, time_interleaved, median, write_json, ForeignLoad,  # noqa: E402
                     on_full_cores)

try:
    import kiln
    KILN_ERROR = None
except Exception as e:  # the package may be mid-rebuild or broken: report, do not crash
    kiln = None
    KILN_ERROR = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


# ----------------------------------------------------------------------------------------
# Models, written once for both libraries (lib is torch or kiln)
# ----------------------------------------------------------------------------------------

def bert_cls(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class Layer(nn.Module):
        def __init__(self, d, h, ff):
            super().__init__()
            self.h, self.dh = h, d // h
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ln1 = nn.LayerNorm(d, eps=1e-12)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.ln2 = nn.LayerNorm(d, eps=1e-12)

        def forward(self, x):
            B, T, D = x.shape
            q = self.q(x).view(B, T, self.h, self.dh).transpose(1, 2)
            k = self.k(x).view(B, T, self.h, self.dh).transpose(1, 2)
            v = self.v(x).view(B, T, self.h, self.dh).transpose(1, 2)
            att = lib.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh))
            att = att.softmax(dim=-1)
            y = lib.matmul(att, v).transpose(1, 2).reshape(B, T, D)
            x = self.ln1(x + self.o(y))
            return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))

    class Bert(nn.Module):
        def __init__(self, vocab=30522, d=768, layers=12, h=12, ff=3072, max_pos=512):
            super().__init__()
            self.word = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(max_pos, d)
            self.ln = nn.LayerNorm(d, eps=1e-12)
            self.layers = nn.ModuleList([Layer(d, h, ff) for _ in range(layers)])

        def forward(self, ids):
            T = ids.shape[1]
            x = self.ln(self.word(ids) + self.pos(lib.arange(T).unsqueeze(0)))
            for layer in self.layers:
                x = layer(x)
            return x

    return Bert(vocab=cfg.bert_vocab, d=cfg.d, layers=cfg.bert_layers, h=cfg.heads, ff=4 * cfg.d)


def gpt2_cls(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, d, h, ctx):
            super().__init__()
            self.h, self.dh = h, d // h
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.c_fc = nn.Linear(d, 4 * d)
            self.mlp_proj = nn.Linear(4 * d, d)
            self.register_buffer("causal", lib.ones(ctx, ctx, dtype=lib.bool).tril(), persistent=False)

        def forward(self, x, cache=None, pos=0):
            B, T, D = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
            q = q.view(B, T, self.h, self.dh).transpose(1, 2)
            k = k.view(B, T, self.h, self.dh).transpose(1, 2)
            v = v.view(B, T, self.h, self.dh).transpose(1, 2)
            if cache is not None:
                ck, cv = cache
                ck[:, :, pos:pos + T] = k
                cv[:, :, pos:pos + T] = v
                k, v = ck[:, :, :pos + T], cv[:, :, :pos + T]
            S = k.shape[2]
            att = lib.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh))
            if T > 1:
                att = att.masked_fill(~self.causal[pos:pos + T, :S], float("-inf"))
            y = lib.matmul(att.softmax(dim=-1), v).transpose(1, 2).reshape(B, T, D)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self, vocab=50257, d=768, layers=12, h=12, ctx=1024):
            super().__init__()
            self.d, self.h, self.ctx, self.nl = d, h, ctx, layers
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block(d, h, ctx) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)

        def new_cache(self, B, dtype):
            dh = self.d // self.h
            return [(lib.zeros(B, self.h, self.ctx, dh, dtype=dtype),
                     lib.zeros(B, self.h, self.ctx, dh, dtype=dtype)) for _ in range(self.nl)]

        def forward(self, idx, cache=None, pos=0, last_only=False):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(lib.arange(pos, pos + T).unsqueeze(0))
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if cache is None else cache[i], pos)
            x = self.ln_f(x)
            if last_only:
                x = x[:, -1:, :]
            return F.linear(x, self.wte.weight)

    return GPT2(vocab=cfg.vocab, d=cfg.d, layers=cfg.gpt2_layers, h=cfg.heads)


def resnet50_cls(lib, cfg):
    nn = lib.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride, down):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout)) if down else None

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            y = self.bn1(self.conv1(x)).relu()
            y = self.bn2(self.conv2(y)).relu()
            return (self.bn3(self.conv3(y)) + idt).relu()

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1, i == 0))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.avg = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            x = self.pool(self.bn1(self.conv1(x)).relu())
            x = self.avg(self.blocks(x))
            return self.fc(x.flatten(1))

    return ResNet50()


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------

def to_kiln(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    return kiln.from_numpy(t.numpy().copy())


def to_torch(t):
    if t.dtype == kiln.bfloat16:
        t = t.float()
    return torch.from_numpy(t.numpy().copy())


def twin(builder, cfg, seed=0, init_std=0.02):
    """The torch model (seeded init) and a kiln model holding the same weights."""
    torch.manual_seed(seed)
    tm = builder(torch, cfg)
    for m in tm.modules():  # GPT-2/BERT-style init where applicable
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)) and init_std:
            torch.nn.init.normal_(m.weight, 0.0, init_std)
    km = builder(kiln, cfg)
    km.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
    return tm.eval(), km.eval()


def max_diff(kout, tout):
    return (to_torch(kout).float() - tout.float()).abs().max().item()


def kiln_linear_gflops(dtype):
    """kiln's matmul speed for a BERT-sized linear (128 x 768 x 768) in dtype."""
    x = kiln.randn(128, 768).to(dtype)
    w = kiln.randn(768, 768).to(dtype)
    kiln.nn.functional.linear(x, w)
    t = time.perf_counter()
    kiln.nn.functional.linear(x, w)
    return 2 * 128 * 768 * 768 / (time.perf_counter() - t) / 1e9


class Bench:
    def __init__(self, args):
        self.args, self.out = args, []

    def add(self, name, system, metric, unit, value, n=0, foreign=-1.0, note="", hib=False,
            scaling=-1.0):
        self.out.append(record("models", name, system, metric, unit, value, higher_is_better=hib,
                               n=n, foreign_cores=foreign, note=note, thread_scaling=scaling))

    def on_full_cores(self, run):
        """run() re-timed (bounded) while the host shares one core between our two threads
        (harness.on_full_cores); quick runs time once. Returns (result, thread scaling)."""
        return on_full_cores(run, self.args.threads, 1 if self.args.quick else 3)

    def note(self, name, system, text):
        print(f"  {name:34s} {system}: {text}", flush=True)
        self.out.append(record("models", name, system, "note", "", 0, note=text))

    def pair(self, name, kfn, tfn, metric="latency_ms", diff=None, note=""):
        """Times kfn and tfn interleaved; records medians in ms and prints the ratio."""
        a = self.args
        fns = [f for f in (kfn, tfn) if f is not None]
        (samples, foreign), scaling = self.on_full_cores(
            lambda: time_interleaved(fns, a.budget, a.min_iters, a.max_iters, warmup=a.warmup))
        res = {}
        for sys_name, f in (("kiln", kfn), ("torch", tfn)):
            if f is None:
                continue
            s = samples[fns.index(f)]
            res[sys_name] = median(s) * 1e3
            self.add(name, sys_name, metric, "ms", res[sys_name], n=len(s), foreign=foreign,
                     scaling=scaling, note=(f"max |kiln - torch| = {diff:.2e}" if diff is not None and sys_name == "kiln" else "")
                     + note)
        k, t = res.get("kiln"), res.get("torch")
        ratio = f"{k / t:6.2f}x" if k and t else "     -"
        print(f"  {name:34s} kiln {k if k else float('nan'):9.2f} ms  torch {t if t else float('nan'):9.2f} ms"
              f"  kiln/torch {ratio}  load {foreign:.2f}  2-thread scaling {scaling:.2f}"
              + (f"  max|diff| {diff:.1e}" if diff is not None else ""), flush=True)


# ----------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------

def bf16_guard(b, name):
    """kiln bf16 models only run if kiln's bf16 matmul is not the scalar reference loop."""
    rate = kiln_linear_gflops(kiln.bfloat16)
    if rate < b.args.min_bf16_gflops:
        b.note(name, "kiln", f"bf16 not measured: kiln's bf16 matmul runs at {rate:.2f} GFLOP/s "
               f"(scalar reference loop; fp32 is {kiln_linear_gflops(kiln.float32):.1f})")
        return False
    return True


def pair_autocast(b, name, km, kx, tm, tx):
    """Times the float32 models under autocast(bfloat16), the way PyTorch users run bf16 on a
    CPU: kiln keeps each weight's rounding packed across forwards (decision 0121), PyTorch
    casts every weight on every forward. Rows outside the issue's targets (no " bf16" in
    their names)."""
    if not bf16_guard(b, name):
        return

    def k_amp():
        with kiln.inference_mode(), kiln.autocast("cpu", dtype=kiln.bfloat16):
            return km(kx)

    def t_amp():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            return tm(tx)
    b.pair(name, k_amp, t_amp, diff=max_diff(k_amp(), t_amp()))


def sec_bert(b):
    cfg = b.args
    tm, km = twin(bert_cls, cfg)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.bert_vocab, (1, cfg.seq), generator=g)
    kids = kiln.from_numpy(ids.numpy().copy())
    name = f"bert_b1_s{cfg.seq}" + ("" if cfg.bert_layers == 12 else f"_L{cfg.bert_layers}_d{cfg.d}")
    for dt in ("fp32", "bf16"):
        if dt == "bf16":
            tm = tm.to(torch.bfloat16)
        with torch.inference_mode(), kiln.inference_mode():
            tref = tm(ids)
            if dt == "bf16" and not bf16_guard(b, f"{name} bf16"):
                b.pair(f"{name} bf16", None, lambda: tm(ids))
                continue
            if dt == "bf16":
                km = km.to(kiln.bfloat16)
            d = max_diff(km(kids), tref)
            b.pair(f"{name} {dt}", lambda: km(kids), lambda: tm(ids), diff=d)
        if dt == "fp32":
            pair_autocast(b, f"{name} autocast(bfloat16)", km, kids, tm, ids)


def sec_resnet(b):
    missing = [c for c in ("Conv2d", "BatchNorm2d", "MaxPool2d", "AdaptiveAvgPool2d") if not hasattr(kiln.nn, c)]
    cfg = b.args
    if missing:
        for bs in cfg.resnet_batches:
            b.note(f"resnet50_b{bs} fp32", "kiln", f"not available: kiln.nn lacks {', '.join(missing)}")
        return
    tm, km = twin(resnet50_cls, cfg, init_std=0)
    for dt in ("fp32", "bf16"):
        if dt == "bf16":
            if not bf16_guard(b, "resnet50 bf16"):
                break
            tm, km = tm.to(torch.bfloat16), km.to(kiln.bfloat16)
        # NCHW, then both models and inputs channels-last (as torch users run CNNs on CPU)
        for fmt in ("", " channels_last"):
            if fmt:
                tm = tm.to(memory_format=torch.channels_last)
                km = km.to(memory_format=kiln.channels_last)
            for bs in cfg.resnet_batches:
                g = torch.Generator().manual_seed(2)
                x = torch.randn(bs, 3, cfg.image, cfg.image, generator=g)
                if dt == "bf16":
                    x = x.to(torch.bfloat16)
                kx = to_kiln(x)
                if fmt:
                    x = x.to(memory_format=torch.channels_last)
                    kx = kx.to(memory_format=kiln.channels_last)
                with torch.inference_mode(), kiln.inference_mode():
                    d = max_diff(km(kx), tm(x))
                    b.pair(f"resnet50_b{bs} {dt}{fmt}", lambda: km(kx), lambda: tm(x), diff=d)
                if dt == "fp32" and bs == 1:
                    pair_autocast(b, f"resnet50_b{bs} autocast(bfloat16){fmt}", km, kx, tm, x)
        tm = tm.to(memory_format=torch.contiguous_format)
        km = km.to(memory_format=kiln.contiguous_format)


def sec_gpt2(b):
    cfg = b.args
    tm, km = twin(gpt2_cls, cfg)
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, cfg.vocab, (1, cfg.prefill), generator=g)
    kprompt = kiln.from_numpy(prompt.numpy().copy())
    base = f"gpt2s_prefill{cfg.prefill}_decode{cfg.decode}" + ("" if cfg.gpt2_layers == 12 else f"_L{cfg.gpt2_layers}_d{cfg.d}")

    def generate(lib, model, idx, dtype, times, n_decode, amp=False):
        if amp:  # the float32 model under autocast(bfloat16) (decision 0121)
            with lib.autocast("cpu", dtype=lib.bfloat16):
                return generate(lib, model, idx, dtype, times, n_decode)
        cache = model.new_cache(1, dtype)
        t0 = time.perf_counter()
        logits = model(idx, cache, 0, last_only=True)
        nxt = logits[:, -1].argmax(-1, keepdim=True) if lib is torch else logits[:, -1].argmax(-1, True)
        t1 = time.perf_counter()
        toks = []
        for i in range(n_decode):
            logits = model(nxt, cache, cfg.prefill + i, last_only=True)
            nxt = logits[:, -1].argmax(-1, keepdim=True) if lib is torch else logits[:, -1].argmax(-1, True)
            toks.append(int(nxt.item()))
        t2 = time.perf_counter()
        times.append((t1 - t0, (t2 - t1) / max(n_decode, 1)))
        return toks

    # "autocast(bfloat16)": the float32 models under autocast, as PyTorch users run bf16 on a
    # CPU; a row of the models table outside the targets (no " bf16" in its name).
    for dt in ("fp32", "autocast(bfloat16)", "bf16"):
        amp = dt.startswith("autocast")
        tdt, kdt = (torch.float32, kiln.float32) if dt != "bf16" else (torch.bfloat16, kiln.bfloat16)
        if dt == "bf16":
            tm = tm.to(torch.bfloat16)
        with torch.inference_mode(), kiln.inference_mode():
            run_kiln = True
            if dt != "fp32":
                run_kiln = bf16_guard(b, f"{base} {dt}")
                if run_kiln and dt == "bf16":
                    km = km.to(kiln.bfloat16)

            def timed_runs():
                kt, tt = [], []
                same = None
                foreign = ForeignLoad()
                # Two warm-up runs of 4 decode steps: a Linear weight is packed at its second
                # use (decision 0120), which belongs to no timed run.
                for r in range(cfg.gen_runs + 2):
                    nd = min(4, cfg.decode) if r < 2 else cfg.decode
                    ttoks = generate(torch, tm, prompt, tdt, tt, nd, amp)
                    if run_kiln:
                        ktoks = generate(kiln, km, kprompt, kdt, kt, nd, amp)
                        same = sum(x == y for x, y in zip(ktoks, ttoks))
                return kt, tt, same, foreign.cores()

            (kt, tt, same, fc), scaling = b.on_full_cores(timed_runs)
            res = {}
            for sys_name, ts in (("kiln", kt[2:]), ("torch", tt[2:])):
                if not ts:
                    continue
                pre, dec = median([x[0] for x in ts]) * 1e3, median([x[1] for x in ts]) * 1e3
                res[sys_name] = (pre, dec)
                note = f"greedy tokens equal to torch's: {same}/{cfg.decode}" if sys_name == "kiln" else ""
                for part, v in (("prefill", pre), ("decode_step", dec)):
                    b.add(f"{base} {dt} {part}", sys_name, "latency_ms", "ms", v, n=len(ts),
                          foreign=fc, note=note, scaling=scaling)
            for part, i in (("prefill", 0), ("decode_step", 1)):
                k = res.get("kiln", (None, None))[i]
                t = res["torch"][i]
                ratio = f"{k / t:6.2f}x" if k else "     -"
                ks = f"{k:9.2f}" if k else "      n/a"
                print(f"  {base + ' ' + dt + ' ' + part:34s} kiln {ks} ms  torch {t:9.2f} ms  kiln/torch {ratio}"
                      f"  load {fc:.2f}  2-thread scaling {scaling:.2f}" + (f"  same greedy tokens {same}/{cfg.decode}" if k and i == 1 else ""),
                      flush=True)


def sec_train(b):
    cfg = b.args
    tm, km = twin(gpt2_cls, cfg)
    tm.train()
    km.train()
    g = torch.Generator().manual_seed(4)
    B, T = cfg.train_batch, cfg.train_seq
    data = torch.randint(0, cfg.vocab, (B, T + 1), generator=g)
    tx, ty = data[:, :-1], data[:, 1:]
    kx, ky = kiln.from_numpy(tx.numpy().copy()), kiln.from_numpy(ty.numpy().copy())
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-4, weight_decay=0.01)
    kopt = kiln.optim.AdamW(km.parameters(), lr=1e-4, weight_decay=0.01)
    losses = {"kiln": [], "torch": []}

    def tstep():
        topt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(tm(tx).reshape(B * T, -1), ty.reshape(-1))
        loss.backward()
        topt.step()
        losses["torch"].append(loss.item())

    def kstep():
        kopt.zero_grad(set_to_none=True)
        loss = kiln.nn.functional.cross_entropy(km(kx).reshape(B * T, -1), ky.reshape(-1))
        loss.backward()
        kopt.step()
        losses["kiln"].append(loss.item())

    name = f"gpt2s_train_b{B}_s{T}" + ("" if cfg.gpt2_layers == 12 else f"_L{cfg.gpt2_layers}_d{cfg.d}")
    save = (cfg.budget, cfg.min_iters, cfg.max_iters, cfg.warmup)
    cfg.budget, cfg.min_iters, cfg.max_iters, cfg.warmup = 0.0, cfg.train_steps, cfg.train_steps, 1
    b.pair(f"{name} fp32 AdamW step", kstep, tstep)
    cfg.budget, cfg.min_iters, cfg.max_iters, cfg.warmup = save
    print(f"    losses kiln {[round(x, 4) for x in losses['kiln']]}  torch {[round(x, 4) for x in losses['torch']]}")
    b.out[-2]["note"] = f"losses {[round(x, 4) for x in losses['kiln']]} vs torch {[round(x, 4) for x in losses['torch']]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny shapes (2 layers, short sequences)")
    ap.add_argument("--models", default="bert,gpt2,train,resnet")
    ap.add_argument("--budget", type=float, default=None, help="seconds per model and system")
    ap.add_argument("--min-iters", type=int, default=None)
    ap.add_argument("--max-iters", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--gen-runs", type=int, default=None, help="timed generate() runs per system")
    ap.add_argument("--train-steps", type=int, default=None)
    ap.add_argument("--min-bf16-gflops", type=float, default=5.0,
                    help="skip kiln bf16 models when its bf16 linear is slower than this")
    args = ap.parse_args()
    q = args.quick
    args.seq, args.bert_layers = (16, 2) if q else (128, 12)
    args.d, args.heads = (64, 4) if q else (768, 12)
    args.bert_vocab, args.vocab = (512, 512) if q else (30522, 50257)
    args.prefill, args.decode, args.gpt2_layers = (8, 4, 2) if q else (128, 64, 12)
    args.train_batch, args.train_seq = (1, 16) if q else (4, 256)
    args.resnet_batches, args.image = ((1,), 32) if q else ((1, 16), 224)
    if q and 'resnet' in args.models:  # ResNet-50 is heavy even at 32x32: the smoke run builds it only once
        pass
    args.budget = args.budget if args.budget is not None else (0.0 if q else 3.0)
    args.min_iters = args.min_iters or (1 if q else 5)
    args.max_iters = args.max_iters or (1 if q else 30)
    args.warmup = 1 if q else args.warmup
    # Five timed generate() runs per system: each gives one prefill sample, and with two the
    # prefill's median moved by a third between suite runs on a noisy host.
    args.gen_runs = args.gen_runs or (1 if q else 5)
    args.train_steps = args.train_steps or (1 if q else 3)
    torch.set_num_threads(args.threads)
    b = Bench(args)
    print(f"\n== models: kiln.nn vs torch.nn {torch.__version__} on identical weights "
          f"({args.threads} threads{', quick shapes' if q else ''})", flush=True)
    if kiln is None:
        b.note("models", "kiln", f"kiln Python package not importable: {KILN_ERROR}")
    else:
        sections = {"bert": sec_bert, "resnet": sec_resnet, "gpt2": sec_gpt2, "train": sec_train}
        for m in args.models.split(","):
            try:
                sections[m](b)
            except Exception as e:  # one model failing must not hide the others
                msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                b.note(m, "kiln", f"failed: {msg}")
    write_json(args.json, b.out, torch=torch.__version__, threads=args.threads)


if __name__ == "__main__":
    main()
