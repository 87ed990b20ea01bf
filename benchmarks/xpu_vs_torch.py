"""kiln's xpu (OpenCL) backend against PyTorch on the same machine, in one script.

Runs `kiln bench --sections xpu` (the C++ figures), then the same cases in PyTorch on its GPU
(CUDA when present, else the CPU, which is then a different device and says so), and prints
kiln / torch for each. Both time `reps` queued ops per synchronisation, median of rounds.

    python benchmarks/xpu_vs_torch.py [--kiln build/release/kiln] [--quick] [--json out.json]
    python benchmarks/xpu_vs_torch.py --render out.json [--note TEXT] > benchmarks/RESULTS-xpu.md

--render writes the markdown table of a saved run (the device machine's runs come back as
JSON; RESULTS-xpu.md is rendered from one).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def torch_case(torch, dev, name, quick):
    """A zero-argument callable running the case named by kiln's bench, and its work size."""
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    m = re.match(r"matmul (\w+) (\d+)$", name)
    if m:
        n = int(m.group(2))
        a = torch.randn(n, n, device=dev).to(dt[m.group(1)])
        b = torch.randn(n, n, device=dev).to(dt[m.group(1)])
        return (lambda: torch.matmul(a, b)), 2.0 * n ** 3 / 1e12
    m = re.match(r"linear M=1 (\w+) (\d+)x(\d+)$", name)
    if m:
        k, n = int(m.group(2)), int(m.group(3))
        x = torch.randn(1, k, device=dev).to(dt[m.group(1)])
        w = torch.randn(n, k, device=dev).to(dt[m.group(1)])
        return (lambda: torch.matmul(x, w.t())), n * k * w.element_size() / 1e9
    m = re.match(r"conv2d (\w+) (\d+)x(\d+)x(\d+)x(\d+) k3$", name)
    if m:
        nb, c, h, w_ = (int(m.group(i)) for i in range(2, 6))
        x = torch.randn(nb, c, h, w_, device=dev).to(dt[m.group(1)])
        w = torch.randn(c, c, 3, 3, device=dev).to(dt[m.group(1)])
        return (lambda: torch.nn.functional.conv2d(x, w, padding=1)), 2.0 * nb * c * h * w_ * c * 9 / 1e12
    n = (1 << 16) if quick else (1 << 26)
    cols = 4096
    x = torch.randn(n // cols, cols, device=dev)
    y = torch.randn(n // cols, cols, device=dev)
    out = torch.empty_like(x)
    w, b = torch.randn(cols, device=dev), torch.randn(cols, device=dev)
    eb = 4.0 * n / 1e9
    cases = {
        "copy": (lambda: out.copy_(x), 2 * eb),
        "add": (lambda: torch.add(x, y, out=out), 3 * eb),
        "gelu": (lambda: torch.nn.functional.gelu(x), 2 * eb),
        "sum": (lambda: x.sum(), eb),
        "softmax": (lambda: torch.softmax(x, -1), 2 * eb),
        "layer_norm": (lambda: torch.nn.functional.layer_norm(x, (cols,), w, b), 2 * eb),
    }
    if name.startswith("add 16 elements"):
        s = torch.randn(16, device=dev)
        return (lambda: s + s), None
    op = name.split()[0]
    if op in cases:
        return cases[op]
    return None, None


def time_torch(torch, dev, fn, reps, rounds=7):
    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()
    for _ in range(2):
        fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / reps)
    samples.sort()
    return samples[len(samples) // 2]


def render(path, note):
    with open(path) as f:
        run = json.load(f)
    out = ["# kiln xpu benchmark results", "",
           "Rendered by `python benchmarks/xpu_vs_torch.py --render RUN.json` from a run of",
           "`python benchmarks/xpu_vs_torch.py --json RUN.json` (kiln's C++ `kiln bench --sections xpu`",
           "and PyTorch in one script). Each figure: median over rounds of 10 queued ops and one wait.", ""]
    if note:
        out += [f"- {line}" for line in note.split("; ")]
    out += [f"- peer: {run['peer']}", f"- kiln {run['kiln'].get('kiln_version', '?')} "
            f"({run['kiln'].get('build_type', '?')})", "",
            "| case | kiln | torch | unit | kiln/torch |", "|---|---|---|---|---|"]
    for r in run["rows"]:
        out.append(f"| {r['case']} | {r['kiln']:.2f} | {r['torch']:.2f} | {r['unit']} | {r['ratio']:.2f}x |")
    out += ["", "kiln/torch above 1: kiln faster (the latency row: torch's time over kiln's)."]
    print("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", default=None, help="print the markdown table of a saved --json run")
    ap.add_argument("--note", default="", help="with --render: header lines, separated by '; '")
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build", "release", "kiln"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.render:
        render(args.render, args.note)
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kiln.json")
        cmd = [args.kiln, "bench", "--sections", "xpu", "--json", path] + (["--quick"] if args.quick else [])
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(path) as f:
            kiln_run = json.load(f)
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(min(2, os.cpu_count() or 1)) if dev == "cpu" else None
    peer = f"torch {torch.__version__} on {torch.cuda.get_device_name(0) if dev == 'cuda' else 'cpu'}"
    print(f"\n== kiln xpu vs {peer}")
    print(f"  {'case':38}{'kiln':>12}{'torch':>12}  {'unit':9}{'kiln/torch':>11}")
    reps = 2 if args.quick else 10
    rows = []
    for r in kiln_run["records"]:
        if r["section"] != "xpu":
            continue
        fn, work = torch_case(torch, dev, r["name"], args.quick)
        if fn is None:
            continue
        s = time_torch(torch, dev, fn, reps)
        if r["unit"] == "us":
            tv = s * 1e6
            ratio = tv / r["value"]  # lower is better: torch time / kiln time
        else:
            tv = work / s
            ratio = r["value"] / tv
        rows.append({"case": r["name"], "unit": r["unit"], "kiln": r["value"], "torch": tv, "ratio": ratio})
        print(f"  {r['name']:38}{r['value']:12.2f}{tv:12.2f}  {r['unit']:9}{ratio:10.2f}x", flush=True)
    print("  (kiln/torch > 1: kiln faster; for the latency row, torch time / kiln time)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peer": peer, "kiln": kiln_run, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
