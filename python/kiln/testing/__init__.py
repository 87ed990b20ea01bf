"""kiln.testing: the test helpers of torch.testing over kiln tensors: assert_close (and
the deprecated assert_allclose) and make_tensor."""
from ._assert_close import assert_allclose, assert_close
from ._creation import make_tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]
