"""ONNX models in kiln: `kiln.onnx.load(path)` returns a Model whose `run({name: Tensor})`
returns a dict of output tensors (`inputs` / `outputs` list the names; `to(device)` moves
the weights). The graph runs eagerly with kiln's ops on any kiln device.
`kiln.onnx.export(model, args, f, ...)` writes a kiln model as ONNX (opset 17), as
torch.onnx.export (decision 0107)."""
from ._C._onnx import load, supported_operators, available  # noqa: F401

if available:
    from ._C._onnx import Model  # noqa: F401

from ._onnx_export import export, DataDependentError  # noqa: F401,E402
from ._onnx_export import supported_ops as export_supported_operators  # noqa: F401,E402
