"""LLM decoding: kiln.llm against llama.cpp (llama-cpp-python) and PyTorch 2.13 + transformers
on the same GGUF file, in one process, two threads.

A TinyLlama-1.1B-shaped model with random weights (benchmarks/llm_gguf_writer.py; nothing can
be downloaded here) is written as Q8_0 and BF16 GGUF files. For each file and system: the
prefill time of a prompt and the decode rate of greedy tokens through the key/value cache,
rounds of the systems interleaved (A B C A B C ...) so that the host's drift hits all alike;
medians printed with kiln / peer ratios (decode: tokens/s ratio, higher is better for kiln;
prefill: time ratio, lower is better for kiln).

Peers at their best: llama.cpp through llama-cpp-python (PyPI; compiled from source with
GGML_NATIVE, so AVX-512 VNNI / BF16 here), its low-level eval loop (no sampling overhead);
PyTorch 2.13 with set_num_threads(2), the transformers Llama loaded from the same GGUF file
in bfloat16 (faster than the float32 transformers advises for quantised files), manual greedy
loop over the returned cache. A peer that is not installed is reported as missing.

usage: python benchmarks/llm_decode.py [--layers 22] [--prompt 16] [--new 32] [--rounds 3]
       [--types q8_0,bf16] [--systems kiln,llama.cpp,torch] [--dir /tmp/kiln-llm-bench]
"""
import argparse
import os
import warnings
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ForeignLoad  # noqa: E402
from llm_gguf_writer import write_llama_gguf  # noqa: E402


def prompt_ids(n, vocab):
    rng = np.random.default_rng(1)
    return [1] + [int(t) for t in rng.integers(259, vocab, n - 1)]


class KilnRunner:
    name = "kiln"

    def __init__(self, path, threads):
        import kiln
        import kiln.llm
        kiln.set_num_threads(threads)
        self.kiln = kiln
        dtype = kiln.bfloat16 if "bf16" in os.path.basename(path) else kiln.float32
        self.model = kiln.llm.LlamaModel.from_gguf(path, dtype=dtype)

    def run(self, prompt, n_new):
        kiln, m = self.kiln, self.model
        with kiln.inference_mode():
            cache = m.new_cache(1, len(prompt) + n_new)
            t0 = time.perf_counter()
            logits = m.forward(kiln.tensor([prompt]), cache, 0, last_only=True)
            tok = int(logits[0, -1].argmax())
            t1 = time.perf_counter()
            out = [tok]
            for i in range(n_new - 1):
                logits = m.forward(kiln.tensor([[tok]]), cache, len(prompt) + i)
                tok = int(logits[0, -1].argmax())
                out.append(tok)
            t2 = time.perf_counter()
        return t1 - t0, (n_new - 1) / (t2 - t1), out


class LlamaCppRunner:
    name = "llama.cpp"

    def __init__(self, path, threads):
        import llama_cpp
        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(path, n_ctx=1024, n_batch=512, n_threads=threads,
                                   n_threads_batch=threads, verbose=False)
        self.vocab = self.llm.n_vocab()
        self.version = llama_cpp.__version__

    def _argmax(self):
        p = self.lc.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return int(np.ctypeslib.as_array(p, shape=(self.vocab,)).argmax())

    def run(self, prompt, n_new):
        llm = self.llm
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        tok = self._argmax()
        t1 = time.perf_counter()
        out = [tok]
        for _ in range(n_new - 1):
            llm.eval([tok])
            tok = self._argmax()
            out.append(tok)
        t2 = time.perf_counter()
        return t1 - t0, (n_new - 1) / (t2 - t1), out


class TorchRunner:
    name = "torch"

    def __init__(self, path, threads):
        import torch
        from transformers import AutoModelForCausalLM
        torch.set_num_threads(threads)
        self.torch = torch
        # bfloat16 weights: transformers advises float32 for a quantised GGUF (it keeps the
        # blocks packed and computes in float32), but bfloat16 decoded 2x faster here
        # (2-layer Q8_0 file: 79.7 against 39.6 tokens/s).
        self.model = AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.bfloat16).eval()
        self.version = torch.__version__

    def run(self, prompt, n_new):
        torch, m = self.torch, self.model
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = m(torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
            tok = int(out.logits[0, -1].argmax())
            t1 = time.perf_counter()
            past, toks = out.past_key_values, [tok]
            for _ in range(n_new - 1):
                out = m(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = int(out.logits[0, -1].argmax())
                toks.append(tok)
            t2 = time.perf_counter()
        return t1 - t0, (n_new - 1) / (t2 - t1), toks


RUNNERS = {"kiln": KilnRunner, "llama.cpp": LlamaCppRunner, "torch": TorchRunner}


def bench_file(path, qtype, args):
    runners = []
    for name in args.systems.split(","):
        try:
            runners.append(RUNNERS[name](path, args.threads))
        except Exception as e:  # a missing peer is reported, not hidden
            print(f"  {name}: MISSING ({type(e).__name__}: {str(e)[:120]})", flush=True)
    prompt = prompt_ids(args.prompt, 32000)
    for r in runners:  # warm-up (page in the weights, build caches)
        r.run(prompt, 4)
    pre = {r.name: [] for r in runners}
    dec = {r.name: [] for r in runners}
    first = {}
    load = ForeignLoad()
    for _ in range(args.rounds):
        for r in runners:
            p, d, toks = r.run(prompt, args.new)
            pre[r.name].append(p)
            dec[r.name].append(d)
            first.setdefault(r.name, toks[:8])
    foreign = load.cores()
    print(f"\n== {qtype.upper()} file, prompt {args.prompt} tokens, {args.new} new tokens, "
          f"{args.threads} threads, median of {args.rounds} (other load {foreign:.2f} cores)")
    med = {n: (statistics.median(pre[n]), statistics.median(dec[n])) for n in pre}
    for n, (p, d) in med.items():
        line = f"  {n:10s} prefill {p * 1e3:8.1f} ms   decode {d:7.2f} tokens/s"
        if n != "kiln" and "kiln" in med:
            kp, kd = med["kiln"]
            line += f"   kiln/{n}: decode {kd / d:5.2f}x, prefill time {kp / p:5.2f}x"
        print(line, flush=True)
    if "kiln" in first:
        for n, toks in first.items():
            if n != "kiln":
                same = sum(a == b for a, b in zip(first["kiln"], toks))
                print(f"  first 8 greedy tokens equal to kiln's: {n} {same}/8 (random weights: "
                      "near-ties diverge)")
    return med


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="q8_0,bf16")
    ap.add_argument("--systems", default="kiln,llama.cpp,torch")
    ap.add_argument("--dir", default="/tmp/kiln-llm-bench")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    import platform
    print(f"CPU: {platform.processor() or platform.machine()}; TinyLlama shape, {args.layers} layers")
    for qtype in args.types.split(","):
        path = os.path.join(args.dir, f"llama-{args.layers}l-{qtype}.gguf")
        if not os.path.exists(path):
            t = time.time()
            write_llama_gguf(path, qtype, layers=args.layers)
            print(f"wrote {path} ({os.path.getsize(path) / 1e9:.2f} GB) in {time.time() - t:.0f} s")
        bench_file(path, qtype, args)


if __name__ == "__main__":
    main()
