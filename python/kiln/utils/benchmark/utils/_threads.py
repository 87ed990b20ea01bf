"""Running a measurement with a fixed intra-op thread count."""
import contextlib

import kiln


@contextlib.contextmanager
def set_torch_threads(n):
    """kiln.set_num_threads(n) for the duration of the block, then the prior count again
    (even on error). The name is torch's, kept so that benchmark code ports unchanged."""
    prior = kiln.get_num_threads()
    try:
        kiln.set_num_threads(n)
        yield
    finally:
        kiln.set_num_threads(prior)
