"""kiln.nn.functional (continued): unfold (im2col) and fold (col2im) as torch.nn.functional's,
composed of kiln's ops in Python (decision 0074): the positions every (channel, kernel offset,
block) reads in the zero-padded image are computed once as flat indices, unfold gathers them
and fold adds them back with scatter_add (overlapping blocks sum), so both differentiate."""
from .. import _C

__all__ = ["unfold", "fold"]


def _pair(v, name):
    v = (v, v) if isinstance(v, int) else tuple(v)
    if len(v) != 2:
        raise RuntimeError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _block_index(size, kernel, dilation, padding, stride, name, device):
    """Flat indices [kh * kw * L] into the padded [Hp * Wp] image, the blocks' grid, and Wp.
    The indices are built on `device`, the input's (gather / scatter_add take no mixed ones)."""
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = size, kernel, dilation, padding, stride
    if min(kh, kw, dh, dw, sh, sw) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"{name}: kernel_size, dilation and stride must be positive and "
                           f"padding non-negative")
    hp, wp = h + 2 * ph, w + 2 * pw
    bh = (hp - dh * (kh - 1) - 1) // sh + 1
    bw = (wp - dw * (kw - 1) - 1) // sw + 1
    if bh <= 0 or bw <= 0:
        raise RuntimeError(f"{name}: the kernel ({kh}, {kw}) with dilation ({dh}, {dw}) does "
                           f"not fit the padded input ({hp}, {wp})")
    ki = _C.arange(kh, device=device).reshape(kh, 1, 1, 1) * dh
    kj = _C.arange(kw, device=device).reshape(1, kw, 1, 1) * dw
    oi = _C.arange(bh, device=device).reshape(1, 1, bh, 1) * sh
    oj = _C.arange(bw, device=device).reshape(1, 1, 1, bw) * sw
    return ((ki + oi) * wp + (kj + oj)).reshape(-1), (bh, bw), (hp, wp)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    if input.dim() not in (3, 4):  # torch's exception class for a 2-d input
        raise IndexError(f"unfold: expected a 3-D (unbatched) or 4-D input [N, C, H, W], got "
                         f"{input.dim()}-D")
    x = input if input.dim() == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    kernel, dil, pad = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"), \
        _pair(padding, "padding")
    idx, (bh, bw), (hp, wp) = _block_index((h, w), kernel, dil, pad, _pair(stride, "stride"),
                                           "unfold", input.device)
    if pad != (0, 0):
        x = _C.pad(x, (pad[1], pad[1], pad[0], pad[0]))
    flat = x.reshape(n, c, hp * wp)
    cols = flat.gather(2, idx.expand(n, c, idx.numel()))
    cols = cols.reshape(n, c * kernel[0] * kernel[1], bh * bw)
    return cols if input.dim() == 4 else cols.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if input.dim() not in (2, 3):
        raise RuntimeError(f"fold: expected a 2-D (unbatched) or 3-D input [N, C * kh * kw, "
                           f"blocks], got {input.dim()}-D")
    cols = input if input.dim() == 3 else input.unsqueeze(0)
    kernel, dil, pad = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"), \
        _pair(padding, "padding")
    h, w = _pair(output_size, "output_size")
    idx, (bh, bw), (hp, wp) = _block_index((h, w), kernel, dil, pad, _pair(stride, "stride"),
                                           "fold", input.device)
    n, ck, blocks = cols.shape
    k = kernel[0] * kernel[1]
    if ck % k != 0:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={kernel}")
    if blocks != bh * bw:
        raise RuntimeError(f"Given output_size={(h, w)}, kernel_size={kernel}, "
                           f"dilation={dil}, padding={pad}, stride={_pair(stride, 'stride')}, "
                           f"expected size of input's dimension 2 to match the calculated "
                           f"number of sliding blocks {bh} * {bw} = {bh * bw}, but got "
                           f"input.size(2)={blocks}.")
    c = ck // k
    src = cols.reshape(n, c, k * blocks)
    out = _C.zeros(n, c, hp * wp, dtype=cols.dtype, device=cols.device).scatter_add(
        2, idx.expand(n, c, idx.numel()), src)
    out = out.reshape(n, c, hp, wp)
    if pad != (0, 0):
        out = out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]
    return out if input.dim() == 3 else out.squeeze(0)
