"""ONNX models in kiln: `kiln.onnx.load(path)` returns a Model whose `run({name: Tensor})`
returns a dict of output tensors (`inputs` / `outputs` list the names; `to(device)` moves
the weights). The graph runs eagerly with kiln's ops on any kiln device."""
from ._C._onnx import load, supported_operators, available  # noqa: F401

if available:
    from ._C._onnx import Model  # noqa: F401
