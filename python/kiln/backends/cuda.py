"""kiln.backends.cuda, as torch.backends.cuda in torch's CPU-only build: is_built() is False
and the cuBLAS flags under `matmul` are kept for scripts that set them.
`matmul.allow_tf32` is torch's other spelling of the float32 matmul precision: True is
set_float32_matmul_precision("high"), False is "highest" (kiln computes float32 products in
float32 either way)."""
from .. import _settings


def is_built():
    return False


class _CublasModule:
    """torch.backends.cuda.matmul: known flags only (others are an AttributeError, as torch)."""

    _reduction_flags = ("allow_fp16_reduced_precision_reduction",
                        "allow_bf16_reduced_precision_reduction")

    def __init__(self):
        object.__setattr__(self, "_values", {n: True for n in self._reduction_flags})

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _settings.get_float32_matmul_precision() != "highest"
        if name in self._reduction_flags:
            return self._values[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            if not isinstance(value, bool):
                raise RuntimeError(f"set_allow_tf32_cublas expects a bool, but got "
                                   f"{type(value).__name__}")
            _settings.set_float32_matmul_precision("high" if value else "highest")
        elif name in self._reduction_flags:
            if not isinstance(value, bool):
                raise TypeError(f"{name} expects a bool, but got {type(value)}")
            self._values[name] = value
        else:
            raise AttributeError(f"Unknown attribute {name}")


matmul = _CublasModule()
