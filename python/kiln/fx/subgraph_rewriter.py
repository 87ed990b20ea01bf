"""replace_pattern (torch.fx.subgraph_rewriter): find every occurrence of a pattern graph in
a GraphModule's graph and splice a replacement graph in its place.

pattern and replacement are functions (or GraphModules / Graphs) taking the same inputs;
both are traced. A match maps each pattern node to a graph node with the same op and target
and matching arguments, walking backwards from the nodes the pattern returns; the pattern's
placeholders match any node (the match's inputs). A match is used only if the values it
computes internally are not read outside it and it overlaps no earlier match; matches are
found in graph order. Constants must be equal (no ignore_literals), call_module patterns match
by target path (torch's default too)."""
from typing import NamedTuple

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg

__all__ = ["Match", "replace_pattern"]


class Match(NamedTuple):
    anchor: Node       # the pattern node the match was found from (the first one returned)
    nodes_map: dict    # pattern node -> graph node


def _graph_of(obj):
    if isinstance(obj, GraphModule):
        return obj.graph, obj
    if isinstance(obj, Graph):
        return obj, None
    from ._symbolic_trace import symbolic_trace
    gm = symbolic_trace(obj)
    return gm.graph, gm


def _flatten_nodes(arg, out):
    """The Nodes inside arg in order, duplicates kept (appended to out)."""
    map_arg(arg, out.append)
    return out


def _literals_equal(a, b):
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):  # tensors: only the same object matches
        return a is b


class _Matcher:
    def __init__(self, pattern):
        self.pattern = pattern
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]
        output = pattern.output_node
        self.returning = _flatten_nodes(output.args[0], [])
        if not self.returning:
            raise ValueError("the pattern returns no node")

    def _match_nodes(self, pn, gn, m, used):
        if pn in m:
            return m[pn] is gn
        if pn.op == "placeholder":
            m[pn] = gn  # an input of the match: anything computed before it
            return True
        if gn in used or pn.op != gn.op or pn.target != gn.target:
            return False
        if len(pn.args) != len(gn.args) or set(pn.kwargs) != set(gn.kwargs):
            return False
        m[pn] = gn
        used.add(gn)
        ok = all(self._match_args(a, b, m, used) for a, b in zip(pn.args, gn.args)) and \
            all(self._match_args(pn.kwargs[k], gn.kwargs[k], m, used) for k in pn.kwargs)
        return ok

    def _match_args(self, pa, ga, m, used):
        if isinstance(pa, Node):
            return isinstance(ga, Node) and self._match_nodes(pa, ga, m, used)
        if isinstance(pa, (list, tuple)):
            return (isinstance(ga, (list, tuple)) and len(pa) == len(ga)
                    and all(self._match_args(a, b, m, used) for a, b in zip(pa, ga)))
        if isinstance(ga, Node):
            return False
        return _literals_equal(pa, ga)

    def _try(self, anchors, graph_nodes, m, used):
        """Matches the remaining anchors (backtracking over the graph's nodes)."""
        if not anchors:
            return m
        pn, rest = anchors[0], anchors[1:]
        if pn in m:
            return self._try(rest, graph_nodes, m, used)
        for gn in graph_nodes:
            m2, used2 = dict(m), set(used)
            if self._match_nodes(pn, gn, m2, used2):
                found = self._try(rest, graph_nodes, m2, used2)
                if found is not None:
                    return found
        return None

    def match(self, graph):
        graph_nodes = [n for n in graph.nodes if n.op not in ("placeholder", "output")]
        taken = set()   # graph nodes computed by matches already accepted
        matches = []
        for gn in graph_nodes:
            m, used = {}, set()
            if not self._match_nodes(self.returning[0], gn, m, used):
                continue
            m = self._try(self.returning[1:], graph_nodes, m, used)
            if m is None:
                continue
            computed = {m[p] for p in m if p.op != "placeholder"}
            if computed & taken:
                continue
            returned = {m[p] for p in self.returning}
            if any(u not in computed for g in computed - returned for u in g.users):
                continue  # an internal value is read outside: it cannot be removed
            if any(m[p] in computed for p in self.placeholders if p in m):
                continue  # an input of the match is also computed by it
            taken |= computed
            matches.append(m)
        return matches


def _copy_attrs(gm, replacement_gm, replacement_graph):
    """get_attr / call_module targets of the replacement that gm lacks are copied from it."""
    if replacement_gm is None:
        return
    from .graph import _has_attr_path
    from .graph_module import _copy_attr
    for node in replacement_graph.nodes:
        if node.op in ("get_attr", "call_module") and not _has_attr_path(gm, node.target):
            _copy_attr(replacement_gm, gm, node.target)


def replace_pattern(gm, pattern, replacement):
    """Replaces every (non-overlapping) match of pattern in gm.graph by replacement; the
    graph is recompiled. Returns the matches (Match(anchor, nodes_map))."""
    original = gm.graph
    pattern_graph, _ = _graph_of(pattern)
    replacement_graph, replacement_gm = _graph_of(replacement)
    matcher = _Matcher(pattern_graph)
    replacement_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    if len(replacement_placeholders) != len(matcher.placeholders):
        raise ValueError("pattern and replacement must take the same number of inputs")
    _copy_attrs(gm, replacement_gm, replacement_graph)
    results = []
    changed = {}  # graph node replaced by an earlier match -> its replacement
    for m in matcher.match(original):
        val_map = {}
        for rn, pn in zip(replacement_placeholders, matcher.placeholders):
            gn = m[pn]
            while gn in changed:  # an input computed by a match replaced already
                gn = changed[gn]
            val_map[rn] = gn
        returning = [m[pn] for pn in matcher.returning]
        users = {u for g in returning for u in g.users}
        order = {n: i for i, n in enumerate(original.nodes)}
        first_user = min(users, key=order.__getitem__) if users else None
        with original.inserting_before(first_user if first_user is not None
                                       else original.output_node):
            copied = original.graph_copy(replacement_graph, val_map)
        copied = _flatten_nodes(copied, []) if not isinstance(copied, Node) else [copied]
        if len(copied) != len(returning):
            raise ValueError("pattern and replacement must return the same number of values")
        for g, c in zip(returning, copied):
            g.replace_all_uses_with(c)
            changed[g] = c
        for pn in reversed(list(pattern_graph.nodes)):
            if pn.op not in ("placeholder", "output"):
                original.erase_node(m[pn])
        results.append(Match(anchor=matcher.returning[0], nodes_map=m))
    gm.recompile()
    return results
