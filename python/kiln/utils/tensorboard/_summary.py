"""The Summary messages SummaryWriter writes, encoded with ._proto: what
torch.utils.tensorboard.summary builds with the protobuf classes, computed the same way (numpy
for histograms, images and PR curves), returned as encoded `Summary` bytes.

Field numbers are those of tensorboard/compat/proto (summary.proto, tensor.proto,
tensor_shape.proto, types.proto), tensorboard/plugins/{hparams,text,pr_curve,custom_scalar}
and google/protobuf/struct.proto."""
import io
import wave

import numpy as np

from ._png import encode_png
from ._proto import Message

# tensorflow DataType enum (types.proto)
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_COMPLEX128, DT_HALF = 8, 9, 10, 14, 18, 19

# hparams plugin (tensorboard/plugins/hparams/metadata.py, api.proto)
HPARAMS_PLUGIN = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_INFO_TAG = "_hparams_/session_start_info"
SESSION_END_INFO_TAG = "_hparams_/session_end_info"
DATA_TYPE_STRING, DATA_TYPE_BOOL, DATA_TYPE_FLOAT64 = 1, 2, 3
STATUS_SUCCESS = 1


class DataFormatError(ValueError, AssertionError):
    """A bad shape, dataformats string or value for a summary. A ValueError, and an
    AssertionError too, which is what torch.utils.tensorboard raises for these (its checks
    are `assert`-like), so code written against torch catches it."""


# ---------------------------------------------------------------------------------- values

def make_np(x):
    """numpy array of a kiln tensor (detached, on the CPU; bfloat16 widened to float32),
    a numpy array (as is), an object with __array__ (e.g. a torch tensor) or a number
    (a 1-element array), as torch's make_np."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    from ... import _C
    if isinstance(x, _C.Tensor):
        if x.device.type == "meta":
            raise ValueError("a meta tensor has no values to write to TensorBoard")
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        if x.dtype == _C.bfloat16:   # numpy has no bfloat16; float32 holds it exactly
            x = x.float()
        return x.numpy()
    if hasattr(x, "__array__"):
        return np.asarray(x)
    raise NotImplementedError(
        f"Got {type(x)}, but numpy array or kiln tensor are expected.")


def check_tag(tag, what="tag"):
    if not isinstance(tag, str):
        raise TypeError(f"{what} must be a str, got {type(tag).__name__}")
    if not tag:
        raise ValueError(f"{what} must not be empty")
    return tag


def _summary(*values):
    """Summary{value: [...]} from encoded Summary.Value messages."""
    return Message().repeated_messages(1, values).encoded()


def _value(tag, *, simple_value=None, image=None, histo=None, audio=None, tensor=None,
           metadata=None):
    """Summary.Value: tag 1, simple_value 2, image 4, histo 5, audio 6, tensor 8, metadata 9."""
    v = Message().string(1, tag)
    if simple_value is not None:
        v.float(2, simple_value, keep=True)
    if image is not None:
        v.message(4, image)
    if histo is not None:
        v.message(5, histo)
    if audio is not None:
        v.message(6, audio)
    if tensor is not None:
        v.message(8, tensor)
    if metadata is not None:
        v.message(9, metadata)
    return v


def _metadata(plugin_name, content=b""):
    """SummaryMetadata{plugin_data: PluginData{plugin_name 1, content 2}}."""
    return Message().message(1, Message().string(1, plugin_name).bytes(2, content))


def _shape(dims):
    """TensorShapeProto{dim (2): [Dim{size (1)}]}."""
    return Message().repeated_messages(2, (Message().varint(1, d) for d in dims))


# ---------------------------------------------------------------------------------- scalars

def scalar_value(value):
    arr = make_np(value).squeeze()
    if arr.ndim != 0:
        raise DataFormatError(
            f"a scalar must have one element, got {arr.size} elements in "
            f"{make_np(value).ndim} dimensions")
    return float(arr)


def scalar(tag, value, new_style=False, double_precision=False):
    value = scalar_value(value)
    if not new_style:
        return _summary(_value(tag, simple_value=value))
    if double_precision:
        t = Message().varint(1, DT_DOUBLE).packed_doubles(6, [value])
    else:
        t = Message().varint(1, DT_FLOAT).packed_floats(5, [value])
    return _summary(_value(tag, tensor=t, metadata=_metadata("scalars")))


# ------------------------------------------------------------------------------- histograms

def default_bins():
    """torch's (and TensorFlow's) default bucket limits: +-1e-12 * 1.1**k up to 1e20, and 0."""
    v = 1e-12
    buckets, neg_buckets = [], []
    while v < 1e20:
        buckets.append(v)
        neg_buckets.append(-v)
        v *= 1.1
    return neg_buckets[::-1] + [0] + buckets


def histogram_proto(min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    """HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7."""
    return (Message().double(1, min).double(2, max).double(3, num).double(4, sum)
            .double(5, sum_squares).packed_doubles(6, bucket_limits)
            .packed_doubles(7, bucket_counts))


def _floats(x):
    """A list of floats from a list / tuple of numbers, an array or a kiln tensor."""
    arr = np.asarray(x if isinstance(x, (list, tuple)) else make_np(x), dtype=np.float64)
    return arr.reshape(-1).tolist()


def histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    limits, counts = _floats(bucket_limits), _floats(bucket_counts)
    if len(limits) != len(counts):
        raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
    h = histogram_proto(float(min), float(max), float(num), float(sum), float(sum_squares),
                        limits, counts)
    return _summary(_value(tag, histo=h))


def make_histogram(values, bins, max_bins=None):
    """(min, max, num, sum, sum_squares, limits, counts) as torch's make_histogram: numpy's
    histogram over `bins`, optionally merged down to at most max_bins, trimmed to the buckets
    from one before the first non-empty one to the last non-empty one."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    num_bins = len(counts)
    if max_bins is not None and num_bins > max_bins:
        subsampling = num_bins // max_bins
        subsampling_remainder = num_bins % subsampling
        if subsampling_remainder != 0:
            counts = np.pad(counts, pad_width=[[0, subsampling - subsampling_remainder]],
                            mode="constant", constant_values=0)
        counts = counts.reshape(-1, subsampling).sum(axis=-1)
        new_limits = np.empty((counts.size + 1,), limits.dtype)
        new_limits[:-1] = limits[:-1:subsampling]
        new_limits[-1] = limits[-1]
        limits = new_limits
    cum_counts = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(cum_counts, [0, cum_counts[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    # TensorBoard keeps right bucket limits only: an empty bucket on the left keeps the
    # leftmost limit.
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    if counts.size == 0 or limits.size == 0:
        raise ValueError("The histogram is empty (no value falls inside the bins)")
    return (values.min(), values.max(), len(values), values.sum(), values.dot(values),
            limits.tolist(), counts.tolist())


def histogram(tag, values, bins, max_bins=None):
    values = make_np(values)
    if values.dtype.kind == "c":
        raise TypeError("a histogram needs real values, got a complex array")
    h = histogram_proto(*make_histogram(values.astype(float), bins, max_bins))
    return _summary(_value(tag, histo=h))


# ----------------------------------------------------------------------------------- images

_LAYOUTS = {4: "NCHW", 3: "HWC", 2: "HW"}


def _check_dataformats(shape, dataformats):
    if not isinstance(dataformats, str):
        raise TypeError("dataformats must be a str such as 'CHW', got "
                        f"{type(dataformats).__name__}")
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt):
        raise DataFormatError(
            f"You can not use the same dimension shorthand twice. input_format: {dataformats}")
    if len(shape) != len(fmt):
        raise DataFormatError(
            f"size of input tensor and input format are different. tensor shape: "
            f"{tuple(shape)}, input_format: {dataformats}")
    want = _LAYOUTS.get(len(fmt))
    if want is None or set(fmt) != set(want):
        raise DataFormatError(
            f"dataformats {dataformats!r} is not a permutation of NCHW, CHW/HWC or HW")
    return fmt


def make_grid(imgs, ncols=8):
    """(N, C, H, W) with C 1 or 3 -> (3, H*rows, W*cols), images left to right, row by row."""
    if imgs.ndim == 4 and imgs.shape[1] == 1:
        imgs = np.concatenate([imgs, imgs, imgs], 1)
    if imgs.ndim != 4 or imgs.shape[1] != 3:
        raise DataFormatError(
            f"a batch of images must have 1 or 3 channels, got shape {imgs.shape} (N, C, H, W)")
    nimg, _, h, w = imgs.shape
    ncols = min(nimg, ncols)
    nrows = int(np.ceil(float(nimg) / ncols)) if nimg else 0
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=imgs.dtype)
    for i in range(nimg):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = imgs[i]
    return canvas


def convert_to_hwc(arr, dataformats):
    fmt = _check_dataformats(arr.shape, dataformats)
    if len(fmt) == 4:
        return make_grid(arr.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        if hwc.shape[2] == 1:
            hwc = np.concatenate([hwc, hwc, hwc], 2)
        return hwc
    hw = arr.transpose([fmt.find(c) for c in "HW"])
    return np.stack([hw, hw, hw], 2)


def to_uint8(arr):
    """uint8 arrays as they are; anything else is taken to be in [0, 1], scaled by 255,
    clipped to [0, 255] and truncated (torch's rule)."""
    scale = 1 if arr.dtype == np.uint8 else 255
    if arr.dtype.kind == "c":
        raise TypeError("an image needs real values, got a complex array")
    with np.errstate(invalid="ignore"):
        return (arr.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def image_proto(hwc):
    """Summary.Image: height 1, width 2, colorspace 3, encoded_image_string 4 (PNG)."""
    h, w, c = hwc.shape
    if c not in (1, 2, 3, 4):
        raise DataFormatError(f"an image must have 1, 2, 3 or 4 channels, got {c} "
                              f"(shape after conversion to HWC: {hwc.shape})")
    if h == 0 or w == 0:
        raise DataFormatError(f"an image must not be empty, got height {h} and width {w}")
    return (Message().varint(1, h).varint(2, w).varint(3, c)
            .bytes(4, encode_png(np.ascontiguousarray(hwc))))


def image(tag, img, dataformats="NCHW"):
    hwc = to_uint8(convert_to_hwc(make_np(img), dataformats))
    return _summary(_value(tag, image=image_proto(hwc)))


def figure_to_image(figures, close=True):
    """Render matplotlib figure(s) to CHW (NCHW for a list) uint8 arrays (torch's helper)."""
    import matplotlib.backends.backend_agg as plt_backend_agg
    import matplotlib.pyplot as plt

    def render(figure):
        canvas = plt_backend_agg.FigureCanvasAgg(figure)
        canvas.draw()
        data = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8)
        w, h = figure.canvas.get_width_height()
        chw = np.moveaxis(data.reshape([h, w, 4])[:, :, 0:3], source=2, destination=0)
        if close:
            plt.close(figure)
        return chw

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)


# ------------------------------------------------------------------------------ text, audio

def text(tag, text_string):
    """A DT_STRING tensor of shape [1] under the "text" plugin (TextPluginData{version: 0}
    encodes to nothing), tagged `tag + "/text_summary"` as torch."""
    if not isinstance(text_string, str):
        raise TypeError(f"text_string must be a str, got {type(text_string).__name__}")
    t = (Message().varint(1, DT_STRING).message(2, _shape([1]))
         .repeated_bytes(8, [text_string.encode("utf-8")]))
    return _summary(_value(tag + "/text_summary", tensor=t, metadata=_metadata("text")))


def audio(tag, snd, sample_rate=44100):
    """Summary.Audio: sample_rate 1, num_channels 2, length_frames 3, encoded_audio_string 4,
    content_type 5; mono 16-bit WAV, values clipped to [-1, 1] as torch."""
    arr = make_np(snd).squeeze()
    if arr.ndim != 1:
        raise DataFormatError(f"audio must be one-dimensional (L or 1 x L), got {arr.shape}")
    if arr.size and abs(arr).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        arr = arr.clip(-1, 1)
    arr = (arr * np.iinfo(np.int16).max).astype("<i2")
    fio = io.BytesIO()
    with wave.open(fio, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(arr.tobytes())
    a = (Message().float(1, sample_rate).varint(2, 1).varint(3, arr.shape[-1])
         .bytes(4, fio.getvalue()).string(5, "audio/wav"))
    return _summary(_value(tag, audio=a))


# ---------------------------------------------------------------------------------- tensors

def tensor_proto(tag, value):
    """The whole tensor under the "tensor" plugin, dtype and value field as torch's
    _TENSOR_TYPE_MAP (float16 / bfloat16 in half_val as their 16-bit patterns)."""
    arr = make_np(value)
    from ... import _C
    is_bf16 = isinstance(value, _C.Tensor) and value.dtype == _C.bfloat16
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    flat = arr.reshape(-1)
    t = Message()
    if is_bf16:
        bits = (np.ascontiguousarray(flat, dtype=np.float32).view(np.uint32) >> 16)
        t.varint(1, DT_BFLOAT16).message(2, _shape(arr.shape)).packed_varints(13, bits.tolist())
    elif kind == "f" and size == 2:
        t.varint(1, DT_HALF).message(2, _shape(arr.shape)).packed_varints(
            13, flat.view(np.uint16).tolist())
    elif kind == "f" and size == 4:
        t.varint(1, DT_FLOAT).message(2, _shape(arr.shape)).packed_floats(5, flat.tolist())
    elif kind == "f" and size == 8:
        t.varint(1, DT_DOUBLE).message(2, _shape(arr.shape)).packed_doubles(6, flat.tolist())
    elif kind == "u" and size == 1:
        t.varint(1, DT_UINT8).message(2, _shape(arr.shape)).packed_varints(16, flat.tolist())
    elif kind == "i" and size in (1, 2, 4):
        dt = {1: DT_INT8, 2: DT_INT16, 4: DT_INT32}[size]
        t.varint(1, dt).message(2, _shape(arr.shape)).packed_varints(7, flat.tolist())
    elif kind == "i" and size == 8:
        t.varint(1, DT_INT64).message(2, _shape(arr.shape)).packed_varints(10, flat.tolist())
    elif kind == "b":
        t.varint(1, DT_BOOL).message(2, _shape(arr.shape)).packed_varints(11, flat.tolist())
    elif kind == "c":
        pairs = np.stack([flat.real, flat.imag], -1).reshape(-1).tolist()
        if size == 8:
            t.varint(1, DT_COMPLEX64).message(2, _shape(arr.shape)).packed_floats(9, pairs)
        else:
            t.varint(1, DT_COMPLEX128).message(2, _shape(arr.shape)).packed_doubles(12, pairs)
    else:
        raise ValueError(f"{tag} has unsupported tensor dtype {arr.dtype}")
    return _summary(_value(tag, tensor=t, metadata=_metadata("tensor")))


# -------------------------------------------------------------------------------- pr curves

def _pr_tensor(data, num_thresholds):
    plugin_content = Message().varint(2, num_thresholds).encoded()   # PrCurvePluginData
    t = (Message().varint(1, DT_FLOAT).message(2, _shape(data.shape))
         .packed_floats(5, data.reshape(-1).tolist()))
    return t, _metadata("pr_curves", plugin_content)


def compute_curve(labels, predictions, num_thresholds=None, weights=None):
    """tp, fp, tn, fn, precision, recall per threshold (torch's / TensorBoard's rule)."""
    minimum_count = 1e-7
    if weights is None:
        weights = 1.0
    bucket_indices = np.int32(np.floor(predictions * (num_thresholds - 1)))
    float_labels = labels.astype(np.float64)
    histogram_range = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=float_labels * weights)
    fp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=(1.0 - float_labels) * weights)
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(minimum_count, tp + fp)
    recall = tp / np.maximum(minimum_count, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    num_thresholds = min(num_thresholds, 127)
    labels, predictions = make_np(labels), make_np(predictions)
    if labels.shape != predictions.shape:
        raise DataFormatError(f"labels {labels.shape} and predictions {predictions.shape} "
                              "must have the same shape")
    if weights is not None:
        weights = make_np(weights)
    data = compute_curve(labels, predictions, num_thresholds=num_thresholds, weights=weights)
    t, md = _pr_tensor(data, num_thresholds)
    return _summary(_value(tag, tensor=t, metadata=md))


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127):
    num_thresholds = min(num_thresholds, 127)
    parts = [np.asarray(_floats(x)) for x in (tp, fp, tn, fn, precision, recall)]
    if len({p.shape for p in parts}) != 1:
        raise DataFormatError("the six PR-curve arrays must have the same length, got "
                              f"{[p.size for p in parts]}")
    t, md = _pr_tensor(np.stack(parts), num_thresholds)
    return _summary(_value(tag, tensor=t, metadata=md))


# --------------------------------------------------------------------------- custom scalars

def custom_scalars(layout):
    """Layout{category 2: [Category{title 1, chart 2: [Chart{title 1, multiline 2 |
    margin 3}]}]} as a DT_STRING scalar tensor tagged custom_scalars__config__."""
    categories = []
    for cat_title, charts in layout.items():
        cat = Message().string(1, cat_title)
        for chart_title, (kind, tags) in charts.items():
            chart = Message().string(1, chart_title)
            if kind == "Margin":
                if len(tags) != 3:
                    raise DataFormatError(f"a Margin chart needs 3 tags, got {len(tags)}")
                series = Message().string(1, tags[0]).string(2, tags[1]).string(3, tags[2])
                chart.message(3, Message().message(1, series))
            else:
                chart.message(2, Message().repeated_strings(1, tags))
            cat.message(2, chart)
        categories.append(cat)
    layout_bytes = Message().repeated_messages(2, categories).encoded()
    t = Message().varint(1, DT_STRING).message(2, _shape([])).repeated_bytes(8, [layout_bytes])
    return _summary(_value("custom_scalars__config__", tensor=t,
                           metadata=_metadata("custom_scalars")))


# ---------------------------------------------------------------------------------- hparams

def _struct_value(v):
    """google.protobuf.Value: number_value 2 or string_value 3 (a oneof: written even when
    0 / ""). bool_value (4) is never used: torch writes bools as numbers."""
    if isinstance(v, str):
        return Message().string(3, v, keep=True)
    return Message().double(2, v, keep=True)


def _hparams_summary(tag, field, msg):
    """Summary for one HParamsPluginData field (version 0 is the default, left out)."""
    content = Message().message(field, msg).encoded()
    return _summary(_value(tag, metadata=_metadata(HPARAMS_PLUGIN, content)))


def _hparam_number(v):
    from ... import _C
    if isinstance(v, _C.Tensor) or isinstance(v, np.ndarray):
        arr = make_np(v).reshape(-1)
        if arr.size == 0:
            raise ValueError("an hparam tensor must have at least one element")
        return arr[0].item()
    if isinstance(v, np.generic):
        return v.item()
    return v


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """(experiment, session_start_info, session_end_info) Summary bytes, as torch's
    summary.hparams. Like torch, bools are numbers here (isinstance(True, int)): they are
    written as number_value 1.0 / 0.0 of a DATA_TYPE_FLOAT64 hparam."""
    if not isinstance(hparam_dict, dict):
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    hparam_domain_discrete = hparam_domain_discrete or {}
    if not isinstance(hparam_domain_discrete, dict):
        raise TypeError(
            "parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in hparam_domain_discrete.items():
        if (k not in hparam_dict or not isinstance(v, list)
                or not all(isinstance(d, type(hparam_dict[k])) for d in v)):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same "
                            f"type as hparam_dict[{k}].")
    infos, start_entries = [], []
    for k, v in hparam_dict.items():
        if not isinstance(k, str):
            raise TypeError(f"hparam names must be str, got {type(k).__name__}")
        if v is None:
            continue
        tensor_like = not isinstance(v, (int, float, str, bool))
        v = _hparam_number(v)
        if isinstance(v, (int, float)):
            value, dtype = _struct_value(float(v)), DATA_TYPE_FLOAT64
            domain = None if tensor_like or k not in hparam_domain_discrete else \
                [_struct_value(float(d)) for d in hparam_domain_discrete[k]]
        elif isinstance(v, str):
            value, dtype = _struct_value(v), DATA_TYPE_STRING
            domain = None if k not in hparam_domain_discrete else \
                [_struct_value(d) for d in hparam_domain_discrete[k]]
        else:
            raise ValueError("value should be one of int, float, str, bool, or kiln.Tensor")
        # HParamInfo: name 1, type 4, domain_discrete 5 (ListValue{values 1})
        info = Message().string(1, k).varint(4, dtype)
        if domain is not None:
            info.message(5, Message().repeated_messages(1, domain))
        infos.append(info)
        # SessionStartInfo.hparams map entry: key 1, value 2
        start_entries.append(Message().string(1, k, keep=True).message(2, value))
    for k in metric_dict:
        if not isinstance(k, str):
            raise TypeError(f"metric names must be str, got {type(k).__name__}")
    # MetricInfo{name 1: MetricName{tag 2}}
    metrics = [Message().message(1, Message().string(2, k)) for k in metric_dict]
    experiment = Message().repeated_messages(4, infos).repeated_messages(5, metrics)
    start = Message().repeated_messages(1, start_entries)
    end = Message().varint(1, STATUS_SUCCESS)
    return (_hparams_summary(EXPERIMENT_TAG, 2, experiment),
            _hparams_summary(SESSION_START_INFO_TAG, 3, start),
            _hparams_summary(SESSION_END_INFO_TAG, 4, end))

