"""ONNX's protobuf messages (onnx.proto, IR version 8), built with the wire writer. Field
numbers are those of onnx.proto; each builder takes plain Python values and returns a Message.
"""
import numbers

from .protobuf import Message

# TensorProto.DataType
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 4, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = 10, 11, 12, 13, 14, 15, 16

# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_TENSOR = 1, 2, 3, 4
_ATTR_FLOATS, _ATTR_INTS, _ATTR_STRINGS = 6, 7, 8

IR_VERSION = 8  # the IR of opsets up to 17 (onnx 1.12)


def tensor(name, elem_type, dims, raw):
    """TensorProto with its contents as little-endian raw_data."""
    m = Message()
    if dims:
        m.packed_ints(1, dims)
    m.int(2, elem_type)
    m.string(8, name)
    m.bytes(9, raw)
    return m


def attribute(name, value):
    """AttributeProto; the type follows the Python value: int/bool -> INT, float -> FLOAT,
    str -> STRING, a tensor Message -> TENSOR, a list of ints / floats / strs -> INTS /
    FLOATS / STRINGS (a list with a float in it is FLOATS)."""
    m = Message().string(1, name)
    if isinstance(value, Message):
        m.message(5, value).int(20, _ATTR_TENSOR)
    elif isinstance(value, bool) or isinstance(value, numbers.Integral):
        m.int(3, int(value)).int(20, _ATTR_INT)
    elif isinstance(value, numbers.Real):
        m.float(2, float(value)).int(20, _ATTR_FLOAT)
    elif isinstance(value, str):
        m.string(4, value).int(20, _ATTR_STRING)
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and value:
            for v in value:
                m.string(9, v)
            m.int(20, _ATTR_STRINGS)
        elif any(isinstance(v, float) for v in value):
            m.packed_floats(7, [float(v) for v in value]).int(20, _ATTR_FLOATS)
        else:
            m.packed_ints(8, [int(v) for v in value]).int(20, _ATTR_INTS)
    else:
        raise TypeError(f"ONNX attribute {name}: unsupported value {value!r}")
    return m


def node(op_type, inputs, outputs, name, attrs=None, domain=""):
    """NodeProto. An empty input name stands for an absent optional input."""
    m = Message()
    for i in inputs:
        m.string(1, i)
    for o in outputs:
        m.string(2, o)
    m.string(3, name)
    m.string(4, op_type)
    for k, v in (attrs or {}).items():
        m.message(5, attribute(k, v))
    if domain:
        m.string(7, domain)
    return m


def value_info(name, elem_type, shape):
    """ValueInfoProto of a tensor; a str in shape is a symbolic dimension (dim_param)."""
    shape_msg = Message()
    for d in shape:
        dim = Message()
        if isinstance(d, str):
            dim.string(2, d)
        else:
            dim.int(1, d)
        shape_msg.message(1, dim)
    tensor_type = Message().int(1, elem_type).message(2, shape_msg)
    type_msg = Message().message(1, tensor_type)
    return Message().string(1, name).message(2, type_msg)


def graph(name, nodes, inputs, outputs, initializers, value_infos=()):
    m = Message()
    for n in nodes:
        m.message(1, n)
    m.string(2, name)
    for t in initializers:
        m.message(5, t)
    for v in inputs:
        m.message(11, v)
    for v in outputs:
        m.message(12, v)
    for v in value_infos:
        m.message(13, v)
    return m


def model(graph_msg, opset_version, producer_name, producer_version, doc_string=""):
    m = Message().int(1, IR_VERSION)
    m.string(2, producer_name).string(3, producer_version)
    if doc_string:
        m.string(6, doc_string)
    m.message(7, graph_msg)
    m.message(8, Message().string(1, "").int(2, opset_version))
    return m
