"""The errors kiln.export raises (torch.export's UserError and GuardOnDataDependentSymNode).

Both name the cause and the line of the exported program that triggered it; see
_trace._user_frame."""
import enum

__all__ = ["UserError", "UserErrorType", "GuardOnDataDependentSymNode",
           "ExportSerializationError"]


class UserErrorType(enum.Enum):
    """What a UserError is about (torch._dynamo.exc.UserErrorType's members)."""
    DYNAMIC_CONTROL_FLOW = enum.auto()
    ANTI_PATTERN = enum.auto()
    STANDARD_LIBRARY = enum.auto()
    CONSTRAINT_VIOLATION = enum.auto()
    DYNAMIC_DIM = enum.auto()
    INVALID_INPUT = enum.auto()
    INVALID_OUTPUT = enum.auto()
    UNSUPPORTED_FEATURE = enum.auto()


class UserError(RuntimeError):
    """The program or the export call cannot be exported as asked (torch's
    torch._dynamo.exc.UserError): a dynamic dimension the code specializes, a bad
    dynamic_shapes specification, an input or output export does not handle.
    error_type tells which (UserErrorType)."""

    def __init__(self, error_type, msg):
        super().__init__(msg)
        self.error_type = error_type
        self.message = msg


class GuardOnDataDependentSymNode(RuntimeError):
    """Python control flow (if / while / bool() / int() / len()) on a value computed from the
    inputs' data, such as `if x.sum() > 0:` (torch's
    torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode). An exported program
    is one graph for every input, so it cannot branch on tensor values."""

    def __init__(self, msg, node=None):
        super().__init__(msg)
        self.node = node


class ExportSerializationError(RuntimeError):
    """kiln.export.load was given something that is not a valid kiln exported program
    (a foreign or corrupted file), or save met a value it cannot write."""
