"""The table of op translations: kiln op name -> function(builder, node) that appends ONNX
nodes computing the node's results and binds their names."""
TRANSLATIONS = {}


def translates(*ops):
    def register(fn):
        for op in ops:
            TRANSLATIONS[op] = fn
        return fn
    return register


def supported_ops():
    from . import ops_elementwise, ops_linalg, ops_nn, ops_reduce, ops_shape  # noqa: F401
    return sorted(TRANSLATIONS)


def unsupported(node, why=""):
    return NotImplementedError(
        f"kiln.onnx.export: op '{node.op}' {why or 'has no ONNX translation'} "
        f"(node {node!r}). Supported ops: {', '.join(supported_ops())}")
