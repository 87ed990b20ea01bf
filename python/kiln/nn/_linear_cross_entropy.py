"""linear_cross_entropy / LinearCrossEntropyOptions (torch 2.13's torch.nn.functional
.linear_cross_entropy): cross_entropy(linear(input, linear_weight, linear_bias), target).

options=None: that composition (full autograd). With options, the chunked path: rows of the
batch in chunks, each chunk's logits (rows x classes) computed, turned into its loss terms and
its logit gradient (softmax - target mixture), and consumed into the input / weight / bias
gradients before the next chunk, so the (N, C) logits never exist at once (an LLM head:
C = 50257 classes, N = 8192 tokens is 1.6 GB of float32 logits, twice with its gradient).
Gradients are computed in forward, as torch's chunked op, and scaled by the incoming gradient
in backward (reduction 'none' recomputes them chunk by chunk instead, with each row's
incoming gradient). Chunks compute in float32 for float16 / bfloat16 inputs (acc_dtype),
whatever acc_policy says: on the CPU that is the accurate and the fast choice (torch's
"accurate" policy). Class-probability targets and K-dimensional weights take the reference
path with a warning, as torch."""
import dataclasses
import math
import warnings

from .. import _C

__all__ = ["LinearCrossEntropyOptions", "linear_cross_entropy"]


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """Chunking options of linear_cross_entropy (torch.nn.LinearCrossEntropyOptions).

    batch_chunk_size: rows per chunk (None: from chunking_method). chunking_method: "auto"
    (kiln's CPU pick: chunks of at most 64 MiB of float32 logits), "aspect_ratio" or
    "aspect_ratio:N" (torch's: chunks whose logits take about the memory of the input, divided
    by N); None with no batch_chunk_size: one chunk.
    allow_retain_graph: the scalar reductions keep their gradients for a second backward.
    acc_policy / acc_dtype: accepted; kiln accumulates in acc_dtype (float32 by default)."""
    allow_retain_graph: bool = False
    batch_chunk_size: int = None
    chunking_method: str = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in ("accurate", "balanced", "compact", "auto"):
            raise ValueError("acc_policy must be one of 'accurate', 'balanced', 'compact', "
                             f"'auto', got {self.acc_policy!r}")
        if self.batch_chunk_size is not None and self.batch_chunk_size < 1:
            raise ValueError(f"batch_chunk_size must be >= 1, got {self.batch_chunk_size}")
        if self.chunking_method is not None:
            _aspect_divisor(self.chunking_method)  # validates

    def chunk_rows(self, rows, classes, in_features):
        """Rows per chunk for a batch of `rows`."""
        by_method = None
        if self.chunking_method == "auto":
            # kiln's CPU pick: the power of two whose float32 logits chunk is at most 64 MiB
            # (an LLM head, 2048 x 768 against 50257 classes: 256 rows, forward + backward as
            # fast as the unchunked composition, 2.57 vs 2.53 s, at 346 MB instead of 2.4 GB;
            # 16 rows, aspect_ratio:2, took 6.5 s: each chunk streams the whole weight 3 times)
            fit = max(1, (64 << 20) // (4 * max(classes, 1)))
            by_method = min(rows, 1 << (fit.bit_length() - 1)) if rows else 1
        elif self.chunking_method is not None:
            divisor = _aspect_divisor(self.chunking_method)
            # logits chunk about the size of the input: rows / ceil(C / in), a power of two
            per_chunk = math.ceil(rows / math.ceil(classes / max(in_features, 1)))
            by_method = max(1, (1 << max(per_chunk - 1, 0).bit_length()) // divisor)
        if self.batch_chunk_size is not None:
            if by_method is not None and self.chunking_method != "auto" and \
                    by_method != self.batch_chunk_size:
                raise ValueError("LinearCrossEntropyOptions: batch_chunk_size="
                                 f"{self.batch_chunk_size} disagrees with chunking_method="
                                 f"{self.chunking_method!r} ({by_method} rows); set one")
            return self.batch_chunk_size
        return rows if by_method is None else by_method


def _aspect_divisor(method):
    if method == "auto":
        return 2
    if method == "aspect_ratio":
        return 1
    if isinstance(method, str) and method.startswith("aspect_ratio:"):
        try:
            n = int(method.split(":", 1)[1])
        except ValueError:
            n = 0
        if n >= 1:
            return n
    raise ValueError("chunking_method must be 'auto', 'aspect_ratio', 'aspect_ratio:N' (N >= 1) "
                     f"or None, got {method!r}")


def _reference(input, linear_weight, target, bias, weight, reduction, ignore_index,
               label_smoothing):
    from . import functional as F
    classes, in_features = linear_weight.shape[0], linear_weight.shape[-1]
    out = tuple(linear_weight.shape[1:-1])
    flat_w = linear_weight.reshape(-1, in_features)
    flat_b = None if bias is None else bias.reshape(-1)
    logits = F.linear(input, flat_w, flat_b)
    if out:
        logits = logits.reshape(*input.shape[:-1], classes, *out)
    return F.cross_entropy(logits, target, weight=weight,
                           ignore_index=-100 if ignore_index is None else ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing)


class _Chunks:
    """Loss terms and logit gradients of the rows [r0, r1) (everything in acc dtype)."""

    def __init__(self, x, w, b, target, class_weight, ignore_index, smoothing, acc):
        self.x, self.w, self.b, self.t = x, w, b, target
        self.cw, self.ignore, self.eps, self.acc = class_weight, ignore_index, smoothing, acc
        self.classes = w.shape[0]
        self.cw_mean = (class_weight.sum() / self.classes) if class_weight is not None else None

    def terms(self, r0, r1, need_loss=True):
        """(per-row loss, d loss_r / d logits, the rows' valid mask, their class weight)."""
        xc = self.x[r0:r1].to(self.acc)
        z = _C.matmul(xc, self.w.t())
        if self.b is not None:
            z = z + self.b
        t = self.t[r0:r1]
        valid = t != self.ignore
        t_safe = _C.where(valid, t, _C.zeros_like(t))
        eps = self.eps
        p = z.softmax(-1)
        w_t = self.cw[t_safe] if self.cw is not None else _C.ones(t.shape, dtype=self.acc)
        w_t = w_t * valid.to(self.acc)
        loss = None
        if need_loss:
            lse = z.logsumexp(-1)
            z_t = z.gather(1, t_safe.unsqueeze(1)).squeeze(1)
            loss = (1 - eps) * w_t * (lse - z_t)
            if eps > 0:
                if self.cw is not None:
                    smooth = self.cw_mean * lse - _C.matmul(z, self.cw) / self.classes
                else:
                    smooth = lse - z.mean(-1)
                loss = loss + eps * smooth * valid.to(self.acc)
        # d loss_r / d z = (1-eps) w_t (p - e_t) + eps (mean(w) p - w / C), 0 for ignored rows
        scale = (1 - eps) * w_t
        if eps > 0:
            mean_w = self.cw_mean if self.cw is not None else 1.0
            scale = scale + eps * mean_w * valid.to(self.acc)
        dz = p * scale.unsqueeze(1)
        dz = dz.scatter_add(1, t_safe.unsqueeze(1), (-(1 - eps) * w_t).unsqueeze(1))
        if eps > 0:
            per_class = (self.cw if self.cw is not None else
                         _C.ones([self.classes], dtype=self.acc)) * (eps / self.classes)
            dz = dz - valid.to(self.acc).unsqueeze(1) * per_class
        return loss, dz, valid, w_t

    def grads(self, row_scale, chunk, input_dtype, weight_dtype):
        """Input / weight / bias gradients of sum_r row_scale_r loss_r (row_scale: a number
        or a per-row tensor)."""
        n = self.x.shape[0]
        gx = _C.empty([n, self.x.shape[1]], dtype=input_dtype)
        gw = _C.zeros(list(self.w.shape), dtype=self.acc)
        gb = _C.zeros([self.classes], dtype=self.acc) if self.b is not None else None
        for r0 in range(0, n, chunk):
            r1 = min(n, r0 + chunk)
            _, dz, _, _ = self.terms(r0, r1, need_loss=False)
            dz = dz * (row_scale[r0:r1].to(self.acc).unsqueeze(1)
                       if isinstance(row_scale, _C.Tensor) else row_scale)
            gx[r0:r1] = _C.matmul(dz, self.w).to(input_dtype)
            gw.addmm_(dz.t(), self.x[r0:r1].to(self.acc))
            if gb is not None:
                gb.add_(dz.sum(0))
        return gx, gw.to(weight_dtype), None if gb is None else gb


def _chunked_function():
    from ..autograd import Function

    class ChunkedLinearCrossEntropy(Function):
        @staticmethod
        def forward(ctx, x, w, b, target, class_weight, ignore_index, smoothing, reduction,
                    chunk, acc, allow_retain):
            acc_w = w.to(acc)
            acc_b = None if b is None else b.to(acc)
            cw = None if class_weight is None else class_weight.to(acc)
            chunks = _Chunks(x, acc_w, acc_b, target, cw, ignore_index, smoothing, acc)
            n = x.shape[0]
            if reduction == "none":
                losses = _C.empty([n], dtype=acc)
                for r0 in range(0, n, chunk):
                    r1 = min(n, r0 + chunk)
                    losses[r0:r1] = chunks.terms(r0, r1)[0]
                ctx.chunks, ctx.meta = chunks, (reduction, chunk, x.dtype, w.dtype, b)
                return losses.to(x.dtype)
            total = _C.zeros([], dtype=acc)
            denom = _C.zeros([], dtype=acc)
            gx = _C.empty(list(x.shape), dtype=x.dtype)
            gw = _C.zeros(list(w.shape), dtype=acc)
            gb = _C.zeros([w.shape[0]], dtype=acc) if b is not None else None
            for r0 in range(0, n, chunk):
                r1 = min(n, r0 + chunk)
                loss, dz, valid, w_t = chunks.terms(r0, r1)
                total = total + loss.sum()
                denom = denom + w_t.sum()
                gx[r0:r1] = _C.matmul(dz, acc_w).to(x.dtype)
                gw.addmm_(dz.t(), x[r0:r1].to(acc))  # in place: no second weight-sized buffer
                if gb is not None:
                    gb.add_(dz.sum(0))
            scale = 1.0 / denom if reduction == "mean" else 1.0
            ctx.saved_grads = (gx * scale.to(x.dtype) if reduction == "mean" else gx,
                               (gw * scale).to(w.dtype),
                               None if gb is None else (gb * scale).to(b.dtype))
            ctx.allow_retain = allow_retain
            ctx.meta = (reduction, chunk, x.dtype, w.dtype, b)
            return (total * scale).to(x.dtype)

        @staticmethod
        def backward(ctx, g):
            reduction = ctx.meta[0]
            if reduction == "none":
                chunks, (_, chunk, xdt, wdt, b) = ctx.chunks, ctx.meta
                gx, gw, gb = chunks.grads(g, chunk, xdt, wdt)
                return gx, gw, None if gb is None else gb.to(b.dtype), *([None] * 8)
            grads = ctx.saved_grads
            if grads is None:
                raise RuntimeError("linear_cross_entropy (chunked): backward through the graph "
                                   "a second time; set LinearCrossEntropyOptions("
                                   "allow_retain_graph=True) to keep the gradients")
            if not ctx.allow_retain:
                ctx.saved_grads = None
            gx, gw, gb = grads
            return (gx * g.to(gx.dtype), gw * g.to(gw.dtype),
                    None if gb is None else gb * g.to(gb.dtype), *([None] * 8))

    return ChunkedLinearCrossEntropy


_CHUNKED = None


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...); with options,
    computed in row chunks without materialising the logits (module docstring)."""
    global _CHUNKED
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if linear_weight.dim() < 2:
        raise ValueError("linear_cross_entropy: linear_weight must have shape (C, in_features) "
                         f"or (C, d_1, ..., d_K, in_features), got {tuple(linear_weight.shape)}")
    if input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"linear_cross_entropy: input has {input.shape[-1]} features, "
                           f"linear_weight expects {linear_weight.shape[-1]}")
    args = (input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
            label_smoothing)
    if options is None:
        return _reference(*args)
    unsupported = None
    if linear_weight.dim() != 2:
        unsupported = "a K-dimensional linear_weight"
    elif target.is_floating_point():
        unsupported = "class-probability targets"
    elif input.dim() != 2:
        unsupported = f"a {input.dim()}-d input (the chunked path takes (N, in_features))"
    elif linear_bias is not None and linear_bias.dim() != 1:
        unsupported = "a K-dimensional linear_bias"
    if unsupported is not None:
        warnings.warn(f"linear_cross_entropy: the chunked path does not support {unsupported}; "
                      "using the reference implementation")
        return _reference(*args)
    if target.dim() != 1 or target.shape[0] != input.shape[0]:
        raise ValueError(f"Expected target of shape ({input.shape[0]},), got "
                         f"{tuple(target.shape)}")
    n, in_features = input.shape
    classes = linear_weight.shape[0]
    if n > 0:
        lo, hi = int(target.min().item()), int(target.max().item())
        ign = -100 if ignore_index is None else ignore_index
        valid = target[target != ign]
        if valid.numel() and (int(valid.min().item()) < 0 or int(valid.max().item()) >= classes):
            raise IndexError(f"Target {lo if lo < 0 else hi} is out of bounds (classes: "
                             f"{classes})")
    chunk = max(1, options.chunk_rows(n, classes, in_features))
    acc = options.acc_dtype or _C.float32
    if input.dtype == _C.float64 and options.acc_dtype is None:
        acc = _C.float64
    if _CHUNKED is None:
        _CHUNKED = _chunked_function()
    return _CHUNKED.apply(input, linear_weight, linear_bias, target, weight,
                          -100 if ignore_index is None else ignore_index,
                          float(label_smoothing), reduction, chunk, acc,
                          bool(options.allow_retain_graph))
