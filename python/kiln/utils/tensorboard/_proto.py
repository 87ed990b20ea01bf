"""A minimal protobuf (proto3) wire-format writer for TensorBoard's messages (Event, Summary,
HistogramProto, TensorProto, the hparams plugin's messages, ...), so that kiln needs neither
the protobuf nor the tensorboard package at run time.

Like kiln/_onnx_export/protobuf.py (the ONNX exporter's writer) a message is a bytearray that
each method appends one field to; this one adds doubles and proto3's default rule: a scalar
field equal to its default (0, 0.0, "", b"") is left out unless `keep=True` (fields in a
oneof or with explicit presence, e.g. google.protobuf.Value's number_value). 0.0 means +0.0:
-0.0 is written, as protobuf does. Sub-messages are always written (they have presence).
Repeated numbers are packed (proto3's default encoding). Callers append fields in field
number order, which is the order protobuf's own serializer uses, so that the bytes equal
protobuf's (except map entries, whose order protobuf does not define).

(The ONNX writer is not imported: importing kiln._onnx_export registers the whole exporter.)"""
import struct

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def varint(value):
    """Base-128 varint; negative values as their 64-bit two's complement (ten bytes), as
    protobuf writes int32 / int64 / enum fields."""
    value = int(value)
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field, wire_type):
    return varint((field << 3) | wire_type)


def _f32_bytes(values):
    """Little-endian float32s; a double beyond float32's range becomes +-inf, as protobuf
    stores it (struct.pack would raise OverflowError)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype("<f4").tobytes()


class Message:
    """An encoded message under construction; each method appends one field and returns
    self, so that fields chain."""

    __slots__ = ("buf",)

    def __init__(self):
        self.buf = bytearray()

    def varint(self, field, value, keep=False):
        """int32 / int64 / uint32 / uint64 / enum / bool field."""
        value = int(value)
        if value or keep:
            self.buf += key(field, VARINT) + varint(value)
        return self

    def float(self, field, value, keep=False):
        data = _f32_bytes([value])
        if keep or data != b"\0\0\0\0":
            self.buf += key(field, FIXED32) + data
        return self

    def double(self, field, value, keep=False):
        data = struct.pack("<d", value)
        if keep or data != b"\0" * 8:
            self.buf += key(field, FIXED64) + data
        return self

    def bytes(self, field, data, keep=False):
        data = bytes(data)
        if data or keep:
            self.buf += key(field, LENGTH) + varint(len(data)) + data
        return self

    def string(self, field, text, keep=False):
        return self.bytes(field, text.encode("utf-8"), keep)

    def message(self, field, msg):
        """A sub-message (a Message or its encoded bytes); written even when empty."""
        data = msg.encoded() if isinstance(msg, Message) else bytes(msg)
        self.buf += key(field, LENGTH) + varint(len(data)) + data
        return self

    def repeated_bytes(self, field, items):
        for item in items:
            self.bytes(field, item, keep=True)
        return self

    def repeated_strings(self, field, items):
        for item in items:
            self.string(field, item, keep=True)
        return self

    def repeated_messages(self, field, msgs):
        for msg in msgs:
            self.message(field, msg)
        return self

    def packed_varints(self, field, values):
        values = list(values)
        if values:
            self.bytes(field, b"".join(varint(v) for v in values), keep=True)
        return self

    def packed_floats(self, field, values):
        values = list(values)
        if values:
            self.bytes(field, _f32_bytes(values), keep=True)
        return self

    def packed_doubles(self, field, values):
        values = list(values)
        if values:
            self.bytes(field, np.asarray(values, dtype="<f8").tobytes(), keep=True)
        return self

    def encoded(self):
        return bytes(self.buf)
