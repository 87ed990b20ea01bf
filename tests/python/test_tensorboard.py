"""kiln.utils.tensorboard.SummaryWriter (decision 0113).

Part 1 needs nothing beyond numpy: the test's own bit-by-bit CRC-32C, protobuf wire parser,
TFRecord reader and PNG decoder (independent of the writer's table-driven / numpy code) check
the checksums against RFC 3720's vectors, event bytes against hand-encoded ones, the framing,
flushing, file names, errors and that writing needs neither tensorboard nor protobuf.

Part 2 needs the tensorboard package (skipped without it): TensorBoard's own readers
(the record reader that checks both CRCs, EventAccumulator, the plugins' protos) read what
kiln wrote, and torch.utils.tensorboard writes the same calls with the same wall times: the
events must be byte-identical (images: same size and decoded pixels; hparams: same parsed
plugin data), add_scalars / add_hparams / add_embedding must lay out the same files."""
import gc
import glob
import math
import os
import re
import socket
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
import torch

import kiln
from kiln.utils.tensorboard import SummaryWriter
from kiln.utils.tensorboard import _crc32c, _png, _proto, _summary


# ================================================================== independent helpers

def _crc32c_bitwise(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c_bitwise(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _records(path):
    """The records of a TFRecord file; asserts both CRCs of each and a clean end."""
    with open(path, "rb") as f:
        data = f.read()
    out, i = [], 0
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hcrc == _masked(header), "bad length CRC"
        body = data[i + 12:i + 12 + n]
        assert len(body) == n, "truncated record"
        (dcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert dcrc == _masked(body), "bad data CRC"
        out.append(body)
        i += 16 + n
    assert i == len(data)
    return out


def _uvarint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _pb(data):
    """Protobuf wire format -> {field: [raw values]} (varints as ints, fixed as bytes)."""
    out, i = {}, 0
    while i < len(data):
        k, i = _uvarint(data, i)
        field, wt = k >> 3, k & 7
        if wt == 0:
            v, i = _uvarint(data, i)
        elif wt == 1:
            v, i = data[i:i + 8], i + 8
        elif wt == 2:
            n, i = _uvarint(data, i)
            v, i = data[i:i + n], i + n
        elif wt == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise AssertionError(f"wire type {wt}")
        out.setdefault(field, []).append(v)
    return out


def _one(msg, field):
    (v,) = msg[field]
    return v


def _events(logdir):
    """Parsed events of the one event file in logdir."""
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    return [_pb(r) for r in _records(path)]


def _summary_value(event):
    return _pb(_one(_pb(_one(event, 5)), 1))


def _png_decode(data):
    """(H, W, C) uint8 of an 8-bit non-interlaced PNG; checks every chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat, kinds = 8, b"", []
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        assert crc == zlib.crc32(kind + body)
        kinds.append(kind)
        if kind == b"IHDR":
            w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", body)
            assert (depth, comp, filt, inter) == (8, 0, 0, 0)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    c = {0: 1, 4: 2, 2: 3, 6: 4}[ctype]
    raw, stride = zlib.decompress(idat), w * c
    rows, prev, filters = [], bytearray(stride), []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        filters.append(ft)
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - c] if x >= c else 0
            b = prev[x]
            d = prev[x - c] if x >= c else 0
            if ft == 1:
                pred = a
            elif ft == 2:
                pred = b
            elif ft == 3:
                pred = (a + b) >> 1
            elif ft == 4:
                p = a + b - d
                pa, pb_, pc = abs(p - a), abs(p - b), abs(p - d)
                pred = a if pa <= pb_ and pa <= pc else (b if pb_ <= pc else d)
            else:
                assert ft == 0
                pred = 0
            line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return np.frombuffer(b"".join(rows), np.uint8).reshape(h, w, c), filters


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ============================================================ part 1: no tensorboard needed

def test_crc32c_known_vectors():
    # RFC 3720 (iSCSI) B.4 and the classic check value.
    cases = {b"123456789": 0xE3069283, bytes(32): 0x8A9136AA, b"\xff" * 32: 0x62A8AB43,
             bytes(range(32)): 0x46DD794E, bytes(range(31, -1, -1)): 0x113FDB5C, b"": 0}
    for data, want in cases.items():
        assert _crc32c.crc32c(data) == want, data
        assert _crc32c_bitwise(data) == want, data
    rng = np.random.default_rng(0)
    for n in [1, 7, 8, 9, 63, 1000]:
        data = rng.integers(0, 256, n).astype(np.uint8).tobytes()
        assert _crc32c.crc32c(data) == _crc32c_bitwise(data)
        assert _crc32c.crc32c(data[n // 2:], _crc32c.crc32c(data[:n // 2])) == \
            _crc32c_bitwise(data)
        assert _crc32c.masked_crc32c(data) == _masked(data)
    # masked CRC of the 8-byte length 0 (every empty record's header checksum)
    assert _crc32c.masked_crc32c(bytes(8)) == _masked(bytes(8))


def test_protobuf_encoder_wire_format():
    assert _proto.varint(0) == b"\x00"
    assert _proto.varint(1) == b"\x01"
    assert _proto.varint(300) == b"\xac\x02"
    assert _proto.varint(-1) == b"\xff" * 9 + b"\x01"
    m = _proto.Message
    # proto3 defaults are left out; -0.0 is not a default; keep=True forces a field.
    assert m().varint(1, 0).double(2, 0.0).string(3, "").bytes(4, b"").encoded() == b""
    assert m().double(1, -0.0).encoded() == b"\x09" + struct.pack("<d", -0.0)
    assert m().double(1, 0.0, keep=True).encoded() == b"\x09" + bytes(8)
    assert m().varint(2, 5).string(3, "hé").encoded() == b"\x10\x05\x1a\x03h\xc3\xa9"
    assert m().message(5, m()).encoded() == b"\x2a\x00"
    assert m().packed_doubles(6, [1.0, 2.0]).encoded() == \
        b"\x32\x10" + struct.pack("<2d", 1.0, 2.0)
    # a double beyond float32's range is written as inf, as protobuf stores it
    assert m().float(2, 1e300).encoded() == b"\x15" + struct.pack("<f", math.inf)
    assert m().packed_varints(1, [1, 300]).encoded() == b"\x0a\x03\x01\xac\x02"


def test_png_encoder_round_trip():
    rng = np.random.default_rng(1)
    for shape in [(1, 1, 3), (5, 7, 1), (6, 4, 2), (9, 11, 3), (8, 5, 4)]:
        img = rng.integers(0, 256, shape).astype(np.uint8)
        got, _ = _png_decode(_png.encode_png(img))
        np.testing.assert_array_equal(got, img)
    # every filter type forced on every row, on low-entropy images (many Paeth ties)
    for ft in range(5):
        for shape in [(7, 9, 3), (6, 5, 1), (5, 6, 4)]:
            img = rng.integers(0, 4, shape).astype(np.uint8) * 60
            got, filters = _png_decode(_png.encode_png(img, filter_type=ft))
            assert set(filters) == {ft}
            np.testing.assert_array_equal(got, img)
    # a smooth image: the per-row filter choice must use more than one filter type
    yy, xx = np.mgrid[0:24, 0:20]
    img = np.stack([xx * 10, yy * 10, (xx * yy) % 256, 255 - xx], -1).astype(np.uint8)
    got, filters = _png_decode(_png.encode_png(img))
    np.testing.assert_array_equal(got, img)
    assert len(set(filters)) > 1
    with pytest.raises(ValueError):
        _png.encode_png(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(TypeError):
        _png.encode_png(np.zeros((2, 2, 3), np.float32))


def test_event_bytes_hand_encoded(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("a", 1.0, 2, walltime=3.0)
        w.add_scalar("b", kiln.tensor(0.5), -1, walltime=4.0)   # negative int64 step
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    recs = _records(path)
    assert len(recs) == 3
    # Event{wall_time 3.0, step 2, summary{value{tag "a", simple_value 1.0}}}
    want = bytes.fromhex("090000000000000840" "1002" "2a0a" "0a08" "0a0161" "150000803f")
    assert recs[1] == want
    want_b = (b"\x09" + struct.pack("<d", 4.0) + b"\x10" + b"\xff" * 9 + b"\x01"
              + bytes.fromhex("2a0a0a080a0162" "150000003f"))
    assert recs[2] == want_b
    # the framing of the first record, byte for byte
    with open(path, "rb") as f:
        head = f.read(12 + len(recs[0]) + 4)
    n = struct.pack("<Q", len(recs[0]))
    assert head == n + struct.pack("<I", _masked(n)) + recs[0] + \
        struct.pack("<I", _masked(recs[0]))
    first = _pb(recs[0])
    assert _one(first, 3) == b"brain.Event:2"
    assert _one(_pb(_one(first, 10)), 1) == b"kiln.utils.tensorboard"
    assert abs(struct.unpack("<d", _one(first, 1))[0] - time.time()) < 600


def test_file_name_default_logdir_and_suffix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1", filename_suffix=".v2")
    w.close()
    host = re.escape(socket.gethostname())
    assert re.fullmatch(r"runs/[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + host + r"_lr0\.1",
                        w.get_logdir()), w.get_logdir()
    (name,) = os.listdir(w.get_logdir())
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\." + host + r"\.(\d+)\.(\d+)\.v2", name)
    assert m and int(m.group(2)) == os.getpid()
    assert abs(int(m.group(1)) - time.time()) < 600
    # a pathlib.Path log_dir; a second writer gets the next file number
    w2 = SummaryWriter(tmp_path / "p")
    w2.close()
    (name2,) = os.listdir(tmp_path / "p")
    assert int(name2.rsplit(".", 1)[1]) > int(m.group(3))


def test_values_kiln_numpy_python(tmp_path):
    vals = [0.5, 3, np.float64(0.25), np.array([1.5], np.float32), kiln.tensor(2.5),
            kiln.tensor([[7.0]]), kiln.randn(1, requires_grad=True) * 0 + 4.5,
            kiln.tensor(1.25).to(kiln.bfloat16), kiln.tensor(9, dtype=kiln.int64)]
    with SummaryWriter(tmp_path) as w:
        for i, v in enumerate(vals):
            w.add_scalar("s", v, global_step=kiln.tensor(i) if i == 2 else np.int64(i))
    evs = _events(tmp_path)[1:]
    assert len(evs) == len(vals)
    want = [0.5, 3, 0.25, 1.5, 2.5, 7.0, 4.5, 1.25, 9.0]
    for i, (ev, v) in enumerate(zip(evs, want)):
        assert ev.get(2, [0]) == [i]
        val = _summary_value(ev)
        assert _one(val, 1) == b"s"
        assert struct.unpack("<f", _one(val, 2))[0] == v


def test_new_style_scalar(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("f", 1 / 3, 1, new_style=True)
        w.add_scalar("d", 1 / 3, 2, new_style=True, double_precision=True)
    f, d = (_summary_value(e) for e in _events(tmp_path)[1:])
    tf, td = _pb(_one(f, 8)), _pb(_one(d, 8))
    assert _one(tf, 1) == 1 and struct.unpack("<f", _one(tf, 5))[0] == _f32(1 / 3)
    assert _one(td, 1) == 2 and struct.unpack("<d", _one(td, 6))[0] == 1 / 3
    assert _one(_pb(_one(_pb(_one(f, 9)), 1)), 1) == b"scalars"


def test_histogram_buckets_hand_computed(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", np.array([0.5, 1.5, 1.5, 3.0]), 1, bins=[0, 1, 2, 3, 4])
        w.add_histogram("t", kiln.tensor([1.0, 1.0, -2.0]), 2)          # tensorflow bins
        w.add_histogram_raw("r", 0, 5, 3, 6, 14, [1.0, 5.0], [1, 2], 3)
    h, t, r = (_pb(_one(_summary_value(e), 5)) for e in _events(tmp_path)[1:])

    def doubles(raw):
        return list(struct.unpack(f"<{len(raw) // 8}d", raw))
    assert [doubles(_one(h, k))[0] for k in (1, 2, 3, 4, 5)] == [0.5, 3.0, 4.0, 6.5, 13.75]
    assert doubles(_one(h, 6)) == [0, 1, 2, 3, 4]
    assert doubles(_one(h, 7)) == [0, 1, 2, 0, 1]
    # TensorFlow's buckets: -1e-12 * 1.1**k ... 1e-12 * 1.1**k; 1.0 and -2.0 fall in the
    # buckets whose right limits are the first of those >= the value.
    limits, counts = doubles(_one(t, 6)), doubles(_one(t, 7))
    assert sum(counts) == 3 and counts[0] == 0
    assert limits[0] < -2.0 <= limits[1] and limits[-2] < 1.0 <= limits[-1]
    assert counts[1] == 1 and counts[-1] == 2
    assert 1 not in r   # min 0 is proto3's default: left out
    assert doubles(_one(r, 6)) == [1.0, 5.0] and doubles(_one(r, 7)) == [1.0, 2.0]


def test_images_pixels(tmp_path):
    rng = np.random.default_rng(2)
    chw = rng.integers(0, 256, (3, 5, 7)).astype(np.uint8)
    hwc_f = rng.random((4, 6, 4)).astype(np.float32)
    hw = np.linspace(-0.5, 1.5, 12).reshape(3, 4)
    nchw = rng.random((3, 1, 2, 3))
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", chw, 0)
        w.add_image("hwc", kiln.tensor(hwc_f), 1, dataformats="HWC")
        w.add_image("hw", hw, 2, dataformats="HW")
        w.add_image("wh", hw.T, 3, dataformats="wh")
        w.add_images("batch", nchw, 4)
        w.add_image("gray", chw[:1], 5)
    imgs = [_pb(_one(_summary_value(e), 4)) for e in _events(tmp_path)[1:]]

    def pixels(img):
        arr, _ = _png_decode(_one(img, 4))
        assert (_one(img, 1), _one(img, 2), _one(img, 3)) == arr.shape
        return arr
    np.testing.assert_array_equal(pixels(imgs[0]), chw.transpose(1, 2, 0))
    np.testing.assert_array_equal(pixels(imgs[1]), (hwc_f * 255).astype(np.uint8))
    g = (hw.astype(np.float32) * 255).clip(0, 255).astype(np.uint8)
    np.testing.assert_array_equal(pixels(imgs[2]), np.stack([g, g, g], 2))
    np.testing.assert_array_equal(pixels(imgs[3]), np.stack([g, g, g], 2))
    grid = pixels(imgs[4])                                   # 3 images in one row
    assert grid.shape == (2, 9, 3)
    for k in range(3):
        want = (nchw[k, 0].astype(np.float32) * 255).astype(np.uint8)
        for c in range(3):
            np.testing.assert_array_equal(grid[:, 3 * k:3 * k + 3, c], want)
    np.testing.assert_array_equal(pixels(imgs[5]), np.repeat(chw[0][:, :, None], 3, 2))


def test_text_audio_tensor(tmp_path):
    snd = np.sin(np.linspace(0, 20, 100)) * 0.5
    with SummaryWriter(tmp_path) as w:
        w.add_text("note", "héllo **world**", 1)
        w.add_audio("snd", snd[None], 2, sample_rate=8000)
        w.add_tensor("half", kiln.tensor([1.0, -2.0]).half(), 3)
        w.add_tensor("i64", kiln.tensor([[1, -2]]), 4)
    text, snd_v, half, i64 = (_summary_value(e) for e in _events(tmp_path)[1:])
    assert _one(text, 1) == b"note/text_summary"
    t = _pb(_one(text, 8))
    assert _one(t, 1) == 7 and _one(t, 8) == "héllo **world**".encode()
    assert _pb(_one(_pb(_one(t, 2)), 2)) == {1: [1]}
    assert _one(_pb(_one(_pb(_one(text, 9)), 1)), 1) == b"text"
    a = _pb(_one(snd_v, 6))
    assert struct.unpack("<f", _one(a, 1))[0] == 8000 and _one(a, 3) == 100
    wav = _one(a, 4)
    assert wav[:4] == b"RIFF" and _one(a, 5) == b"audio/wav"
    pcm = np.frombuffer(wav[44:], "<i2")
    np.testing.assert_array_equal(pcm, (snd * 32767).astype("<i2"))
    h = _pb(_one(half, 8))
    assert _one(h, 1) == 19 and _one(h, 13) == b"\x80\x78\x80\x80\x03"   # 0x3c00, 0xc000
    i = _pb(_one(i64, 8))
    assert _one(i, 1) == 9 and [_pb(d)[1] for d in _pb(_one(i, 2))[2]] == [[1], [2]]


def test_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        E = _summary.DataFormatError
        assert issubclass(E, ValueError) and issubclass(E, AssertionError)
        img = np.zeros((3, 4, 5))
        with pytest.raises(E, match="different"):
            w.add_image("x", np.zeros((4, 5)))                 # CHW expected
        with pytest.raises(E, match="twice"):
            w.add_image("x", img, dataformats="CCW")
        with pytest.raises(E, match="permutation"):
            w.add_image("x", img, dataformats="CHX")
        with pytest.raises(E, match="permutation"):
            w.add_image("x", np.zeros((1, 3, 4, 5, 6)), dataformats="NCHWD")
        with pytest.raises(E, match="channels"):
            w.add_image("x", np.zeros((4, 5, 6)), dataformats="HWC")
        with pytest.raises(E, match="1 or 3 channels"):
            w.add_images("x", np.zeros((2, 4, 5, 6)))
        with pytest.raises(E, match="empty"):
            w.add_image("x", np.zeros((3, 0, 5)))
        with pytest.raises(TypeError, match="dataformats"):
            w.add_image("x", img, dataformats=None)
        with pytest.raises(TypeError, match="tag"):
            w.add_scalar(3, 1.0)
        with pytest.raises(ValueError, match="empty"):
            w.add_scalar("", 1.0)
        with pytest.raises(E, match="one element"):
            w.add_scalar("x", kiln.tensor([1.0, 2.0]))
        with pytest.raises(NotImplementedError, match="numpy array or kiln tensor"):
            w.add_scalar("x", [1.0])
        with pytest.raises(ValueError, match="no element"):
            w.add_histogram("x", np.zeros(0))
        with pytest.raises(ValueError, match="bucket"):
            w.add_histogram_raw("x", 0, 1, 1, 1, 1, [1.0, 2.0], [1])
        with pytest.raises(TypeError, match="str"):
            w.add_text("x", 5)
        with pytest.raises(TypeError, match="dictionary"):
            w.add_hparams([("lr", 1)], {})
        with pytest.raises(ValueError, match="one of int"):
            w.add_hparams({"lr": [1, 2]}, {"m": 1.0})
        with pytest.raises(TypeError, match="tag_scalar_dict"):
            w.add_scalars("m", [1.0])
        with pytest.raises(E, match="mat should be 2D"):
            w.add_embedding(np.zeros(3))
        with pytest.raises(NotImplementedError, match="graph"):
            w.add_graph(kiln.nn.Linear(2, 2), kiln.randn(1, 2))
        with pytest.raises(ValueError, match="meta"):
            w.add_scalar("x", kiln.empty(1, device="meta"))
    # nothing was written by the failed calls, and no hparams run directory was made
    assert len(_events(tmp_path)) == 1
    assert [p for p in os.listdir(tmp_path) if not p.startswith("events")] == []


def test_flush_queue_thread_and_finalizer(tmp_path):
    w = SummaryWriter(tmp_path / "q", max_queue=3, flush_secs=1000)
    (path,) = glob.glob(str(tmp_path / "q" / "events.*"))
    w.add_scalar("s", 1, 1)
    w.add_scalar("s", 2, 2)
    assert len(_records(path)) == 1          # only the file_version event so far
    w.add_scalar("s", 3, 3)                  # the third pending record flushes
    assert len(_records(path)) == 4
    w.add_scalar("s", 4, 4)
    w.flush()
    assert len(_records(path)) == 5
    w.close()
    w.close()                                # a second close is harmless
    w.add_scalar("s", 5, 5)                  # after close: a new event file, as torch
    w.close()
    assert len(glob.glob(str(tmp_path / "q" / "events.*"))) == 2

    # the flush thread writes pending events after flush_secs
    w2 = SummaryWriter(tmp_path / "t", flush_secs=0.2)
    (path2,) = glob.glob(str(tmp_path / "t" / "events.*"))
    w2.add_scalar("s", 1, 1)
    assert len(_records(path2)) == 1
    deadline = time.time() + 10
    while len(_records(path2)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(_records(path2)) == 2
    w2.close()

    # a writer dropped without close() is flushed by its finalizer
    w3 = SummaryWriter(tmp_path / "g", flush_secs=1000)
    w3.add_scalar("s", 1, 1)
    (path3,) = glob.glob(str(tmp_path / "g" / "events.*"))
    assert len(_records(path3)) == 1
    del w3
    gc.collect()
    assert len(_records(path3)) == 2


def test_purge_step_and_add_scalars_layout(tmp_path):
    with SummaryWriter(tmp_path, purge_step=7) as w:
        w.add_scalars("loss/run", {"train": 1.0, "val": kiln.tensor(2.0)}, 3, walltime=5.0)
        w.add_scalars("loss/run", {"train": 0.5}, 4)
    evs = _events(tmp_path)
    assert _one(evs[1], 2) == 7 and _one(evs[1], 3) == b"brain.Event:2"
    assert _one(evs[2], 2) == 7 and _pb(_one(evs[2], 7)) == {1: [1]}    # SessionLog START
    assert sorted(os.listdir(tmp_path))[1:] == ["loss_run_train", "loss_run_val"]
    train = _events(tmp_path / "loss_run_train")[1:]
    val = _events(tmp_path / "loss_run_val")[1:]
    assert [_one(e, 2) for e in train] == [3, 4] and [_one(e, 2) for e in val] == [3]
    assert _one(_summary_value(val[0]), 1) == b"loss/run"
    assert struct.unpack("<d", _one(train[0], 1))[0] == 5.0


def test_import_is_lazy_and_needs_no_tensorboard(tmp_path):
    code = f"""
import sys
import kiln
assert "kiln.utils.tensorboard" not in sys.modules
from kiln.utils.tensorboard import SummaryWriter
import numpy as np
with SummaryWriter({str(tmp_path)!r}) as w:
    w.add_scalar("a", 1.0, 1)
    w.add_histogram("h", np.arange(10.0), 1)
    w.add_image("i", np.zeros((3, 4, 4)), 1)
    w.add_text("t", "x", 1)
    w.add_hparams({{"lr": 0.1}}, {{"m": 1.0}}, run_name="r")
bad = [m for m in sys.modules
       if m.split(".")[0] in ("tensorboard", "google", "PIL", "torch", "tensorflow")]
assert not bad, bad
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert len(_events(tmp_path)) == 5


# ====================================================== part 2: against tensorboard and torch

@pytest.fixture
def tb():
    return pytest.importorskip("tensorboard")


def _tb_events(logdir):
    """Events of logdir's one event file read by TensorBoard's record reader (which raises
    DataLossError on a bad CRC) and parsed with its protos."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
    (path,) = glob.glob(os.path.join(str(logdir), "events.out.tfevents.*"))
    reader, out = PyRecordReader_New(path), []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return out
        out.append(event_pb2.Event.FromString(reader.record()))


def _scenario(w, T, walltime=1000.0):
    """The same calls for kiln's writer (T = kiln.tensor) and torch's (T = torch.tensor)."""
    rng = np.random.default_rng(3)
    vals = rng.standard_normal(500).astype(np.float32)
    w.add_scalar("loss", 0.5, 0, walltime=walltime)
    w.add_scalar("loss", T(0.25), 1, walltime=walltime + 1)
    w.add_scalar("loss", T([1e300]) if T is not kiln.tensor else 1e300, 2, walltime=walltime + 2)
    w.add_scalar("acc", np.float32(0.125), -3, walltime=walltime + 3)
    w.add_scalar("ns", T([3.5]), 4, walltime=walltime + 4, new_style=True)
    w.add_scalar("nsd", 1 / 3, 5, walltime=walltime + 5, new_style=True, double_precision=True)
    w.add_histogram("h", T(vals), 6, walltime=walltime + 6)
    w.add_histogram("h_auto", vals * 3, 7, bins="auto", walltime=walltime + 7)
    w.add_histogram("h_int", np.arange(20) % 7, 8, bins=5, walltime=walltime + 8)
    w.add_histogram("h_max", vals, 9, bins=50, max_bins=7, walltime=walltime + 9)
    w.add_histogram("h_const", np.zeros(4), 10, walltime=walltime + 10)
    w.add_histogram_raw("raw", -1.0, 4.0, 5, 7.5, 20.25, [0.0, 2.0, 4.0], [1, 3, 1], 11,
                        walltime=walltime + 11)
    w.add_text("note", "héllo\n**world**", 12, walltime=walltime + 12)
    labels = (rng.random(100) > 0.5).astype(np.int64)
    preds = np.clip(labels * 0.3 + rng.random(100) * 0.7, 0, 1)
    w.add_pr_curve("pr", labels, preds, 13, num_thresholds=11, walltime=walltime + 13)
    w.add_pr_curve("pr_big", labels, preds, 13, num_thresholds=200, walltime=walltime + 13)
    w.add_pr_curve("pr_w", T(labels), T(preds), 14, weights=rng.random(100),
                   walltime=walltime + 14)
    w.add_pr_curve_raw("pr_raw", [5, 3, 0], [5, 2, 0], [0, 3, 5], [0, 2, 5], [0.5, 0.6, 0],
                       [1, 0.6, 0], 15, num_thresholds=3, walltime=walltime + 15)
    w.add_tensor("tf32", T([[1.5, -2.0, 3.25]]), 16, walltime=walltime + 16)
    w.add_tensor("ti64", T([7, -8]), 17, walltime=walltime + 17)
    w.add_tensor("tf64", T(np.array([0.1, 0.2])), 18, walltime=walltime + 18)
    w.add_tensor("tbool", T([True, False]), 19, walltime=walltime + 19)
    w.add_audio("snd", T(np.sin(np.arange(64) / 3.0)[None] * 0.9), 20, sample_rate=16000,
                walltime=walltime + 20)
    w.add_custom_scalars({"cat": {"multi": ["Multiline", ["loss", "acc"]],
                                  "mar": ["Margin", ["a", "b", "c"]]}})


def test_events_identical_to_torch(tmp_path, tb):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    with SummaryWriter(tmp_path / "kiln") as w:
        _scenario(w, kiln.tensor)
    with TorchWriter(str(tmp_path / "torch")) as w:
        _scenario(w, torch.tensor)
    ours, theirs = _tb_events(tmp_path / "kiln"), _tb_events(tmp_path / "torch")
    assert len(ours) == len(theirs) == 24
    assert ours[0].file_version == theirs[0].file_version == "brain.Event:2"
    for a, b in zip(ours[1:-1], theirs[1:-1]):
        assert a.SerializeToString() == b.SerializeToString(), (a, b)
    # custom scalars carry no walltime argument: compare all but the wall time
    a, b = ours[-1], theirs[-1]
    assert a.summary.SerializeToString() == b.summary.SerializeToString()
    assert abs(a.wall_time - b.wall_time) < 60
    from tensorboard.plugins.custom_scalar import layout_pb2
    layout = layout_pb2.Layout.FromString(a.summary.value[0].tensor.string_val[0])
    assert [c.title for c in layout.category[0].chart] == ["multi", "mar"]
    assert list(layout.category[0].chart[0].multiline.tag) == ["loss", "acc"]
    assert layout.category[0].chart[1].margin.series[0].upper == "c"


def test_event_accumulator_reads_kiln_files(tmp_path, tb):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from PIL import Image
    import io
    img = np.random.default_rng(4).integers(0, 256, (4, 6, 3)).astype(np.uint8)
    with SummaryWriter(tmp_path) as w:
        for i in range(5):
            w.add_scalar("loss", kiln.tensor(1.0 / (i + 1)), i, walltime=100.0 + i)
        w.add_histogram("h", kiln.tensor([0.5, 1.5, 1.5, 3.0]), 1, bins=[0, 1, 2, 3, 4])
        w.add_image("img", img, 2, dataformats="HWC")
        w.add_text("note", "some *text*", 3)
        w.add_pr_curve("pr", np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.6, 0.4]), 4)
    ea = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    assert tags["scalars"] == ["loss"] and tags["histograms"] == ["h"]
    assert tags["images"] == ["img"]
    assert set(tags["tensors"]) == {"note/text_summary", "pr"}
    sc = ea.Scalars("loss")
    assert [e.step for e in sc] == list(range(5))
    assert [e.value for e in sc] == [_f32(1.0 / (i + 1)) for i in range(5)]
    assert [e.wall_time for e in sc] == [100.0 + i for i in range(5)]
    (h,) = ea.Histograms("h")
    hv = h.histogram_value
    assert (hv.min, hv.max, hv.num, hv.sum, hv.sum_squares) == (0.5, 3.0, 4, 6.5, 13.75)
    assert list(hv.bucket_limit) == [0, 1, 2, 3, 4] and list(hv.bucket) == [0, 1, 2, 0, 1]
    (im,) = ea.Images("img")
    assert (im.step, im.width, im.height) == (2, 6, 4)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(im.encoded_image_string))),
                                  img)
    (tx,) = ea.Tensors("note/text_summary")
    assert tx.step == 3 and tx.tensor_proto.string_val[0] == b"some *text*"
    assert ea.SummaryMetadata("note/text_summary").plugin_data.plugin_name == "text"
    from tensorboard.plugins.pr_curve import plugin_data_pb2
    md = ea.SummaryMetadata("pr").plugin_data
    assert md.plugin_name == "pr_curves"
    assert plugin_data_pb2.PrCurvePluginData.FromString(md.content).num_thresholds == 127
    (pr,) = ea.Tensors("pr")
    assert [d.size for d in pr.tensor_proto.tensor_shape.dim] == [6, 127]


def test_images_match_torch(tmp_path, tb):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    from PIL import Image
    import io
    rng = np.random.default_rng(5)
    cases = [
        ("chw_f", rng.random((3, 9, 11)), "CHW", False),
        ("chw_u8", rng.integers(0, 256, (3, 5, 4)).astype(np.uint8), "CHW", False),
        ("c1", rng.random((1, 6, 5)) * 2 - 0.5, "CHW", False),
        ("rgba", rng.random((7, 3, 4)), "HWC", False),
        ("la", rng.random((2, 5, 5)), "CHW", False),
        ("hw", rng.random((4, 9)), "HW", False),
        ("whc", rng.random((5, 4, 3)), "WHC", False),
        ("nchw", rng.random((10, 3, 4, 5)), "NCHW", True),
        ("nhwc", rng.random((3, 4, 5, 1)).astype(np.float32), "NHWC", True),
    ]
    for lib, W, T in (("kiln", SummaryWriter, kiln.tensor), ("torch", TorchWriter, torch.tensor)):
        with W(str(tmp_path / lib)) as w:
            for i, (tag, arr, fmt, batch) in enumerate(cases):
                x = T(arr) if i % 2 else arr
                (w.add_images if batch else w.add_image)(tag, x, i, walltime=50.0,
                                                         dataformats=fmt)
    ours, theirs = _tb_events(tmp_path / "kiln")[1:], _tb_events(tmp_path / "torch")[1:]
    assert len(ours) == len(theirs) == len(cases)
    for a, b in zip(ours, theirs):
        va, vb = a.summary.value[0], b.summary.value[0]
        assert (a.step, a.wall_time, va.tag) == (b.step, b.wall_time, vb.tag)
        ia, ib = va.image, vb.image
        assert (ia.height, ia.width, ia.colorspace) == (ib.height, ib.width, ib.colorspace)
        pa = np.asarray(Image.open(io.BytesIO(ia.encoded_image_string)))
        pb = np.asarray(Image.open(io.BytesIO(ib.encoded_image_string)))
        np.testing.assert_array_equal(pa, pb, err_msg=va.tag)


def _dirs(path):
    return sorted(d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d)))


def _hparams_data(run_dir):
    from tensorboard.plugins.hparams import plugin_data_pb2
    from google.protobuf.json_format import MessageToDict
    evs = _tb_events(run_dir)[1:]
    out = []
    for e in evs:
        v = e.summary.value[0]
        if v.metadata.plugin_data.plugin_name == "hparams":
            content = plugin_data_pb2.HParamsPluginData.FromString(v.metadata.plugin_data.content)
            out.append((e.step, v.tag, MessageToDict(content)))
        else:
            out.append((e.step, v.tag, v.simple_value))
    return out


def test_hparams_match_torch(tmp_path, tb):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    def calls(w, T):
        w.add_hparams({"lr": 0.1, "bsize": 32, "opt": "adam", "flag": True, "none": None,
                       "t": T([0.5])},
                      {"hp/acc": 0.9, "hp/loss": T(0.25)},
                      hparam_domain_discrete={"opt": ["adam", "sgd"], "bsize": [16, 32]},
                      run_name="run0", global_step=3)
        w.add_hparams({"lr": 0.0, "opt": ""}, {"hp/acc": 0}, run_name="run1")
    with SummaryWriter(tmp_path / "kiln") as w:
        calls(w, kiln.tensor)
    with TorchWriter(str(tmp_path / "torch")) as w:
        calls(w, torch.tensor)
    for run in ("run0", "run1"):
        ours = _hparams_data(tmp_path / "kiln" / run)
        theirs = _hparams_data(tmp_path / "torch" / run)
        assert ours == theirs, run
    ours = _hparams_data(tmp_path / "kiln" / "run0")
    assert [t for _, t, _ in ours] == ["_hparams_/experiment", "_hparams_/session_start_info",
                                       "_hparams_/session_end_info", "hp/acc", "hp/loss"]
    assert ours[1][2]["sessionStartInfo"]["hparams"]["opt"] == "adam"
    assert ours[1][2]["sessionStartInfo"]["hparams"]["lr"] == 0.1
    assert all(step == 3 for step, _, _ in ours)
    assert _dirs(tmp_path / "kiln") == _dirs(tmp_path / "torch") == ["run0", "run1"]


def test_add_scalars_and_purge_match_torch(tmp_path, tb):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    for lib, W, T in (("kiln", SummaryWriter, kiln.tensor), ("torch", TorchWriter, torch.tensor)):
        with W(str(tmp_path / lib), purge_step=2) as w:
            w.add_scalars("a/b", {"x": 1.0, "y": T(2.0)}, 5, walltime=10.0)
            w.add_scalars("a/b", {"x": 3.0, "z": 4}, 6, walltime=11.0)
    assert _dirs(tmp_path / "kiln") == _dirs(tmp_path / "torch") == ["a_b_x", "a_b_y", "a_b_z"]
    for sub in ("a_b_x", "a_b_y", "a_b_z"):
        ours, theirs = _tb_events(tmp_path / "kiln" / sub), _tb_events(tmp_path / "torch" / sub)
        assert [e.SerializeToString() for e in ours[1:]] == \
            [e.SerializeToString() for e in theirs[1:]]
    ours, theirs = _tb_events(tmp_path / "kiln"), _tb_events(tmp_path / "torch")
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours[1:], theirs[1:]):
        a.wall_time = b.wall_time = 0
        assert a.SerializeToString() == b.SerializeToString()


def test_embedding_matches_torch(tmp_path, tb):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    from PIL import Image
    rng = np.random.default_rng(6)
    mat = rng.standard_normal((10, 4)).astype(np.float32)
    meta = [f"w{i}" for i in range(10)]
    imgs = rng.random((10, 3, 5, 5)).astype(np.float32)
    rows = [[f"a{i}", i % 3] for i in range(10)]
    for lib, W, T in (("kiln", SummaryWriter, kiln.tensor), ("torch", TorchWriter, torch.tensor)):
        with W(str(tmp_path / lib)) as w:
            w.add_embedding(T(mat), metadata=meta, label_img=T(imgs), global_step=3,
                            tag="emb/1 \"q\" 5% a\\b")
            w.add_embedding(mat, metadata=rows, metadata_header=["name", "cls"])
    files = []
    for root, _, names in os.walk(tmp_path / "kiln"):
        files += [os.path.relpath(os.path.join(root, n), tmp_path / "kiln") for n in names
                  if not n.startswith("events")]
    files_t = []
    for root, _, names in os.walk(tmp_path / "torch"):
        files_t += [os.path.relpath(os.path.join(root, n), tmp_path / "torch") for n in names
                    if not n.startswith("events")]
    assert sorted(files) == sorted(files_t)
    assert "00003/emb%2f1 \"q\" 5%25 a%5cb/sprite.png" in files
    assert "projector_config.pbtxt" in files
    for rel in files:
        a = (tmp_path / "kiln" / rel).read_bytes()
        b = (tmp_path / "torch" / rel).read_bytes()
        if rel.endswith(".png"):
            np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "kiln" / rel)),
                                          np.asarray(Image.open(tmp_path / "torch" / rel)))
        else:
            assert a == b, rel


def test_error_classes_as_torch(tmp_path, tb):
    """kiln's errors are caught by the except clauses written for torch's."""
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    calls = [
        lambda w: w.add_image("x", np.zeros((4, 5))),
        lambda w: w.add_image("x", np.zeros((3, 4, 5)), dataformats="CCW"),
        lambda w: w.add_images("x", np.zeros((2, 4, 5, 6))),
        lambda w: w.add_scalar("x", np.zeros(2)),
        lambda w: w.add_histogram("x", np.zeros(0)),
        lambda w: w.add_histogram_raw("x", 0, 1, 1, 1, 1, [1.0, 2.0], [1]),
        lambda w: w.add_hparams({"lr": [1]}, {}),
        lambda w: w.add_hparams(1, {}),
        lambda w: w.add_scalar("x", [1.0]),
    ]
    with SummaryWriter(tmp_path / "k") as kw, TorchWriter(str(tmp_path / "t")) as tw:
        for call in calls:
            with pytest.raises(Exception) as te:
                call(tw)
            with pytest.raises(type(te.value)):
                call(kw)
