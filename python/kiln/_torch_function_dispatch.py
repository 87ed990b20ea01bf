"""The __torch_function__ dispatch core (decision 0109): the per-thread state (mode stack,
disable flags), which arguments override, the order handlers are asked in, and the wrappers
that the installer puts over kiln's public functions, Tensor methods and properties.

The wrappers only exist once something uses the protocol (see _torch_function_install), and
their first test is cheap: with no mode pushed anywhere and every top-level argument of a type
in _PLAIN (plain tensors, numbers, None, dtypes...), they call the original at once."""
import threading

# Argument types that never override: the wrappers' fast path tests membership only. The
# installer adds kiln's own types (Tensor, Parameter, dtype, device, Size) to it.
_PLAIN = {int, float, bool, complex, str, bytes, type(None), slice, type(Ellipsis)}

# Modes pushed over all threads. Only this global is read on the fast path (a per-thread read
# costs more); a nonzero count sends calls to the slow path, which reads this thread's stack.
_pushed = 0
_PLAIN_TENSOR = []  # [kiln.Tensor], set by the installer (for error messages)


class _State(threading.local):
    def __init__(self):
        self.modes = []          # TorchFunctionMode stack of this thread, innermost last
        self.subclass_off = 0    # DisableTorchFunctionSubclass depth
        self.all_off = 0         # DisableTorchFunction depth (modes too)


state = _State()


class _DisabledImpl:
    """torch._C._disabled_torch_function_impl: as a class's __torch_function__ it opts the
    class out of the protocol (kiln.nn.Parameter: arithmetic returns plain tensors). A callable
    object rather than a function, so that reading it through an instance does not bind it."""
    __name__ = __qualname__ = "_disabled_torch_function_impl"

    def __call__(self, func, types, args=(), kwargs=None):
        state.subclass_off += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            state.subclass_off -= 1

    def __repr__(self):
        return "<built-in function _disabled_torch_function_impl>"


disabled_torch_function_impl = _DisabledImpl()


def push_mode(mode):
    global _pushed
    state.modes.append(mode)
    _pushed += 1


def pop_mode():
    global _pushed
    if not state.modes:
        raise RuntimeError("Tried to pop from an empty TorchFunctionMode stack")
    _pushed -= 1
    return state.modes.pop()


def overrides_type(t):
    """Whether instances of type t take part in dispatch (torch's check_has_torch_function)."""
    if t in _PLAIN:
        return False
    tf = getattr(t, "__torch_function__", None)
    if tf is None:
        return False
    return getattr(tf, "__func__", tf) is not disabled_torch_function_impl


def _add_overloaded(arg, types, found):
    t = type(arg)
    if t in types or not overrides_type(t):
        return
    types.append(t)
    # Subclasses before superclasses; otherwise left to right (NEP 18, as torch).
    for i, other in enumerate(found):
        if issubclass(t, type(other)):
            found.insert(i, arg)
            return
    found.append(arg)


def overloaded_args(args, kwargs, descend=True):
    """The arguments whose types override, in the order their handlers are asked. Looks at the
    top level of args and kwargs values and, with descend, one level into lists and tuples
    (tensor lists: kiln.cat([x, y])), as torch's argument parser does."""
    types, found = [], []
    for a in args:
        if descend and type(a) in (list, tuple):
            for b in a:
                _add_overloaded(b, types, found)
        else:
            _add_overloaded(a, types, found)
    if kwargs:
        for a in kwargs.values():
            if descend and type(a) in (list, tuple):
                for b in a:
                    _add_overloaded(b, types, found)
            else:
                _add_overloaded(a, types, found)
    return found


def find(args, kwargs):
    """(mode or None, overloaded arguments) when a handler must run, else None."""
    st = state
    if st.all_off:
        return None
    mode = st.modes[-1] if st.modes else None
    found = () if st.subclass_off else overloaded_args(args, kwargs)
    if mode is None and not found:
        return None
    return mode, found


def call_handlers(public, found, args, kwargs):
    """Ask the innermost mode, then each overriding argument's class, until one does not
    return NotImplemented (torch's handle_torch_function)."""
    mode, overloaded = found
    types = tuple(type(a) for a in overloaded)
    kwargs = kwargs or None  # torch hands handlers None when there are no keyword arguments
    if mode is not None:
        popped = pop_mode()  # while its handler runs, the mode does not see its own calls
        try:
            result = mode.__torch_function__(public, types, args, kwargs)
        finally:
            push_mode(popped)
        if result is not NotImplemented:
            return result
    for a in overloaded:
        result = a.__torch_function__(public, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = f"{getattr(public, '__module__', None)}.{getattr(public, '__name__', public)}"
    tensor = _PLAIN_TENSOR[0] if _PLAIN_TENSOR else None
    tried = ([f"  - mode object {mode}"] if mode is not None else []) + [
        f"  - tensor subclass {type(a)}" if tensor is not None and isinstance(a, tensor)
        else f"  - {type(a)}" for a in overloaded]
    msg = (f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned "
           f"NotImplemented:\n\n" + "\n".join(tried))
    raise TypeError(msg)


def wrap(orig, public=None, operator=False):
    """A function that behaves as orig for plain arguments and dispatches otherwise. public is
    the function handlers see (the wrapper itself by default; Tensor.add for Tensor.__add__,
    as torch). An operator turns a handler's TypeError into NotImplemented, as torch's binary
    operators do, so Python tries the reflected operator."""
    def wrapper(*args, **kwargs):
        if not _pushed:
            for a in args:
                if type(a) not in _PLAIN:
                    break
            else:
                if not kwargs:
                    return orig(*args)
                for a in kwargs.values():
                    if type(a) not in _PLAIN:
                        break
                else:
                    return orig(*args, **kwargs)
        found = find(args, kwargs)
        if found is None:
            return orig(*args, **kwargs)
        if not operator:
            return call_handlers(public or wrapper, found, args, kwargs)
        try:
            return call_handlers(public or wrapper, found, args, kwargs)
        except TypeError:
            return NotImplemented

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):  # functools.wraps
        try:
            setattr(wrapper, attr, getattr(orig, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__dict__.update(getattr(orig, "__dict__", {}))
    wrapper.__wrapped__ = orig
    return wrapper


def wrap_property(prop):
    """A property whose getter and setter dispatch as torch's Tensor properties do: handlers
    see the new property's __get__ / __set__."""
    fget, fset = prop.fget, prop.fset

    def get(self):
        if not _pushed and type(self) in _PLAIN:
            return fget(self)
        found = find((self,), None)
        if found is None:
            return fget(self)
        return call_handlers(new.__get__, found, (self,), None)

    def set_(self, value):
        if not _pushed and type(self) in _PLAIN:
            return fset(self, value)
        found = find((self,), None)  # torch looks at the tensor only, not the value
        if found is None:
            return fset(self, value)
        return call_handlers(new.__set__, found, (self, value), None)

    new = property(get, set_ if fset is not None else None, prop.fdel, prop.__doc__)
    return new
