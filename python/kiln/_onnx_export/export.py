"""kiln.onnx.export: capture the model, translate each kiln op to ONNX (opset 17), write the
ModelProto. See docs/decisions/0107-onnx-export.md."""
import os

import kiln

from . import messages as M
from .capture import capture, split_args
from .captured import Captured, is_view_schema
from .builder import GraphBuilder
from .dtypes import elem_type
from .dynamic_axes import make_dynamic
from .fold import try_fold
from .registry import TRANSLATIONS, supported_ops, unsupported

MIN_OPSET, MAX_OPSET = 17, 17


def _needed_values(g):
    """Value ids the outputs depend on; nodes none of whose results are in it are dropped."""
    needed = set(g.outputs)
    for n in reversed(g.nodes):
        if any(r in needed for r in n.results):
            needed.update(v for v in n.inputs if v >= 0)
    return needed


def _check_in_place_writes(g):
    """ONNX values are immutable, so an op writing into a preallocated output is exported as
    producing a new value, which is right only when nothing else sees the old storage: not
    a model input or parameter, not a view of another value, not a value with views."""
    viewed = {}
    produced_by = {}
    for n in g.nodes:
        for r in n.results:
            produced_by[r] = n
        if n.kind == "alias" or is_view_schema(n.schema):
            viewed.setdefault(n.inputs[0], n)
    for n in g.nodes:
        if not n.outs:  # checked even when unused: the write changes what it aliases
            continue
        for out in n.outs:
            what = None
            if out in g.inputs:
                what = "a model input"
            elif out in g.constants:
                what = "a parameter or buffer"
            elif out in produced_by and (produced_by[out].kind == "alias"
                                         or is_view_schema(produced_by[out].schema)):
                what = f"a view ({produced_by[out].op}) of another tensor"
            elif out in viewed:
                what = "a tensor that has views"
            if what:
                raise unsupported(n, f"writes in place into {what}, which ONNX's immutable "
                                     "values cannot express; use the out-of-place op")


def _constant_names(model, g):
    """value id -> the module's name for the parameter or buffer it is."""
    if not isinstance(model, kiln.nn.Module):
        return {}
    named = list(model.named_parameters()) + list(model.named_buffers())
    names = {}
    for vid, t in g.constants.items():
        for name, p in named:
            if p is not None and t._is_same(p):
                names[vid] = name
                break
    return names


def _io_names(given, count, prefix, what):
    if given is None:
        return [f"{prefix}_{i}" for i in range(count)] if count > 1 else [prefix]
    given = list(given)
    if len(given) > count:
        raise ValueError(f"kiln.onnx.export: {len(given)} {what} names for {count} {what}s")
    return given + [f"{prefix}_{i}" for i in range(len(given), count)]


def _capture_model(model, args):
    """The captured graph of model(*args) in eval mode (the modules' modes are restored)."""
    args, kwargs = split_args(args)
    was_training = None
    if isinstance(model, kiln.nn.Module):
        was_training = [(m, m.training) for m in model.modules()]
        model.eval()
    elif not callable(model):
        raise TypeError(f"kiln.onnx.export: expected a kiln.nn.Module or a callable, got "
                        f"{type(model).__name__}")
    try:
        graph, _, _ = capture(model, args, kwargs)
    finally:
        for m, flag in was_training or ():
            m.training = flag
    return graph


def _translate(model, g, in_names, out_names, export_params, do_constant_folding):
    """The GraphBuilder holding g's ONNX nodes and initializers, and the graph inputs as
    (name, elem_type, shape) (the model's own first)."""
    needed = _needed_values(g)
    _check_in_place_writes(g)
    names = _constant_names(model, g)
    b = GraphBuilder(g, names, needed)
    graph_inputs = []
    for vid, name in zip(g.inputs, in_names):
        b.bind(vid, b.unique(name))
        graph_inputs.append((name, elem_type(g.dtype(vid)), g.shape(vid)))
    if not export_params:  # parameters and buffers become inputs after the model's own
        for vid, t in g.constants.items():
            if g.is_literal(vid) or vid not in needed:
                continue
            name = b.unique(names.get(vid, f"param_{vid}"))
            b.bind(vid, name)
            del b.known[vid]
            graph_inputs.append((name, elem_type(t.dtype), list(t.shape)))
    for name in out_names:  # reserved, so no internal value takes an output's name
        b.unique(name)

    for n in g.nodes:
        if not any(r in needed for r in n.results):
            continue
        if n.kind == "op" and do_constant_folding and try_fold(b, n):
            continue
        translate = TRANSLATIONS.get(n.op)
        if translate is None:
            raise unsupported(n)
        translate(b, n)

    for vid, name in zip(g.outputs, out_names):
        # the last node writes the output's name; an input, initializer or a value returned
        # twice goes through an Identity
        current = b.name(vid)
        if current in in_names or current in out_names or not b.rename_output(current, name):
            b.add("Identity", [current], [name])
    return b, graph_inputs


def build_model(model, args, *, input_names=None, output_names=None, opset_version=17,
                dynamic_axes=None, export_params=True, do_constant_folding=True,
                verbose=False):
    """The ModelProto's bytes."""
    if not MIN_OPSET <= opset_version <= MAX_OPSET:
        raise NotImplementedError(f"kiln.onnx.export writes opset {MIN_OPSET} only "
                                  f"(LayerNormalization needs 17); got {opset_version}")
    graph = _capture_model(model, args)
    g = Captured(graph.describe())
    if verbose:
        print(f"kiln.onnx.export: captured graph\n{graph}")
    in_names = _io_names(input_names, len(g.inputs), "input", "input")
    out_names = _io_names(output_names, len(g.outputs), "output", "output")
    b, graph_inputs = _translate(model, g, in_names, out_names, export_params,
                                 do_constant_folding)
    output_shapes = [g.shape(vid) for vid in g.outputs]
    if dynamic_axes:
        def translate_at(alt_args):
            g2 = Captured(_capture_model(model, alt_args).describe())
            b2, _ = _translate(model, g2, in_names, out_names, export_params,
                               do_constant_folding)
            return g2, b2
        shapes = make_dynamic(b, g, args, in_names, out_names, dynamic_axes, translate_at)
        input_shapes, output_shapes = shapes
        graph_inputs = [(name, et, input_shapes[k] if k < len(input_shapes) else shape)
                        for k, (name, et, shape) in enumerate(graph_inputs)]
    graph_outputs = [M.value_info(name, elem_type(g.dtype(vid)), shape)
                     for vid, name, shape in zip(g.outputs, out_names, output_shapes)]
    gm = M.graph(type(model).__name__ if isinstance(model, kiln.nn.Module)
                 else getattr(model, "__name__", "kiln_graph"),
                 b.encoded_nodes(), [M.value_info(*i) for i in graph_inputs], graph_outputs,
                 b.encoded_initializers())
    version = getattr(kiln, "__version__", "")
    if verbose:
        print(f"kiln.onnx.export: {len(b.nodes)} ONNX nodes, {len(b.initializers)} "
              f"initializers")
    return M.model(gm, opset_version, "kiln", version).encoded()


def export(model, args, f, *, input_names=None, output_names=None, opset_version=17,
           dynamic_axes=None, export_params=True, do_constant_folding=True, verbose=False):
    """Writes `model` run on `args` as an ONNX model (opset 17) to `f`, a path or a binary
    file object, as torch.onnx.export does. The model runs once in eval mode under
    kiln.no_grad() with kiln's graph capture recording the ops; shapes are those of `args`.

    model: a kiln.nn.Module or a callable. args: a tensor or a tuple of tensors (a trailing
    dict holds keyword arguments). input_names / output_names: names for the graph's inputs
    and outputs (defaults input / input_i, output / output_i). export_params=False makes the
    parameters and buffers graph inputs after the model's own. dynamic_axes ({name: {dim:
    symbol} or [dims]}, inputs and outputs by name): those input dims become symbolic; the
    model is captured again at other sizes and each shape constant that changes is computed
    at run time from the inputs' Shape (decision 0107); a graph whose constants do not
    follow the sizes linearly raises NotImplementedError. A model whose control flow reads
    tensor values raises DataDependentError (a RuntimeError); an op without a translation
    raises NotImplementedError naming it."""
    data = build_model(model, args, input_names=input_names, output_names=output_names,
                       opset_version=opset_version, dynamic_axes=dynamic_axes,
                       export_params=export_params, do_constant_folding=do_constant_folding,
                       verbose=verbose)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


__all__ = ["export", "supported_ops"]
