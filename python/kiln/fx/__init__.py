"""kiln.fx: torch.fx for kiln (decision 0110) -- symbolic tracing of kiln.nn.Modules and
functions into a Graph IR, graph editing, Python code generation (GraphModule), and
interpretation / transformation of graphs.

    gm = kiln.fx.symbolic_trace(model)
    print(gm.graph)   # the IR, in torch's format
    print(gm.code)    # the generated forward
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is kiln.relu:
            node.target = kiln.nn.functional.gelu
    gm.recompile()

Importing kiln.fx costs nothing at run time: kiln's __torch_function__ wrappers (decision
0109), which tracing relies on to see kiln.* calls, are installed at the first trace (the
first Proxy), not at import."""
from . import graph, graph_module, immutable_collections, interpreter, node, proxy  # noqa: F401
from . import passes, subgraph_rewriter  # noqa: F401
from ._symbolic_trace import (PH, Tracer, _assert, _assert_is_none, is_fx_tracing,  # noqa: F401
                              symbolic_trace, wrap)
from .graph import CodeGen, Graph, PythonCode
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, has_side_effect, map_aggregate, map_arg
from .proxy import Attribute, Proxy, TraceError, TracerError  # noqa: F401
from .subgraph_rewriter import replace_pattern

__all__ = ["symbolic_trace", "Tracer", "wrap", "Graph", "GraphModule", "Interpreter",
           "Transformer", "Node", "Proxy", "replace_pattern", "has_side_effect", "map_arg",
           "map_aggregate", "PH", "CodeGen", "PythonCode", "TraceError", "TracerError"]
