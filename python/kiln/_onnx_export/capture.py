"""Running the model once under kiln's graph capture (as kiln.compile does) to record the
ops it dispatches."""
import kiln

from .._compile import _HostReadWatch, _flatten

_G = kiln._C._graph


class DataDependentError(RuntimeError):
    """The function read computed values on the host, so the captured graph may hold only
    the branch those values took."""


def split_args(args):
    """torch.onnx.export's args: a tensor, or a tuple whose last item may be a dict of
    keyword arguments."""
    if isinstance(args, kiln.Tensor):
        return (args,), {}
    args = tuple(args)
    if args and isinstance(args[-1], dict):
        return args[:-1], dict(args[-1])
    return args, {}


def capture(fn, args, kwargs):
    """Returns (kiln graph, input tensors, output tensors)."""
    inputs = []
    _flatten((args, kwargs), inputs)
    with kiln.no_grad():
        cap = _G.Capture()
        try:
            for t in inputs:
                cap.add_input(t)
            with _HostReadWatch():
                result = fn(*args, **kwargs)
            outputs = []
            _flatten(result, outputs)
            if not outputs:
                raise ValueError("kiln.onnx.export: the model returned no tensors")
            graph = cap.finish(outputs)
            data_dependent = cap.data_dependent
        finally:
            cap.close()
    if data_dependent:
        raise DataDependentError(
            "kiln.onnx.export: the model read a computed tensor's values on the host (item(), "
            "tolist(), `if tensor:`, printing a tensor, ...) or drew from an explicit random "
            "generator while it was captured; its control flow may depend on the data, so "
            "the recorded graph would hold only the branch this input took. Rewrite the "
            "branch with tensor ops (kiln.where, masks) to export it.")
    return graph, inputs, outputs
