"""ShapeProp (torch.fx.passes.shape_prop): runs a GraphModule on example inputs and records,
for every node whose result holds tensors, their TensorMetadata (shape, dtype, requires_grad,
stride, memory_format...) in node.meta["tensor_meta"] (same structure as the result: a tuple of
metadata for a tuple of tensors), and the result's type in node.meta["type"]."""
from typing import Any, NamedTuple

from ..interpreter import Interpreter
from ..node import map_aggregate

__all__ = ["TensorMetadata", "ShapeProp"]


class TensorMetadata(NamedTuple):
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(result, include_contiguity=True):
    import kiln
    memory_format = None
    if include_contiguity:
        # the first layout the tensor is dense in, as torch reports it
        names = ("contiguous_format", "channels_last", "channels_last_3d")
        formats = [getattr(kiln, name) for name in names if hasattr(kiln, name)]
        for fmt in formats:
            try:
                if result.is_contiguous(memory_format=fmt):
                    memory_format = fmt
                    break
            except (RuntimeError, ValueError):  # channels_last needs 4-d, _3d 5-d
                continue
    return TensorMetadata(result.shape, result.dtype, result.requires_grad,
                          tuple(result.stride()), memory_format, False, {})


class ShapeProp(Interpreter):
    """ShapeProp(gm).propagate(*example_inputs) fills node.meta["tensor_meta"] and
    node.meta["type"]; returns the graph's output."""

    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)
        self.fake_mode = fake_mode  # accepted for torch's signature; kiln has no fake tensors

    def run_node(self, n):
        from ..._C import Tensor
        result = super().run_node(n)
        found_tensor = False

        def extract(obj):
            nonlocal found_tensor
            if isinstance(obj, Tensor):
                found_tensor = True
                return _extract_tensor_metadata(obj)
            return obj

        meta = map_aggregate(result, extract)
        if found_tensor:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        return super().run(*args)
