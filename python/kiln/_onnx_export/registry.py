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
    return sorted(TRANSLATIONS)


def unsupported(node, why=""):
    return NotImplementedError(
        f"kiln.onnx.export: op '{node.op}' {why or 'has no ONNX translation'} "
        f"(node {node!r}). Supported ops: {', '.join(supported_ops())}")
