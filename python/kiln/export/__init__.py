"""kiln.export: torch.export for kiln (decision 0112) -- a whole kiln.nn.Module traced into
one graph with its parameters and buffers lifted to inputs, dynamic dimensions, and a
saved / loaded form.

    ep = kiln.export.export(model, (x,), dynamic_shapes={"x": {0: Dim("batch", max=1024)}})
    print(ep)                        # the graph, its signature, the ranges of s0, s1, ...
    m = ep.module()                  # a kiln.nn.Module running it; checks its inputs
    y = m(kiln.randn(7, 8))
    kiln.export.save(ep, "model.kep"); ep2 = kiln.export.load("model.kep")

Tracing runs the module on copies of the example inputs through kiln.fx's Proxies, with
every recorded operation also computed, so shapes and dtypes are known while tracing (torch
uses fake tensors for this); see _trace.py."""
from ._dims import Dim, DimHint, Symbol, ValueRanges, dims, int_oo  # noqa: F401
from ._errors import (ExportSerializationError, GuardOnDataDependentSymNode,  # noqa: F401
                      UserError, UserErrorType)
from ._ops import (_assert_scalar, _native_batch_norm_legit_functional, copy,  # noqa: F401
                   sym_size_int)
from ._program import (CallSpec, ExportedProgram, GuardFailed, _module_inputs,  # noqa: F401
                       _module_outputs, _program_from_trace)
from ._pytree import TreeSpec  # noqa: F401
from ._signature import (ConstantArgument, ExportGraphSignature, InputKind,  # noqa: F401
                         InputSpec, OutputKind, OutputSpec, SymIntArgument, TensorArgument)
from ._serialize import load, save  # noqa: F401

__all__ = ["export", "ExportedProgram", "Dim", "dims", "save", "load", "ExportGraphSignature",
           "InputKind", "OutputKind", "InputSpec", "OutputSpec", "TensorArgument",
           "SymIntArgument", "ConstantArgument", "UserError", "UserErrorType",
           "GuardOnDataDependentSymNode", "GuardFailed", "ExportSerializationError",
           "default_decompositions", "export_for_training"]


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False,
           preserve_module_call_signature=()):
    """Traces mod(*args, **kwargs) into an ExportedProgram.

    dynamic_shapes: which input dimensions may vary -- a dict keyed by forward's parameter
    names (or a tuple mirroring args then kwargs), with for each tensor a dict
    {dim: Dim(...) | Dim.AUTO | Dim.DYNAMIC | Dim.STATIC | None} or a tuple with one entry
    per dimension; nested inputs take nested specs. Dimensions under the same Dim are one
    symbol (equal sizes). A dimension the program specializes is an error for a Dim or
    Dim.DYNAMIC (UserError, "Constraints violated") and becomes static for Dim.AUTO.

    strict is accepted for torch's signature: kiln has no bytecode tracer, so both modes
    trace the same way (torch's non-strict mode). preserve_module_call_signature is not
    supported (module() has no submodule structure)."""
    from .. import nn
    from ._trace import _Specialize, trace_export
    if not isinstance(mod, nn.Module):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"kiln.export.export expects a kiln.nn.Module, got "
                        f"{type(mod).__name__}")
    if not isinstance(args, tuple):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Expecting `args` to be a tuple of example positional inputs, got "
                        f"{type(args)}")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Expecting `kwargs` to be a dict, got {type(kwargs)}")
    if preserve_module_call_signature:
        raise NotImplementedError("kiln.export: preserve_module_call_signature is not "
                                  "supported (decision 0112)")
    forced_static = set()
    for _ in range(16):
        try:
            res = trace_export(mod, args, kwargs, dynamic_shapes, frozenset(forced_static))
            break
        except _Specialize as e:
            new = {s.key for s in e.symbols} - forced_static
            if not new:
                raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                "kiln.export: could not make the Dim.AUTO dimensions static "
                                f"({', '.join(s.label for s in e.symbols)})") from None
            forced_static |= new
    else:
        raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                        "kiln.export: too many Dim.AUTO dimensions had to be made static")
    return _program_from_trace(mod, res, args, kwargs)


def export_for_training(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False,
                        preserve_module_call_signature=()):
    """export() (torch 2.5's name for what is now export's default IR)."""
    return export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                  preserve_module_call_signature=preserve_module_call_signature)


def default_decompositions():
    """An empty decomposition table: kiln's graphs have no lower operator set to decompose
    into (run_decompositions() makes the graph functional and keeps the ops)."""
    return {}
