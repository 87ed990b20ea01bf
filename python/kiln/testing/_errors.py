"""The two internal exceptions of kiln.testing's comparisons.

A comparison never raises AssertionError from deep inside: it raises ErrorMeta, which
carries the exception type, the generated message and the position of the failing item
inside nested containers, so that assert_close can apply the user's `msg` (a string that
replaces the message, or a callable that edits it) once, at the top."""


class ErrorMeta(Exception):
    """An error found while comparing; to_error() turns it into the user-facing one."""

    def __init__(self, type, msg, *, id=()):
        super().__init__("kiln.testing internal error carrier: call .to_error() to raise "
                         "the user-facing exception")
        self.type = type
        self.msg = msg
        self.id = id

    def to_error(self, msg=None):
        """The exception to raise: a string `msg` replaces the generated text (without the
        item position), a callable receives the generated text and returns the final one."""
        if not isinstance(msg, str):
            generated = self.msg
            if self.id:
                where = "".join(str([item]) for item in self.id)
                generated += f"\n\nThe failure occurred for item {where}"
            msg = msg(generated) if callable(msg) else generated
        return self.type(msg)


class UnsupportedInputs(Exception):
    """Raised while building a pair when that pair type cannot handle the inputs; the
    next pair type is then tried."""
