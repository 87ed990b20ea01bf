#!/usr/bin/env python3
"""Writes reference.safetensors with the official `safetensors` Python package.

kiln's tests (tests/io/reference_file_test.cpp) check that kiln reads exactly these values
and that kiln's writer produces the same bytes. Values are given as bit patterns so that
-0.0, NaN payloads (quiet and signalling) and subnormals are pinned down exactly.

Regenerate (not needed for the tests, which use the committed file):
    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install safetensors numpy
    /tmp/stvenv/bin/python tests/io/data/make_reference.py
Made with safetensors 0.8.0 and numpy 2.4.6.
"""
import os

import numpy as np
from safetensors import TensorSpec, serialize_file


def bits(values, storage, shape):
    return np.array(values, dtype=storage).reshape(shape)


TENSORS = {
    # name: (safetensors dtype name for TensorSpec, numpy array holding the raw bytes)
    "f32": ("float32", bits([0x00000000, 0x80000000, 0x3FC00000, 0xC0100000, 0x7F800000,
                             0xFF800000, 0x7FC12345, 0x00000001, 0xFF812345], np.uint32, (3, 3))),
    "f64": ("float64", bits([0x8000000000000000, 0x0000000000000001, 0x7FF0000000000001,
                             0xFFF8000000000ABC, 0x400921FB54442D18], np.uint64, (5,))),
    "f16": ("float16", bits([0x0000, 0x8000, 0x0001, 0x7C00, 0x7E01, 0x3C00], np.uint16, (2, 3))),
    "bf16": ("bfloat16", bits([0x3F80, 0x8000, 0x7FC1, 0x0001], np.uint16, (4,))),
    "i8": ("int8", np.array([-128, -1, 0, 127], dtype=np.int8)),
    "u8": ("uint8", np.array([0, 128, 255], dtype=np.uint8)),
    "i16": ("int16", np.array([[-32768, -1], [1, 32767]], dtype=np.int16)),
    "i32": ("int32", np.array([-2**31, 0, 2**31 - 1], dtype=np.int32)),
    "i64": ("int64", np.array([[-2**63, 2**63 - 1]], dtype=np.int64)),
    "mask": ("bool", np.array([[True, False], [False, True]], dtype=np.bool_)),
    "scalar": ("float64", np.array(-7.125, dtype=np.float64)),
    "empty": ("int32", np.zeros((0, 3), dtype=np.int32)),
    'odd "name"\\ \u00e9\t': ("uint8", np.array([7, 9], dtype=np.uint8)),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    specs, keep_alive = {}, []  # TensorSpec holds raw pointers: keep the arrays alive
    for name, (dtype, array) in TENSORS.items():
        array = array.copy(order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        keep_alive.append(array)
        specs[name] = TensorSpec(dtype=dtype, shape=list(array.shape),
                                 data_ptr=array.ctypes.data, data_len=array.nbytes)
    serialize_file(specs, os.path.join(here, "reference.safetensors"),
                   metadata={"format": "pt"})


if __name__ == "__main__":
    main()
