"""kiln.Tensor's default __torch_function__ (decision 0109), as torch.Tensor's: run the
function with subclass dispatch off and turn tensor results into the calling subclass."""
from ._torch_function_dispatch import state

# Functions whose results the default implementation hands back as they are (torch's
# get_default_nowrap_functions): the getter of Tensor.grad. Filled by the installer.
nowrap = set()


def convert(ret, cls, tensor_type):
    """torch's _convert: a tensor that is not a cls becomes one (as_subclass); tuples and lists
    are converted element by element and keep their type (kiln.return_types named tuples)."""
    if cls is tensor_type:
        return ret
    if isinstance(ret, tensor_type):
        return ret if isinstance(ret, cls) else ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        items = [convert(r, cls, tensor_type) for r in ret]
        if hasattr(ret, "_fields"):  # named tuples take fields, not an iterable
            return type(ret)(*items)
        return type(ret)(items)
    return ret


def make_default(tensor_type):
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """The default: func runs without subclass dispatch; tensor results become cls.
        NotImplemented when some overriding type is not a base of cls (it goes first)."""
        if kwargs is None:
            kwargs = {}
        if not all(issubclass(cls, t) for t in types):
            return NotImplemented
        state.subclass_off += 1
        try:
            ret = func(*args, **kwargs)
        finally:
            state.subclass_off -= 1
        try:
            if func in nowrap:
                return ret
        except TypeError:  # an unhashable callable is no getter of ours
            pass
        return convert(ret, cls, tensor_type)

    return classmethod(__torch_function__)
