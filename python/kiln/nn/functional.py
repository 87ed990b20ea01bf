"""kiln.nn.functional: stateless layers, activations and losses with torch.nn.functional's
signatures, over kiln::nn::functional (kiln._C._nn)."""
import math

from .. import _C
from .._C import _nn

__all__ = ["linear", "fused_linear", "bilinear", "embedding", "layer_norm", "rms_norm", "group_norm",
           "batch_norm", "dropout", "relu", "relu_", "leaky_relu", "gelu", "silu", "sigmoid",
           "tanh", "softmax", "log_softmax", "softplus", "pad", "one_hot", "cross_entropy",
           "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]


def _legacy_reduction(size_average, reduce, reduction):
    """The reduction string from the deprecated size_average/reduce arguments (as torch)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


# --- layers ------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    return _nn.linear(input, weight, bias)


def fused_linear(input, weight, bias=None, *, activation="none", residual=None, out_dtype=None):
    """A Linear layer with its epilogue in one op (kiln's own; torch has no equivalent):
    ``activation(input @ weight.T + bias) + residual``, rounded once to ``out_dtype``.

    activation: "none", "relu", "gelu", "gelu_tanh" or "silu". residual: a tensor of the
    output's shape (or broadcastable to it). out_dtype: kiln.float32 or kiln.bfloat16
    (default: the input's dtype); bfloat16 layers apply the activation and the residual to
    the float32 sums before the one rounding. Tall products (16 rows and more) run as one
    oneDNN matmul whose packed weight is cached with the weight tensor. Under autograd it
    records the plain ops, so gradients are those of the unfused expression.
    """
    return _nn.fused_linear(input, weight, bias, activation, residual, out_dtype)


def bilinear(input1, input2, weight, bias=None):
    return _nn.bilinear(input1, input2, weight, bias)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported by kiln")
    if padding_idx is not None:
        n = weight.size(0)
        if padding_idx > 0:
            if padding_idx >= n:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    return _nn.embedding(input, weight, padding_idx)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _nn.layer_norm(input, tuple(normalized_shape), weight, bias, float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _nn.rms_norm(input, tuple(normalized_shape), weight,
                        None if eps is None else float(eps))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _nn.group_norm(input, num_groups, weight, bias, float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return _nn.batch_norm(input, running_mean, running_var, weight, bias, bool(training),
                          float(momentum), float(eps))


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    r = _nn.dropout(input, float(p), bool(training))
    if inplace:
        return input.copy_(r)
    return r


# --- activations -------------------------------------------------------------------------

def relu(input, inplace=False):
    return _C.relu_(input) if inplace else _nn.relu(input)


def relu_(input):
    return _C.relu_(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    r = _nn.leaky_relu(input, float(negative_slope))
    return input.copy_(r) if inplace else r


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh.")
    return _nn.gelu(input, approximate)


def silu(input, inplace=False):
    return _C.silu_(input) if inplace else _nn.silu(input)


def sigmoid(input):
    return _nn.sigmoid(input)


def tanh(input):
    return _nn.tanh(input)


def _get_softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _nn.softmax(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _nn.log_softmax(input, dim)


softplus = _C.softplus
pad = _C.pad
one_hot = _C.one_hot


# --- losses ------------------------------------------------------------------------------

def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _nn.nll_loss(input, target, weight, ignore_index,
                        _legacy_reduction(size_average, reduce, reduction))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    return _nn.cross_entropy(input, target, weight, ignore_index,
                             _legacy_reduction(size_average, reduce, reduction),
                             float(label_smoothing))


def _weighted(loss, weight, reduction):
    """torch's `weight` argument of mse/l1/huber: elementwise weights, then the reduction."""
    loss = loss * weight
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_nn.mse_loss(input, target, "none"), weight, reduction)
    return _nn.mse_loss(input, target, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_nn.l1_loss(input, target, "none"), weight, reduction)
    return _nn.l1_loss(input, target, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    return _nn.smooth_l1_loss(input, target, _legacy_reduction(size_average, reduce, reduction),
                              float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if weight is not None:
        return _weighted(_nn.huber_loss(input, target, "none", float(delta)), weight, reduction)
    return _nn.huber_loss(input, target, reduction, float(delta))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    return _nn.binary_cross_entropy(input, target, weight,
                                    _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    return _nn.binary_cross_entropy_with_logits(
        input, target, weight, pos_weight, _legacy_reduction(size_average, reduce, reduction))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    return _nn.kl_div(input, target, _legacy_reduction(size_average, reduce, reduction),
                      bool(log_target))


# --- convolution and pooling -------------------------------------------------------------

def _ints(v, name):
    """torch's int-or-tuple arguments as a list (one entry is repeated by the C++ side)."""
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int or a tuple of ints, not bool")
    if isinstance(v, int):
        return [v]
    if hasattr(v, "__index__") and not isinstance(v, (list, tuple)):
        return [v.__index__()]
    return [int(x) for x in v]


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    if isinstance(padding, str):
        # torch's functional form raises RuntimeError here (the modules raise ValueError).
        if padding not in ("same", "valid"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "same" and any(s != 1 for s in _ints(stride, "stride")):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
    else:
        padding = _ints(padding, "padding")
    return _nn.conv(input, weight, bias, nd, _ints(stride, "stride"), padding,
                    _ints(dilation, "dilation"), int(groups))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups,
                    dilation):
    return _nn.conv_transpose(input, weight, bias, nd, _ints(stride, "stride"),
                              _ints(padding, "padding"), _ints(output_padding, "output_padding"),
                              int(groups), _ints(dilation, "dilation"))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def _stride(stride):
    # None or an empty list: stride = kernel_size (the C++ side's empty list).
    if stride is None:
        return []
    return _ints(stride, "stride")


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    return _nn.max_pool(input, nd, _ints(kernel_size, "kernel_size"), _stride(stride),
                        _ints(padding, "padding"), _ints(dilation, "dilation"), bool(ceil_mode),
                        bool(return_indices))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    return _nn.avg_pool(input, nd, _ints(kernel_size, "kernel_size"), _stride(stride),
                        _ints(padding, "padding"), bool(ceil_mode), bool(count_include_pad),
                        divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _output_size(nd, input, output_size):
    """output_size as a list of nd entries; None entries keep the input's size (as torch)."""
    if isinstance(output_size, int) or output_size is None:
        output_size = [output_size] * nd
    output_size = list(output_size)
    if len(output_size) == 1 and nd > 1:
        output_size = output_size * nd
    if len(output_size) != nd:
        raise RuntimeError(f"adaptive pooling: output_size must have {nd} elements, got "
                           f"{len(output_size)}")
    sizes = input.shape[input.dim() - nd:] if input.dim() >= nd else [None] * nd
    return [sizes[i] if v is None else int(v) for i, v in enumerate(output_size)]


def adaptive_avg_pool1d(input, output_size):
    if isinstance(output_size, (list, tuple)) and len(output_size) != 1:
        raise RuntimeError(f"adaptive_avg_pool1d: output_size must have 1 element, got "
                           f"{len(output_size)}")
    return _nn.adaptive_avg_pool(input, _output_size(1, input, output_size))


def adaptive_avg_pool2d(input, output_size):
    return _nn.adaptive_avg_pool(input, _output_size(2, input, output_size))


def adaptive_avg_pool3d(input, output_size):
    return _nn.adaptive_avg_pool(input, _output_size(3, input, output_size))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    values, indices = _nn.adaptive_max_pool(input, _output_size(1, input, output_size))
    return (values, indices) if return_indices else values


def adaptive_max_pool2d(input, output_size, return_indices=False):
    values, indices = _nn.adaptive_max_pool(input, _output_size(2, input, output_size))
    return (values, indices) if return_indices else values


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _nn.adaptive_max_pool(input, _output_size(2, input, output_size))


# --- attention ---------------------------------------------------------------------------

# Set by kiln.nn.attention.sdpa_kernel while a context restricts the backends (see there);
# None otherwise, so an unrestricted call pays one module-global test.
_sdpa_backend_check = None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    if attn_mask is not None and not isinstance(attn_mask, _C.Tensor):
        # A kiln.nn.attention.bias.CausalBias (torch dispatches it via __torch_function__).
        dispatch = getattr(attn_mask, "_sdpa_dispatch", None)
        if dispatch is None:
            raise TypeError("scaled_dot_product_attention: attn_mask must be a Tensor or a "
                            f"CausalBias, got {type(attn_mask).__name__}")
        return dispatch(query, key, value, dropout_p, is_causal, scale, enable_gqa)
    if _sdpa_backend_check is not None:
        _sdpa_backend_check(query, key, value, attn_mask, dropout_p, enable_gqa)
    if is_causal and attn_mask is not None:
        # torch raises RuntimeError here (kiln's C++ function a ValueError).
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if attn_mask is not None and attn_mask.dtype != _C.bool and \
            not attn_mask.is_floating_point():
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {attn_mask.dtype}")
    return _nn.scaled_dot_product_attention(query, key, value, attn_mask, float(dropout_p),
                                            bool(is_causal),
                                            None if scale is None else float(scale),
                                            bool(enable_gqa))


__all__ += ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "max_pool1d",
            "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
            "max_pool3d_with_indices",
            "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
            "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
            "scaled_dot_product_attention"]


# --- resizing ----------------------------------------------------------------------------

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")


def _per_spatial_dim(value, nd, cast, mismatch):
    """One entry per spatial dim: a list / tuple of nd entries, or one value repeated.
    mismatch() gives the error message (built only on error: formatting it on every call
    took about a microsecond of a 9 us interpolate)."""
    if isinstance(value, (list, tuple)):
        if len(value) != nd:
            raise ValueError(mismatch())
        return [cast(v) for v in value]
    return [cast(value)] * max(nd, 0)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate: modes nearest, nearest-exact, linear (3-d input),
    bilinear / bicubic (4-d), trilinear (5-d) and area. antialias is not supported."""
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by kiln")
    nd = input.dim() - 2
    if mode not in ("nearest", "nearest-exact", "area") + _INTERPOLATING:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.dim()}D) for the modes: nearest | linear | "
                                  f"bilinear | bicubic | trilinear | area | nearest-exact "
                                  f"(got {mode})")
    if align_corners is not None and mode not in _INTERPOLATING:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        sizes, scales = _per_spatial_dim(
            size, nd, int, lambda: f"Input and output must have the same number of spatial "
            f"dimensions, but got input with spatial dimensions of {list(input.shape[2:])} and "
            f"output size of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
            f"and output size in (o1, o2, ...,oK) format."), []
    else:
        sizes, scales = [], _per_spatial_dim(
            scale_factor, nd, float, lambda: f"Input and scale_factor must have the same number "
            f"of spatial dimensions, but got input with spatial dimensions of "
            f"{list(input.shape[2:])} and scale_factor of shape {scale_factor}. Please provide "
            f"input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
            f"format.")
    return _nn.interpolate(input, sizes, scales, mode, align_corners, recompute_scale_factor)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


__all__ += ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]


# --- multi-head attention ----------------------------------------------------------------

def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, _C.Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or kiln.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask as a float mask of target_type (-inf where True), as torch's."""
    if mask is not None:
        _mask_dtype = mask.dtype
        _mask_is_float = mask.is_floating_point()
        if _mask_dtype != _C.bool and not _mask_is_float:
            raise AssertionError(f"only bool and floating types of {mask_name} are supported")
        if not _mask_is_float:
            mask = _C.zeros(tuple(mask.shape), dtype=target_type, device=mask.device) \
                .masked_fill_(mask, float("-inf"))
    return mask


def _in_projection_packed(q, k, v, w, b=None):
    E = q.size(-1)
    if k is v:
        if q is k:  # self-attention: one projection
            proj = linear(q, w, b)
            proj = proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2) \
                .contiguous()
            return proj[0], proj[1], proj[2]
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        q_proj = linear(q, w_q, b_q)
        kv_proj = linear(k, w_kv, b_kv)
        kv_proj = kv_proj.unflatten(-1, (2, E)).unsqueeze(0).transpose(0, -2).squeeze(-2) \
            .contiguous()
        return q_proj, kv_proj[0], kv_proj[1]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    if query.dim() == 3:
        is_batched = True
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
    elif query.dim() == 2:
        is_batched = False
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     "instead")
            if attn_mask.dim() == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                         f"{tuple(attn_mask.shape)}")
    else:
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.dim()}-D query tensor")
    return is_batched


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """torch.nn.functional.multi_head_attention_forward (sequence-first [L, N, E] inputs or
    unbatched [L, E]), over kiln's linear, bmm/baddbmm, softmax, dropout and
    scaled_dot_product_attention."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query = query.unsqueeze(1)
        key = key.unsqueeze(1)
        value = value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len, _, _ = key.shape
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # The is_causal hint goes to SDPA instead of the mask.
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                                 f"match value's {tuple(value.shape[:2])}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)}")

    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, "
                                 "k_proj_weight or v_proj_weight is None")
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight,
                                 v_proj_weight, b_q, b_k, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key/value.")
        k = _C.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _C.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")

    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.view(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        k = static_k
    if static_v is None:
        v = v.view(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        v = static_v

    if add_zero_attn:
        zero_attn_shape = (bsz * num_heads, 1, head_dim)
        k = _C.cat([k, _C.zeros(zero_attn_shape, dtype=k.dtype, device=k.device)], dim=1)
        v = _C.cat([v, _C.zeros(zero_attn_shape, dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    src_len = k.size(1)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        key_padding_mask = key_padding_mask.view(bsz, 1, 1, src_len) \
            .expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0

    if need_weights:
        _B, _Nt, E = q.shape
        q_scaled = q * math.sqrt(1.0 / float(E))
        if attn_mask is not None:
            attn_output_weights = _C.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            attn_output_weights = _C.bmm(q_scaled, k.transpose(-2, -1))
        attn_output_weights = softmax(attn_output_weights, dim=-1)
        if dropout_p > 0.0:
            attn_output_weights = dropout(attn_output_weights, p=dropout_p)
        attn_output = _C.bmm(attn_output_weights, v)
        attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len * bsz, embed_dim)
        attn_output = linear(attn_output, out_proj_weight, out_proj_bias)
        attn_output = attn_output.view(tgt_len, bsz, attn_output.size(1))
        attn_output_weights = attn_output_weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            attn_output_weights = attn_output_weights.mean(dim=1)
        if not is_batched:
            attn_output = attn_output.squeeze(1)
            attn_output_weights = attn_output_weights.squeeze(0)
        return attn_output, attn_output_weights

    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    attn_output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    attn_output = attn_output.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    attn_output = linear(attn_output, out_proj_weight, out_proj_bias)
    attn_output = attn_output.view(tgt_len, bsz, attn_output.size(1))
    if not is_batched:
        attn_output = attn_output.squeeze(1)
    return attn_output, None


__all__ += ["multi_head_attention_forward"]

from ._functional_activation import *  # noqa: E402,F401,F403  (activations, small layers)
from ._functional_activation import __all__ as _activation_names  # noqa: E402

__all__ += _activation_names

from ._functional_loss_more import *  # noqa: E402,F401,F403  (margin / embedding losses)
from ._functional_loss_more import __all__ as _loss_names  # noqa: E402

__all__ += _loss_names

from ._functional_fold import fold, unfold  # noqa: E402,F401  (im2col / col2im)

__all__ += ["fold", "unfold"]

# pooling, sampling, bags, CTC and the rest (decision 0079)
from . import _functional_pool_more, _functional_misc_more  # noqa: E402
from . import _functional_bag, _functional_sampling, _functional_ctc  # noqa: E402
from ._functional_pool_more import *  # noqa: E402,F401,F403
from ._functional_misc_more import *  # noqa: E402,F401,F403
from ._functional_bag import embedding_bag  # noqa: E402,F401
from ._functional_sampling import affine_grid, grid_sample  # noqa: E402,F401
from ._functional_ctc import ctc_loss  # noqa: E402,F401

__all__ += (_functional_pool_more.__all__ + _functional_misc_more.__all__ +
            ["embedding_bag", "affine_grid", "grid_sample", "ctc_loss"])

# fractional max pooling, composed of gather / max (python/kiln/nn/modules/fractional.py)
from .modules.fractional import (fractional_max_pool2d,  # noqa: E402,F401
                                 fractional_max_pool2d_with_indices, fractional_max_pool3d,
                                 fractional_max_pool3d_with_indices)

__all__ += ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
            "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]

# linear + cross-entropy, chunked on request (torch 2.13's linear_cross_entropy)
from ._linear_cross_entropy import linear_cross_entropy  # noqa: E402,F401

__all__ += ["linear_cross_entropy"]
