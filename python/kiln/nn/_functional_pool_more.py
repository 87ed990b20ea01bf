"""kiln.nn.functional (continued): power-average pooling, max unpooling, 3-d adaptive max
pooling and local response normalisation, composed of kiln's pooling, scatter and view ops
in Python (decision 0079) with torch.nn.functional's signatures and results."""
from .. import _C
from . import functional as F

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "max_pool3d_with_indices", "local_response_norm"]


# --- power-average pooling ---------------------------------------------------------------

def _lp_pool(nd, input, norm_type, kernel_size, stride, ceil_mode):
    kernel = F._ints(kernel_size, "kernel_size")
    kernel = kernel * nd if len(kernel) == 1 else kernel
    if norm_type == float("inf"):
        return F._max_pool(nd, input.abs(), kernel, stride, 0, 1, ceil_mode, False)
    if norm_type == -float("inf"):
        return -F._max_pool(nd, -input.abs(), kernel, stride, 0, 1, ceil_mode, False)
    mean = F._avg_pool(nd, input.pow(norm_type), kernel, stride, 0, ceil_mode, True, None)
    window = 1
    for k in kernel:
        window *= k
    # sign * relu(|.|) keeps a zero window at zero with a zero gradient, as torch's
    total = _C.sign(mean) * F.relu(mean.abs()) * window
    return total.pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# --- max unpooling -----------------------------------------------------------------------

def _per_dim(v, nd, name):
    v = F._ints(v, name)
    return v * nd if len(v) == 1 else v


def _unpool_size(input, kernel, stride, padding, output_size):
    """The spatial output size: the pooling's inverse, or output_size checked against it."""
    nd = len(kernel)
    default = [(input.shape[input.dim() - nd + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(nd)]
    if output_size is None:
        size = default
    else:
        size = [int(s) for s in output_size]
        if len(size) == nd + 2:
            size = size[2:]
        if len(size) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                             f"elements, but it has a length of '{len(size)}'")
        for d in range(nd):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < size[d] < high:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be '
                                 f'between {low} and {high})')
    for d, s in enumerate(size):
        if s < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={s}")
    return size


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"max_unpool{nd}d: expected a {nd + 1}-D (unbatched) or {nd + 2}-D "
                           f"input, got {input.dim()}-D")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({tuple(input.shape)}) but got indices tensor with shape: "
                           f"{tuple(indices.shape)}")
    if indices.dtype != _C.int64:
        raise RuntimeError(f"max_unpool{nd}d: expected indices of dtype int64, got "
                           f"{indices.dtype}")
    kernel = _per_dim(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None else _per_dim(stride, nd, "stride")
    size = _unpool_size(input, kernel, stride, _per_dim(padding, nd, "padding"), output_size)
    plane = 1
    for s in size:
        plane *= s
    lead = list(input.shape[:input.dim() - nd])
    flat_idx = indices.reshape(lead + [-1])
    if flat_idx.numel() and (bool((flat_idx < 0).any()) or bool((flat_idx >= plane).any())):
        bad = int(flat_idx.max()) if bool((flat_idx >= plane).any()) else int(flat_idx.min())
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{'x'.join(map(str, size))})")
    # each value goes back to the place it was pooled from; the rest of the plane is zero
    out = _C.zeros(lead + [plane], dtype=input.dtype, device=input.device)
    out = out.scatter(input.dim() - nd, flat_idx, input.reshape(lead + [-1]))
    return out.reshape(lead + size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# --- adaptive / 3-d max pooling with indices ----------------------------------------------

def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return F.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    values, indices = _C._nn.adaptive_max_pool(input, F._output_size(3, input, output_size))
    return (values, indices) if return_indices else values


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return F._max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, True)


# --- local response normalisation --------------------------------------------------------

def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha / size * sum of x^2 over `size` neighbouring channels)^beta; the
    window runs from c - size // 2 to c + (size - 1) // 2, zero past the edges (torch's)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    n, c = input.shape[0], input.shape[1]
    square = (input * input).reshape(n, c, -1)
    padded = _C.pad(square.transpose(1, 2), (size // 2, (size - 1) // 2))
    # [n, rest, c + size - 1] -> windows [n, rest, c, size]: their mean over the window
    window_mean = padded.unfold(2, size, 1).mean(3).transpose(1, 2).reshape(input.shape)
    return input / (window_mean * alpha + k).pow(beta)


# --- CrossMapLRN2d (torch's legacy form) --------------------------------------------------

def _band(channels, first, last):
    """[C, C] 0/1 matrix: row c has ones in columns first(c) .. last(c), within [0, C)."""
    rows = [[1.0 if first(c) <= q <= last(c) else 0.0 for q in range(channels)]
            for c in range(channels)]
    return rows


def _cross_map_windows(channels, size):
    """The channel windows of torch's CrossMapLRN2d, forward and backward. Its forward sums,
    for channel c, channels 0 .. c + pre_pad - 1 less 1 .. c - pre_pad (a running sum that
    never drops channel 0), its backward the ratios of channels c - shift .. c - shift +
    size - 1; kiln reproduces both so that values and gradients are torch's."""
    pre_pad = int((size - 1) / 2 + 1)
    forward = _band(channels, lambda c: 0, lambda c: c + pre_pad - 1)
    for c in range(pre_pad + 1, channels):
        for q in range(1, c - pre_pad + 1):
            forward[c][q] = 0.0
    shift = int(size - (size - 1) / 2)
    backward = _band(channels, lambda c: c - shift, lambda c: c - shift + size - 1)
    return forward, backward


def _cross_map_function():
    from ..autograd import Function

    class CrossMapLRN2dFunction(Function):
        @staticmethod
        def forward(ctx, input, size, alpha, beta, k):
            n, c = input.shape[0], input.shape[1]
            forward, backward = _cross_map_windows(c, size)
            window = _C.tensor(forward, dtype=input.dtype, device=input.device)
            flat = input.reshape(n, c, -1)
            scale = window.matmul(flat * flat) * (alpha / size) + k
            output = flat * scale.pow(-beta)
            ctx.save_for_backward(flat, scale, output)
            ctx.settings = (backward, size, alpha, beta, tuple(input.shape))
            return output.reshape(input.shape)

        @staticmethod
        def backward(ctx, grad_output):
            flat, scale, output = ctx.saved_tensors
            backward, size, alpha, beta, shape = ctx.settings
            g = grad_output.reshape(flat.shape)
            band = _C.tensor(backward, dtype=flat.dtype, device=flat.device)
            accumulated = band.matmul(g * output / scale)
            grad = scale.pow(-beta) * g - (2 * alpha * beta / size) * flat * accumulated
            return grad.reshape(shape), None, None, None, None

    return CrossMapLRN2dFunction


def cross_map_lrn2d(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """torch.nn.CrossMapLRN2d's computation (4-D input), with torch's own gradient."""
    if input.dim() != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
    return _cross_map_function().apply(input, size, alpha, beta, k)
