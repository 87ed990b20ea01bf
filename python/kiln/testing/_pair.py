"""The base of the comparison pairs: one pair holds an (actual, expected) leaf of the
compared structures and knows how to compare it. Building a pair raises UnsupportedInputs
when its type does not handle the inputs, so assert_close tries the next pair type."""
from ._errors import ErrorMeta, UnsupportedInputs


class Pair:
    """Subclasses take the options they use as keyword arguments and leave the rest (for
    other pair types) in **unknown; compare() raises ErrorMeta on a mismatch."""

    def __init__(self, actual, expected, *, id=(), **unknown):
        self.actual = actual
        self.expected = expected
        self.id = id

    @staticmethod
    def _unsupported():
        raise UnsupportedInputs

    @staticmethod
    def _require_isinstance(*inputs, cls):
        if not all(isinstance(input, cls) for input in inputs):
            raise UnsupportedInputs

    def _fail(self, type, msg):
        raise ErrorMeta(type, msg, id=self.id)

    def compare(self):
        raise NotImplementedError

    def extra_repr(self):
        """Names of the options shown by repr (which only appears in internal errors)."""
        return ()

    def __repr__(self):
        fields = [("id", self.id), ("actual", self.actual), ("expected", self.expected)]
        fields += [(name, getattr(self, name)) for name in self.extra_repr()]
        body = "\n".join(f"    {name}={value!s}," for name, value in fields)
        return f"{type(self).__name__}(\n{body}\n)"
