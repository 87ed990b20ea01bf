"""kiln.ops: the operators defined with kiln.library, by namespace (torch.ops).

    kiln.ops.mylib.foo            # OpOverloadPacket: every overload of mylib::foo
    kiln.ops.mylib.foo.default    # OpOverload: the overload without a name
    kiln.ops.mylib.foo.out        # OpOverload "mylib::foo.out"

kiln's built-in operators are the functions of kiln itself (kiln.add, ...), not entries here:
kiln.ops.aten is not provided."""
import importlib
import types

from ._library import ops as _ops


class _OpNamespace(types.ModuleType):
    """kiln.ops.<namespace>: its operators as attributes (looked up at each access, so an op
    defined later, or removed with its Library, is seen)."""

    def __init__(self, name):
        super().__init__("kiln.ops." + name)
        self.name = name

    def __getattr__(self, op_name):
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        if _ops.has_packet(self.name, op_name):
            return _ops.get_packet(self.name, op_name)
        hint = ""
        if self.name in ("aten", "prim", "prims"):
            hint = (f" (kiln's built-in operators are not in kiln.ops: use kiln.{op_name} or "
                    f"the Tensor method)")
        raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute "
                             f"'{op_name}'{hint}")

    def __dir__(self):
        return _ops.namespace_ops(self.name)

    def __iter__(self):
        return iter(_ops.namespace_ops(self.name))

    def __repr__(self):
        return f"<kiln.ops namespace '{self.name}'>"


class _Ops(types.ModuleType):
    __file__ = "_ops.py"

    def __init__(self):
        super().__init__("kiln.ops")
        self.loaded_libraries = set()
        self._namespaces = {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        ns = self._namespaces.get(name)
        if ns is None:
            ns = self._namespaces[name] = _OpNamespace(name)
        return ns

    def __iter__(self):
        return iter(sorted(_ops._namespaces_of_defined()))

    def __dir__(self):
        return sorted(_ops._namespaces_of_defined())

    def import_module(self, module):
        """Imports a Python module that registers operators (torch.ops.import_module)."""
        importlib.import_module(module)

    def load_library(self, path):
        raise NotImplementedError(
            f"kiln.ops.load_library({path!r}): kiln cannot load compiled PyTorch operator "
            "libraries (TORCH_LIBRARY in C++). Define the operators in Python with "
            "kiln.library.custom_op or kiln.library.Library.")


ops = _Ops()
