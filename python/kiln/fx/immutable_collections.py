"""immutable_list / immutable_dict, as torch.fx.immutable_collections.

A Node's kwargs (and lists inside its args) are these types so that a pass writing
`node.args[0].append(...)` or `node.kwargs["dim"] = 1` fails loudly: such an edit would
bypass Node's bookkeeping of users and inputs. Assign `node.args = ...` instead."""

__all__ = ["immutable_list", "immutable_dict"]

_MESSAGE = ("'{}' object does not support mutation. If you are attempting to modify the "
            "kwargs or args of a kiln.fx.Node object,\ninstead create a new copy of it and "
            "assign the copy to the node:\n    new_args = ... # copy and mutate args\n"
            "    node.args = new_args\n")


def _no_mutation(self, *args, **kwargs):
    raise TypeError(_MESSAGE.format(type(self).__name__))


class immutable_list(list):
    __delitem__ = __iadd__ = __imul__ = __setitem__ = _no_mutation
    append = clear = extend = insert = pop = remove = reverse = sort = _no_mutation

    def __hash__(self):
        return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (tuple(iter(self)),))


class immutable_dict(dict):
    __delitem__ = __setitem__ = __ior__ = _no_mutation
    clear = pop = popitem = setdefault = update = _no_mutation

    def __hash__(self):
        return hash(tuple(self.items()))

    def __reduce__(self):
        return (immutable_dict, (tuple(self.items()),))
