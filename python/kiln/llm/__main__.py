"""python -m kiln.llm: text generation and file inspection for GGUF models.

    python -m kiln.llm generate MODEL.gguf "Once upon a time" [-n 128] [--temperature 0.8]
        [--top-k 40] [--top-p 0.95] [--repetition-penalty 1.1] [--seed 0] [--threads 2]
        [--dtype float32|bfloat16] [--dequantize] [--no-bos]
    python -m kiln.llm info MODEL.gguf
    python -m kiln.llm convert HF_FOLDER OUT.gguf [--type f32|f16|bf16|q8_0|q4_0]

generate streams the text as it is produced, then prints the prompt's and the decode's speed
(to stderr). Greedy unless --temperature is given. convert writes a Hugging Face Llama /
Qwen2 / Mistral checkpoint folder as a GGUF file (kiln.llm.convert).
"""
import argparse
import sys
import time


def _cmd_info(args):
    from ..gguf import GGUFReader
    f = GGUFReader(args.model)
    md = f.metadata
    print(f"{args.model}: GGUF v{f.version}, {len(f.tensor_names)} tensors, {len(md)} metadata keys")
    for k, v in md.items():
        if isinstance(v, list):
            head = ", ".join(repr(x) for x in v[:4])
            print(f"  {k} = [{head}{', ...' if len(v) > 4 else ''}] ({len(v)} items)")
        else:
            print(f"  {k} = {v!r}")
    by_type = {}
    for n in f.tensor_names:
        i = f.tensor_info(n)
        t = by_type.setdefault(i.type, [0, 0])
        t[0] += 1
        t[1] += i.nbytes
    for t, (count, nbytes) in sorted(by_type.items()):
        print(f"  {count:4d} tensors of type {t:5s} {nbytes / 1e6:10.1f} MB")


def _cmd_generate(args):
    import kiln
    from .generate import generate
    from .loader import load
    if args.threads:
        kiln.set_num_threads(args.threads)
    dtype = {None: None, "float32": kiln.float32, "bfloat16": kiln.bfloat16}[args.dtype]
    t0 = time.perf_counter()
    model, tok = load(args.model, dtype=dtype, dequantize=args.dequantize, device=args.device)
    if tok is None:
        raise ValueError(f"{args.model} has no tokenizer (no tokenizer.ggml.model key); "
                         f"generate needs one to encode the prompt")
    print(f"[loaded {args.model} in {time.perf_counter() - t0:.1f} s: {model.config.n_layers} layers, "
          f"dim {model.config.dim}, vocab {model.config.vocab_size}]", file=sys.stderr)
    ids = tok.encode(args.prompt, add_bos=False if args.no_bos else None)
    if not ids:
        ids = [tok.bos_id] if tok.bos_id is not None else []
    stream = generate(model, ids, args.n, temperature=args.temperature, top_k=args.top_k,
                      top_p=args.top_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
                      eos_id=tok.eog_ids or None)
    text = tok.stream_decoder()
    sys.stdout.write(args.prompt)
    with kiln.inference_mode():
        for t in stream:
            if not tok.is_eog(t):
                sys.stdout.write(text.add(t))
                sys.stdout.flush()
    sys.stdout.write(text.flush() + "\n")
    s = stream.stats
    print(f"[prompt {s.prompt_tokens} tokens in {s.prefill_ms:.0f} ms; {s.generated_tokens} tokens "
          f"at {s.decode_tokens_per_s:.1f} tokens/s; stopped by {s.stop_reason}]", file=sys.stderr)


def _cmd_convert(args):
    import os
    from .convert import convert
    t0 = time.perf_counter()
    written = convert(args.folder, args.out, type=args.type)
    by_type = {}
    for ggml_type in written.values():
        by_type[ggml_type] = by_type.get(ggml_type, 0) + 1
    types = ", ".join(f"{count} {t}" for t, count in sorted(by_type.items()))
    print(f"wrote {args.out}: {len(written)} tensors ({types}), "
          f"{os.path.getsize(args.out) / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kiln.llm", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="generate text from a prompt")
    g.add_argument("model")
    g.add_argument("prompt")
    g.add_argument("-n", type=int, default=128, help="new tokens at most (default 128)")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-k", type=int, default=None)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--repetition-penalty", type=float, default=None)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--threads", type=int, default=None)
    g.add_argument("--dtype", choices=["float32", "bfloat16"], default=None)
    g.add_argument("--device", default="cpu", help="cpu (default) or xpu (the GPU backend)")
    g.add_argument("--dequantize", action="store_true",
                   help="widen quantised weights to float (faster for K-quant files)")
    g.add_argument("--no-bos", action="store_true", help="do not add the BOS token")
    i = sub.add_parser("info", help="print a GGUF file's metadata and tensor types")
    i.add_argument("model")
    c = sub.add_parser("convert", help="write a Hugging Face checkpoint folder as a GGUF file")
    c.add_argument("folder", help="folder with config.json and *.safetensors")
    c.add_argument("out", help="the GGUF file to write")
    c.add_argument("--type", choices=["f32", "f16", "bf16", "q8_0", "q4_0"], default=None,
                   help="the matrices' type (default: the checkpoint's own float type)")
    args = ap.parse_args(argv)
    commands = {"generate": _cmd_generate, "info": _cmd_info, "convert": _cmd_convert}
    try:
        commands[args.cmd](args)
    except (ValueError, TypeError, NotImplementedError, OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
