"""The exception types of torch.distributed: all are RuntimeErrors, so code that catches
RuntimeError around a collective keeps working."""

__all__ = ["DistError", "DistBackendError", "DistStoreError", "DistNetworkError"]


class DistError(RuntimeError):
    """Base of the errors raised by kiln.distributed."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed: a peer closed its connection, sent
    data that does not match, or did not answer within the process group's timeout."""


class DistStoreError(DistError):
    """A store operation failed, most often a get/wait that timed out."""


class DistNetworkError(DistError):
    """A socket could not be connected (the store's or a peer's) before the timeout."""
