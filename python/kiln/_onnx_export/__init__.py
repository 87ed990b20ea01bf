"""kiln.onnx.export (decision 0107): kiln's graph capture translated to ONNX opset 17,
written with a small protobuf encoder of its own (no onnx or protobuf package at run time)."""
from . import (ops_elementwise, ops_linalg, ops_nn, ops_pointwise_program,  # noqa: F401
               ops_recurrent, ops_reduce, ops_resize, ops_scatter, ops_shape,
               ops_sort)  # (importing registers them)
from .capture import DataDependentError
from .export import export
from .registry import supported_ops

__all__ = ["export", "supported_ops", "DataDependentError"]
