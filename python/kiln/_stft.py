"""torch.stft / torch.istft (PyTorch 2.13 semantics) composed of kiln's ops: the centre padding
through kiln.nn.functional.pad, frames as a Tensor.unfold view, kiln.fft's transforms, and the
inverse's overlap-add as a handful of shifted block sums.

stft: 1-D (L,) or 2-D (B, L) real or complex input; the window (any float or complex dtype,
size win_length) is zero-padded centred to n_fft and multiplied in with torch's type promotion;
center=True pads n_fft // 2 on both sides with pad_mode ('constant', 'reflect', 'replicate',
'circular'; complex input too); onesided defaults to True for a real input and a real window;
normalized multiplies by n_fft ** -0.5; the result is (B?, N, T) complex (a transposed view, as
torch's), or view_as_real of it for return_complex=False. align_to_window=True (center=False
only) places the window part of each frame at t * hop_length, as torch 2.13's.

istft: the (B?, N, T) complex output of stft back to a (B?, length) signal: inverse transforms
of the frames (irfft for a real result, ifft for return_complex=True), windowed, overlap-added
and divided by the overlap-added squared window (the NOLA check raises RuntimeError where that
envelope is below 1e-11), trimmed by n_fft // 2 at the front for center and to length (zero
padding at the end where length is longer), as torch's.

Not done: torch's warnings (no window given, return_complex=False deprecated, istft padding to
length), autograd (kiln's complex ops have none). Two kiln gaps are worked around here: pad has
no complex kernels (complex input is padded as its real and imaginary parts) and complex
division is not available (the envelope division goes through view_as_real). Where torch
2.13's align_to_window=True reads past the end of the signal (and raises, or reads a
neighbouring row), kiln reads zeros: those samples meet the window's zero padding."""
import builtins as _b
import operator as _operator

from . import _C
from . import fft as _fft

__all__ = ["stft", "istft"]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _complex_pad(x, pad, mode):
    """kiln.nn.functional.pad of a complex (1, C, L) tensor along L: the real and imaginary
    parts padded as 2C real channels (kiln's pad has no complex kernels)."""
    from .nn import functional as F
    n, c, length = x.shape
    parts = _C.view_as_real(x).permute(0, 1, 3, 2).reshape(n, 2 * c, length)
    padded = F.pad(parts, pad, mode)
    return _C.view_as_complex(
        padded.reshape(n, c, 2, padded.shape[-1]).permute(0, 1, 3, 2).contiguous())


def _center_pad(x, n_fft, pad_mode):
    """torch.stft's center=True padding: n_fft // 2 on both sides of the last dim, through
    F.pad on the input viewed as (1, B?, L)."""
    from .nn import functional as F
    if pad_mode not in _PAD_MODES:
        raise NotImplementedError(f"stft: padding mode '{pad_mode}' is not supported; "
                                  f"expected one of {', '.join(_PAD_MODES)}")
    signal_dim = x.dim()
    shape = [1] * (3 - signal_dim) + list(x.shape)
    p = n_fft // 2
    x3 = x.reshape(shape)
    if x.is_complex():
        out = _complex_pad(x3, [p, p], pad_mode)
    else:
        out = F.pad(x3, [p, p], pad_mode)
    return out.reshape(list(out.shape[3 - signal_dim:]))


def _padded_window(window, win_length, n_fft, dtype, device):
    """The window (ones where None) zero-padded on both sides, centred, to n_fft."""
    left = (n_fft - win_length) // 2
    if window is None:
        w = _C.zeros([n_fft], dtype=dtype, device=device)
        w.narrow(0, left, win_length).fill_(1)
        return w
    w = _C.zeros([n_fft], dtype=window.dtype, device=window.device)
    w.narrow(0, left, win_length).copy_(window)
    return w


def _index(value, name, fn="stft"):
    """value as a Python int (anything with __index__, as torch's argument parser takes)."""
    if isinstance(value, _b.bool):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not bool")
    try:
        return _operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{name}' must be int, not "
                        f"{type(value).__name__}") from None


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """torch.stft: the short-time Fourier transform of a (L,) or (B, L) signal, of shape
    (B?, N, T) (complex), N = n_fft // 2 + 1 when onesided else n_fft, T the frame count."""
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    n_fft = _index(n_fft, "n_fft")
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a {input.dim()}D tensor")
    if window is not None and not isinstance(window, _C.Tensor):
        raise TypeError(f"stft(): argument 'window' must be Tensor, not "
                        f"{type(window).__name__}")
    hop_length = n_fft // 4 if hop_length is None else _index(hop_length, "hop_length")
    win_length = n_fft if win_length is None else _index(win_length, "win_length")
    window_complex = window is not None and window.is_complex()
    if return_complex is None:
        return_complex = input.is_complex() or window_complex
        if not return_complex:
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"stft: expected a tensor of floating point or complex values, "
                           f"but got {input.dtype}")
    if center:
        input = _center_pad(input, n_fft, pad_mode)
    x = input.unsqueeze(0) if input.dim() == 1 else input
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to "
                           f"win_length={win_length}, but got window with size "
                           f"{list(window.shape)}")
    if align_to_window:
        # Frames of n_fft whose window part (centred in the padded window) starts at
        # t * hop_length: the signal zero-extended by the padding's left part, T counted
        # from win_length.
        left = (n_fft - win_length) // 2
        n_frames = 1 + (length - win_length) // hop_length
        need = (n_frames - 1) * hop_length + n_fft
        right = _b.max(need - left - length, 0)
        if left or right:
            shape = list(x.shape)
            parts = []
            if left:
                parts.append(_C.zeros([shape[0], left], dtype=x.dtype, device=x.device))
            parts.append(x)
            if right:
                parts.append(_C.zeros([shape[0], right], dtype=x.dtype, device=x.device))
            x = _C.cat(parts, 1)
        frames = x.narrow(1, 0, need).unfold(1, n_fft, hop_length)
    else:
        frames = x.unfold(1, n_fft, hop_length)  # (B, T, n_fft), a view
    if window is not None or win_length < n_fft:
        w = _padded_window(window, win_length, n_fft, x.dtype, x.device)
        frames = frames * w
    complex_fft = frames.is_complex()
    if onesided is None:
        onesided = not complex_fft
    norm = "ortho" if normalized else "backward"
    if complex_fft:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = _fft.fft(frames, dim=-1, norm=norm)
    elif onesided:
        out = _fft.rfft(frames, dim=-1, norm=norm)
    else:
        out = _fft.fft(frames, dim=-1, norm=norm)
    out = out.transpose(1, 2)  # (B, N, T)
    if input.dim() == 1:
        out = out.squeeze(0)
    return out if return_complex else _C.view_as_real(out)


def _overlap_add(frames, hop, out_len):
    """torch's unfold_backward along dim 1 of (B, T, n): out[b, t * hop + k] summed over the
    frames, of length out_len (>= (T - 1) * hop + n): ceil(n / hop) shifted block sums."""
    batch, n_frames, n = frames.shape
    k = -(-n // hop)
    if k * hop != n:
        frames = _C.cat([frames, _C.zeros([batch, n_frames, k * hop - n], dtype=frames.dtype,
                                          device=frames.device)], 2)
    blocks = frames.reshape(batch, n_frames, k, hop)
    total = n_frames + k - 1
    acc = None
    for j in range(k):
        part = blocks.select(2, j)  # (B, T, hop): goes to output blocks j .. j + T - 1
        pieces = []
        if j:
            pieces.append(_C.zeros([batch, j, hop], dtype=frames.dtype, device=frames.device))
        pieces.append(part)
        if total - j - n_frames:
            pieces.append(_C.zeros([batch, total - j - n_frames, hop], dtype=frames.dtype,
                                   device=frames.device))
        shifted = _C.cat(pieces, 1) if len(pieces) > 1 else part
        acc = shifted if acc is None else acc + shifted
    return acc.reshape(batch, total * hop).narrow(1, 0, out_len)


def _divide(y, envelope):
    """y / envelope with torch's type promotion. kiln's complex division is taken apart here:
    a complex y over a real envelope part by part, a complex envelope (a complex window) as
    y * conj(e) / |e|^2."""
    if envelope.is_complex():
        y = y * envelope.conj()
        envelope = envelope.abs()
        envelope = envelope * envelope
    if y.is_complex():
        parts = _C.view_as_real(y) / envelope.unsqueeze(-1)
        return _C.view_as_complex(parts.contiguous())
    return y / envelope


def _zero_pad_end(x, extra):
    shape = list(x.shape)
    shape[-1] = extra
    return _C.cat([x, _C.zeros(shape, dtype=x.dtype, device=x.device)], x.dim() - 1)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """torch.istft: the least-squares inverse of stft, (B?, N, T) complex -> (B?, length)."""
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"istft(): argument 'input' must be Tensor, not {type(input).__name__}")
    n_fft = _index(n_fft, "n_fft", "istft")
    hop_length = n_fft // 4 if hop_length is None else _index(hop_length, "hop_length", "istft")
    win_length = n_fft if win_length is None else _index(win_length, "win_length", "istft")
    length = None if length is None else _index(length, "length", "istft")
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    if input.dim() < 2:
        raise IndexError(f"istft: expected a (B?, N, T) input, but got a {input.dim()}D tensor "
                         f"(Dimension out of range)")
    if input.numel() == 0:
        raise RuntimeError("istft input tensor cannot be empty.")
    if input.dim() > 3:
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got {input.dim()}")
    n_frames = input.shape[-1]
    fft_size = input.shape[-2]
    expected_len = n_fft + hop_length * (n_frames - 1)
    real_dtype = _C.float64 if input.dtype == _C.complex128 else _C.float32
    if onesided is None:
        onesided = fft_size != n_fft
    if onesided:
        if n_fft // 2 + 1 != fft_size:
            raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of "
                               f"the input tensor to match n_fft / 2 + 1 when onesided=True, "
                               f"but got {fft_size}")
    elif n_fft != fft_size:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got "
                           f"{fft_size}")
    if not (0 < hop_length <= win_length):
        raise RuntimeError("istft: expected 0 < hop_length <= win_length")
    if not (0 < win_length <= n_fft):
        raise RuntimeError("istft: expected 0 < win_length <= n_fft")
    if window is not None:
        if not isinstance(window, _C.Tensor):
            raise TypeError(f"istft(): argument 'window' must be Tensor, not "
                            f"{type(window).__name__}")
        if window.dim() != 1 or window.shape[0] != win_length:
            raise RuntimeError("istft: Invalid window shape. window has to be 1D and length "
                               "of `win_length`")
    w = window if window is not None else _C.ones([win_length], dtype=real_dtype,
                                                  device=input.device)
    if win_length != n_fft:
        left = (n_fft - win_length) // 2
        parts = [w]
        if left:
            parts.insert(0, _C.zeros([left], dtype=w.dtype, device=w.device))
        if n_fft - win_length - left:
            parts.append(_C.zeros([n_fft - win_length - left], dtype=w.dtype,
                                  device=w.device))
        w = _C.cat(parts, 0)
    x = input.unsqueeze(0) if input.dim() == 2 else input
    x = x.transpose(1, 2)  # (B, T, N)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = _fft.ifft(x, dim=-1, norm=norm)
    else:
        if window is not None and window.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = _fft.irfft(x, n=n_fft, dim=-1, norm=norm)  # (B, T, n_fft)
    y = _overlap_add(frames * w.reshape(1, 1, n_fft), hop_length, expected_len)
    envelope = _overlap_add((w * w).reshape(1, 1, n_fft).expand(1, n_frames, n_fft),
                            hop_length, expected_len)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    elif center:
        end = -(n_fft // 2)
    else:
        end = expected_len
    y = y[:, start:end]
    envelope = envelope[:, start:end]
    if envelope.numel() == 0 or _b.bool(envelope.abs().min() < 1e-11):
        raise RuntimeError("istft: window overlap add min is below 1e-11: the window and "
                           "hop_length violate the NOLA (nonzero overlap-add) condition")
    y = _divide(y, envelope)
    if input.dim() == 2:
        y = y.squeeze(0)
    if end > expected_len:
        y = _zero_pad_end(y, end - expected_len)
    return y
