"""A PNG encoder over zlib and struct: 8-bit grayscale, grayscale + alpha, RGB or RGBA from an
(H, W, C) uint8 array (C = 1, 2, 3, 4), non-interlaced.

Each scanline gets the filter (None, Sub, Up, Average, Paeth) with the smallest sum of
absolute filtered values, libpng's heuristic; the five candidates are computed for the whole
image at once with numpy. The image data is one IDAT chunk, zlib level 6 (PIL's default)."""
import struct
import zlib

import numpy as np

_COLOR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}   # channels -> PNG colour type
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def _filtered_rows(img, filter_type=None):
    """(H, 1 + W*C) uint8: every row prefixed by its filter type byte (the cheapest per row,
    or `filter_type` for all rows)."""
    h, w, c = img.shape
    x = img.reshape(h, w * c).astype(np.int16)
    left = np.zeros_like(x)
    left[:, c:] = x[:, :-c]
    up = np.zeros_like(x)
    up[1:] = x[:-1]

    def filtered(k):
        if k == 0:
            return x
        if k == 1:
            return (x - left) & 0xFF
        if k == 2:
            return (x - up) & 0xFF
        if k == 3:
            return (x - ((left + up) >> 1)) & 0xFF
        # Paeth: the neighbour nearest to left + up - up_left (ties: left, then up).
        up_left = np.zeros_like(x)
        up_left[1:, c:] = x[:-1, :-c]
        p = left + up - up_left
        pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - up_left)
        pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, up_left))
        return (x - pred) & 0xFF

    if filter_type is not None:
        best = np.full(h, filter_type)
        rows = filtered(filter_type)
    else:
        # Cost of a row: the sum of its bytes read as signed values (libpng's minimum-sum
        # rule); one filtered image at a time, to bound the memory.
        costs = np.empty((5, h), np.int64)
        for k in range(5):
            f = filtered(k)
            costs[k] = np.minimum(f, 256 - f).sum(axis=1)
        best = costs.argmin(axis=0)
        rows = np.empty_like(x)
        for k in np.unique(best):
            sel = best == k
            rows[sel] = filtered(k)[sel]
    return np.concatenate([best.astype(np.uint8)[:, None], rows.astype(np.uint8)], axis=1)


def encode_png(img, compress_level=6, filter_type=None):
    """PNG bytes of an (H, W, C) (or (H, W), taken as grayscale) uint8 array. `filter_type`
    (0-4) forces one filter on every row instead of the per-row choice."""
    img = np.asarray(img)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in _COLOR_TYPE:
        raise ValueError(f"a PNG image must be (H, W, C) with C in 1..4, got shape {img.shape}")
    if img.dtype != np.uint8:
        raise TypeError(f"a PNG image must be uint8, got {img.dtype}")
    h, w, c = img.shape
    if h == 0 or w == 0:
        raise ValueError(f"a PNG image must not be empty, got shape {img.shape}")
    if h >= 2 ** 31 or w >= 2 ** 31:
        raise ValueError(f"a PNG image is at most 2**31 - 1 pixels on a side, got {img.shape}")
    header = struct.pack(">IIBBBBB", w, h, 8, _COLOR_TYPE[c], 0, 0, 0)
    if filter_type not in (None, 0, 1, 2, 3, 4):
        raise ValueError(f"PNG filter types are 0 to 4, got {filter_type}")
    rows = _filtered_rows(np.ascontiguousarray(img), filter_type)
    data = zlib.compress(rows.tobytes(), compress_level)
    return (_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data)
            + _chunk(b"IEND", b""))
