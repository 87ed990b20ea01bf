"""Fake (meta) implementations: what an op does on tensors without data. kiln runs them on the
meta device (decision 0104): an op called with a meta tensor runs its fake impl, which must
return meta tensors of the right shapes and dtypes (x.new_empty(...), kiln.empty_like(x))."""
import contextlib
import threading


class _CtxState(threading.local):
    def __init__(self):
        self.stack = []


_state = _CtxState()


class DynamicOutputShapeException(NotImplementedError):
    """A fake impl asked for a data-dependent size, which the meta device cannot give (torch's
    DynamicOutputShapeException, a RuntimeError too: NotImplementedError is one)."""


class FakeImplCtx:
    """What kiln.library.get_ctx() returns inside a fake impl (torch's FakeImplCtx)."""

    def __init__(self, op_name):
        self._op = op_name

    def new_dynamic_size(self, *, min=0, max=None):
        """torch makes a symbolic size for a data-dependent output shape here. kiln has no
        symbolic shapes, and meta tensors have no values to count: as kiln's own
        data-dependent ops (nonzero, unique, ...) on the meta device, this raises."""
        if min < 0:
            raise ValueError(f"ctx.new_dynamic_size(min={min}, ...): expected min to be greater "
                             "than or equal to 0: this API can only create non-negative sizes.")
        raise DynamicOutputShapeException(
            f"{self._op}: the fake impl asked for a data-dependent size "
            "(get_ctx().new_dynamic_size()), which kiln cannot provide: kiln has no symbolic "
            "shapes, and the meta device has no values to compute it from. Run the op on real "
            "tensors instead.")

    def create_unbacked_symint(self, *, min=2, max=None):
        import warnings
        warnings.warn("`create_unbacked_symint` is deprecated, please use `new_dynamic_size` "
                      "instead", FutureWarning, stacklevel=2)
        return self.new_dynamic_size(min=min, max=max)


def get_ctx():
    """The FakeImplCtx of the fake impl running in this thread (None outside one)."""
    return _state.stack[-1] if _state.stack else None


@contextlib.contextmanager
def fake_ctx(op_name):
    _state.stack.append(FakeImplCtx(op_name))
    try:
        yield
    finally:
        _state.stack.pop()


def make_meta_kernel(op_name, fn):
    """fn as a Meta kernel: get_ctx() works inside it."""
    def meta_kernel(*args, **kwargs):
        with fake_ctx(op_name):
            return fn(*args, **kwargs)

    meta_kernel.__wrapped__ = fn
    meta_kernel._kiln_fake = True
    return meta_kernel
