"""Fractional max pooling (Graham, 2014) as torch.nn's FractionalMaxPool2d / 3d and
torch.nn.functional's fractional_max_pool2d / 3d, composed of existing kiln ops.

Each (sample, channel) plane draws one uniform number u in [0, 1) per pooled dim (or takes
it from ``_random_samples``, shape [N, C, nd], the input's dtype). The window starts of a
dim with input size ``inp``, output size ``out`` and kernel ``k`` follow torch's rule,
computed in the input's dtype:

    alpha = (inp - k) / (out - 1)
    start(i) = floor((i + u) * alpha) - floor(u * alpha)   for i < out - 1
    start(out - 1) = inp - k

The sample columns are used as torch uses them: for 2d, column 0 drives the width and
column 1 the height; for 3d, columns 0, 1, 2 drive time, height and width. The windows'
elements are gathered from the flattened plane and reduced with max (first maximum of a
window in row-major order, as torch's loop); the returned indices are flat positions in the
plane (h * W + w, or (t * H + h) * W + w), as torch's. Gradients flow through gather / max.
"""
import numpy as np

from .module import Module

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


def _tuple(v, n, name):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a sequence of {n} values, got {v}")
        return tuple(v)
    return (v,) * n


def _window_starts(u, inp, out, k, dtype, device):
    """u: [N, C] samples of one dim -> [N, C, out] int64 window starts."""
    import kiln
    if out == 0:
        return kiln.zeros(tuple(u.shape) + (0,), dtype=kiln.int64, device=device)
    last = kiln.full(tuple(u.shape) + (1,), inp - k, dtype=kiln.int64, device=device)
    if out == 1:
        return last
    npdt = np.float32 if dtype == kiln.float32 else np.float64
    if dtype not in (kiln.float32, kiln.float64):
        npdt = np.float32
    alpha = float(npdt(inp - k) / npdt(out - 1))
    alpha_t = kiln.tensor(alpha, dtype=dtype, device=device)
    i = kiln.arange(out - 1, device=device).to(dtype)
    u3 = u.unsqueeze(-1)
    s = kiln.floor((i + u3) * alpha_t) - kiln.floor(u3 * alpha_t)
    return kiln.cat([s.to(kiln.int64), last], dim=-1)


def _fractional_max_pool(nd, input, kernel_size, output_size, output_ratio, return_indices,
                         _random_samples):
    import kiln
    fname = "fractional_max_pool2d" if nd == 2 else "fractional_max_pool3d_out"
    if output_size is None and output_ratio is None:
        raise ValueError(f"fractional_max_pool{nd}d requires specifying either an "
                         "output_size or an output_ratio")
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"fractional_max_pool{nd}d(): Expected {nd + 1}D or {nd + 2}D "
                           f"tensor, but got: {list(input.shape)}")
    batched = input.dim() == nd + 2
    x = input if batched else input.unsqueeze(0)
    spatial = tuple(int(s) for s in x.shape[2:])
    ks = tuple(int(k) for k in _tuple(kernel_size, nd, "kernel_size"))
    if output_size is None:
        ratio = _tuple(output_ratio, nd, "output_ratio")
        outs = tuple(int(s * float(r)) for s, r in zip(spatial, ratio))
    else:
        outs = tuple(int(o) for o in _tuple(output_size, nd, "output_size"))
    for d in range(1, x.dim()):
        if x.shape[d] == 0:
            raise RuntimeError(f"{fname}(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but got{list(input.shape)} with "
                               f"dimension {d if batched else d - 1} being empty.")
    names = ("height", "width") if nd == 2 else ("time", "height", "width")
    for name, inp, out, k in zip(names, spatial, outs, ks):
        # torch's bounds: out + k - 1 <= inp for 2d, out + k - 1 < inp for 3d
        too_large = (out + k - 1 > inp) if nd == 2 else (out + k - 1 >= inp)
        if too_large:
            raise RuntimeError(f"{fname}(): pool {name} {k} too large relative to input "
                               f"{name} {inp}")
    if x.dtype not in (kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16):
        raise NotImplementedError(f"fractional_max_pool{nd}d: not implemented for "
                                  f"{x.dtype}")
    N, C = int(x.shape[0]), int(x.shape[1])
    if _random_samples is None:
        samples = kiln.rand(N, C, nd, dtype=x.dtype, device=x.device)
    else:
        samples = _random_samples
        if samples.dim() != 3:
            raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got "
                               f"{samples.dim()}")
        if samples.dtype != x.dtype:
            raise RuntimeError("Expect _random_samples to have the same dtype as input")
        if samples.shape[2] != nd:
            raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got "
                               f"{samples.shape[2]}.")
        if samples.shape[1] != C:
            raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
        if samples.shape[0] < N:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        samples = samples[:N].to(x.device)
    # sample column driving each spatial dim (torch: 2d -> (h: 1, w: 0); 3d -> (t, h, w))
    cols = (1, 0) if nd == 2 else (0, 1, 2)
    strides = [1] * nd
    for d in range(nd - 2, -1, -1):
        strides[d] = strides[d + 1] * spatial[d + 1]
    # flat plane index of every window element: [N, C, out_0..out_{nd-1}, k_0..k_{nd-1}]
    flat = None
    for d in range(nd):
        starts = _window_starts(samples[:, :, cols[d]], spatial[d], outs[d], ks[d], x.dtype,
                                x.device)
        shape = [N, C] + [1] * (2 * nd)
        shape[2 + d] = outs[d]
        pos = starts.reshape(shape)
        kshape = [1] * (2 + 2 * nd)
        kshape[2 + nd + d] = ks[d]
        pos = pos + kiln.arange(ks[d], device=x.device).reshape(kshape)
        term = pos * strides[d]
        flat = term if flat is None else flat + term
    n_out = int(np.prod(outs)) if outs else 1
    n_k = int(np.prod(ks))
    full = [N, C] + list(outs) + list(ks)
    flat = flat.expand(full).reshape(N, C, n_out, n_k)
    plane = x.reshape(N, C, -1)
    vals = kiln.gather(plane, 2, flat.reshape(N, C, n_out * n_k)).reshape(N, C, n_out, n_k)
    if n_k == 0 or n_out == 0:
        out = vals.sum(-1) if n_out == 0 else vals.amax(-1)
        idx = kiln.zeros((N, C, n_out), dtype=kiln.int64, device=x.device)
    else:
        best = vals.max(dim=-1)
        out = best.values
        idx = kiln.gather(flat, 3, best.indices.unsqueeze(-1)).squeeze(-1)
    out = out.reshape([N, C] + list(outs))
    idx = idx.reshape([N, C] + list(outs))
    if not batched:
        out, idx = out.squeeze(0), idx.squeeze(0)
    if return_indices:
        return out, idx
    return out


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True,
                                _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """torch.nn.functional.fractional_max_pool2d: input [N, C, H, W] or [C, H, W];
    output_ratio may be a number or a pair (torch's functional requires a pair)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True,
                                _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """torch.nn.functional.fractional_max_pool3d: input [N, C, T, H, W] or [C, T, H, W]."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        nd = self._nd
        self.kernel_size = _tuple(kernel_size, nd, "kernel_size")
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = (_tuple(output_size, nd, "output_size")
                            if output_size is not None else None)
        self.output_ratio = (_tuple(output_ratio, nd, "output_ratio")
                             if output_ratio is not None else None)
        if output_size is None and output_ratio is None:
            raise ValueError(f"FractionalMaxPool{nd}d requires specifying either an output "
                             "size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None:
            for r in self.output_ratio:
                if not (0 < r < 1):
                    raise ValueError(f"output_ratio must be between 0 and 1 (got "
                                     f"{output_ratio})")

    def forward(self, input):
        return _fractional_max_pool(self._nd, input, self.kernel_size, self.output_size,
                                    self.output_ratio, self.return_indices,
                                    self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """torch.nn.FractionalMaxPool2d (see the module docstring for the window rule)."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """torch.nn.FractionalMaxPool3d (see the module docstring for the window rule)."""
    _nd = 3
