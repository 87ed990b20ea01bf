"""A minimal protobuf wire-format writer: just what ONNX's messages need. kiln must not depend
on the protobuf package at run time, and writing is simple: every field is a key (field number
and wire type) followed by a varint, a fixed-width value or a length-prefixed byte string.

Messages are built as bytearrays; a sub-message is written as a length-delimited field holding
its encoded bytes. Repeated numbers are written packed (one length-delimited run), which every
protobuf parser accepts for proto2 and proto3 repeated scalar fields alike."""
import struct

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def varint(value):
    """Base-128 varint; negative int64 values are written as their 64-bit two's complement
    (ten bytes), as protobuf does for int32 and int64 fields."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key(field, wire_type):
    return varint((field << 3) | wire_type)


class Message:
    """An encoded message under construction; each method appends one field."""

    def __init__(self):
        self.buf = bytearray()

    def int(self, field, value):
        self.buf += key(field, VARINT) + varint(int(value))
        return self

    def float(self, field, value):
        self.buf += key(field, FIXED32) + struct.pack("<f", value)
        return self

    def bytes(self, field, data):
        data = bytes(data)
        self.buf += key(field, LENGTH) + varint(len(data)) + data
        return self

    def string(self, field, text):
        return self.bytes(field, text.encode("utf-8"))

    def message(self, field, msg):
        return self.bytes(field, msg.encoded())

    def packed_ints(self, field, values):
        body = b"".join(varint(int(v)) for v in values)
        return self.bytes(field, body)

    def packed_floats(self, field, values):
        return self.bytes(field, struct.pack(f"<{len(values)}f", *values))

    def encoded(self):
        return bytes(self.buf)
