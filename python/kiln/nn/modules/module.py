"""kiln.nn.Module: the base class of every layer, subclassed exactly like torch.nn.Module.
Assigning a Parameter, a Module or a registered buffer to an attribute registers it; the
state_dict keys, load_state_dict's checks and messages, repr and hooks follow PyTorch."""
import collections
import itertools
import warnings
from collections import OrderedDict

from ... import _C
from ..._C import Tensor
from ...autograd import Function, no_grad
from ..parameter import Buffer, Parameter
from ...utils.hooks import RemovableHandle

_EXTRA_STATE_KEY = "_extra_state"  # state_dict key of get_extra_state()'s value, as torch

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook"]

# Hooks for every module (torch.nn.modules.module.register_module_*): they run before each
# module's own hooks of the same kind. Tools that follow a whole model (flop counters, module
# trackers) use them instead of hooking each submodule.
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = {}
_global_forward_hooks_always_called = {}
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) -> None or a new output (hook(module, args, kwargs, output)
    with with_kwargs), after every module's forward; always_call: also when forward raised."""
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=[_global_forward_hooks_with_kwargs,
                                         _global_forward_hooks_always_called])
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output, for every module."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input, for every module."""
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle

_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _incompatible_repr(self):
    if not self.missing_keys and not self.unexpected_keys:
        return "<All keys matched successfully>"
    return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


_IncompatibleKeys.__repr__ = _incompatible_repr


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join((n * " ") + ln if ln.strip() else "" for ln in lines)


def _typename(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class BackwardHookFunction(Function):
    """Identity on a module's tensor inputs or outputs (torch's name, so grad_fn.name() is
    "BackwardHookFunctionBackward"). On the inputs its backward sees grad_input and runs the
    full backward hooks (which may replace it); on the outputs it sees grad_output (None for
    an output that got no gradient), runs the backward pre-hooks and keeps grad_output for
    the full hooks."""

    @staticmethod
    def forward(ctx, state, on_outputs, *tensors):
        ctx.state = state
        ctx.on_outputs = on_outputs
        if on_outputs:
            ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        if ctx.on_outputs:
            return (None, None) + ctx.state.output_backward(grads)
        return (None, None) + ctx.state.input_backward(grads)


class _BackwardHook:
    """One module call's backward hooks (as torch.utils.hooks.BackwardHook): the tensor
    inputs and outputs go through identity Functions whose backward calls the hooks."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = -1
        self.input_tensors_index = None
        self.input_meta = ()
        self.n_outputs = -1
        self.output_tensors_index = None
        self.input_versions = ()

    @staticmethod
    def _pack_with_none(indices, values, size):
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def _apply_on_tensors(self, on_outputs, args):
        """args with its tensors replaced by BackwardHookFunction's aliases, and their
        positions (None and args unchanged when no tensor requires grad or grad mode is
        off)."""
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in idx]
        if not (_C.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return args, None
        new = BackwardHookFunction.apply(self, on_outputs, *tensors)
        arg_list = list(args)
        for i, t in zip(idx, new):
            arg_list[i] = t
        out = tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)
        return out, idx

    def setup_input_hook(self, args):
        res, idx = self._apply_on_tensors(False, args)
        self.n_inputs = len(args)
        self.input_tensors_index = idx
        if idx is not None:
            self.input_meta = [(tuple(args[i].shape), args[i].dtype, args[i].device)
                               for i in idx]
            # The caller's tensors (which share the aliases' version counter): the aliases
            # would link this object to its own graph node.
            self.input_versions = [(k, args[i], args[i]._version) for k, i in enumerate(idx)
                                   if args[i].requires_grad]
        return res

    def check_inputs_unmodified(self):
        # torch forbids modifying these aliases in place (they are views made by a custom
        # Function); kiln would change the caller's tensor without its history, so it raises
        # too, once forward has returned.
        for k, t, version in self.input_versions:
            if t._version != version:
                raise RuntimeError(
                    f"Output {k} of BackwardHookFunction is a view and is being modified "
                    "inplace. This view was created inside a custom Function (or because an "
                    "input was returned as-is) and the autograd logic to handle view+inplace "
                    "would override the custom backward associated with the custom Function, "
                    "leading to incorrect gradients. This behavior is forbidden. You can fix "
                    "this by cloning the output of the custom Function.")
        self.input_versions = ()

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, idx = self._apply_on_tensors(True, args)
        self.n_outputs = len(args)
        self.output_tensors_index = idx
        return res if is_tuple else res[0]

    def output_backward(self, grads):
        self.grad_outputs = self._pack_with_none(self.output_tensors_index, grads,
                                                 self.n_outputs)
        expected = len(self.grad_outputs)
        for hook in self.user_pre_hooks:
            r = hook(self.module, self.grad_outputs)
            if r is None:
                continue
            if len(r) != expected:
                raise RuntimeError("Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(r)}, but expected {expected}")
            self.grad_outputs = r
        local = self.grad_outputs
        if self.input_tensors_index is None:
            # No input requires grad: the full hooks run now, with grad_input all None.
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=4)  # the caller of backward()
            grad_inputs = self._pack_with_none([], [], self.n_inputs)
            for hook in self.user_hooks:
                r = hook(self.module, grad_inputs, self.grad_outputs)
                if r is not None and not (isinstance(r, tuple) and all(e is None for e in r)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_tensors_index)

    def input_backward(self, grads):
        if self.grad_outputs is None:
            # The gradient reached the inputs without passing through the outputs (e.g.
            # double backward): torch does not call the hooks then.
            return tuple(grads)
        # As torch, an input that got no gradient (an integer one included) shows zeros.
        grads = [_C.zeros(shape, dtype=dtype, device=device) if g is None else g
                 for g, (shape, dtype, device) in zip(grads, self.input_meta)]
        res = self._pack_with_none(self.input_tensors_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if len(out) != len(res):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                   f"got {len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_tensors_index)


_STATE_DICT_HOOK_DICTS = ("_state_dict_pre_hooks", "_state_dict_hooks",
                          "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


class _WrappedHook:
    """A load_state_dict pre-hook, called with its module first when registered with it."""

    def __init__(self, hook, module=None):
        self.hook, self.module = hook, module

    def __call__(self, *args, **kwargs):
        if self.module is not None:
            return self.hook(self.module, *args, **kwargs)
        return self.hook(*args, **kwargs)


class Module:
    """Base class for all neural network modules."""

    training: bool
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init and (args or kwargs):
            if kwargs:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword "
                                f"argument '{next(iter(kwargs))}'")
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        d = object.__setattr__
        d(self, "training", True)
        d(self, "_parameters", {})
        d(self, "_buffers", {})
        d(self, "_non_persistent_buffers_set", set())
        d(self, "_modules", {})
        d(self, "_forward_hooks", OrderedDict())
        d(self, "_forward_hooks_with_kwargs", {})
        d(self, "_forward_pre_hooks", OrderedDict())
        d(self, "_forward_pre_hooks_with_kwargs", {})
        d(self, "_backward_hooks", OrderedDict())
        d(self, "_backward_pre_hooks", OrderedDict())
        for name in _STATE_DICT_HOOK_DICTS:
            d(self, name, OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward = None  # subclasses define forward

    # --- registration -------------------------------------------------------------------

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = tensor.data
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as a "
                             "function of another Tensor, compute the value in the forward() "
                             "method.")
        else:
            self._parameters[name] = param

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Puts `module` at the dotted path `target`, replacing the submodule there or (unless
        strict) adding it to the existing parent."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        *path, name = target.split(".")
        parent = self.get_submodule(".".join(path))
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return p

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return mod._buffers[name]

    # --- attribute protocol -------------------------------------------------------------

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules,
                        self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers,
                            self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                    f"'{name}' (torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, (Tensor, Buffer)):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(torch.nn.Buffer, torch.Tensor or None expected)")
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                        value = value.data
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    remove_from(self.__dict__, self._parameters, self._modules)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + \
            list(self._buffers)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_backward_hooks", "_backward_pre_hooks") + _STATE_DICT_HOOK_DICTS:
            # pickled by an older kiln
            if name not in self.__dict__:
                object.__setattr__(self, name, OrderedDict())

    # --- traversal ----------------------------------------------------------------------

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    __hash__ = object.__hash__

    # --- modes, conversion, gradients ---------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad.detach()
                    g.zero_()
                    p.grad = g

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        for m in self.children():
            m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
            g = p.grad
            _C._set_data(p, new)
            if g is not None:
                with no_grad():
                    p.grad = fn(g)
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        device, dtype = None, None
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, (str, _C.device)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
        for k in kwargs:
            if k not in ("device", "dtype", "non_blocking", "memory_format", "tensor"):
                raise TypeError(f"to() received an invalid combination of arguments: '{k}'")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        memory_format = kwargs.get("memory_format")

        def convert(t):
            if t.is_floating_point():
                t = t.to(device=device if device is not None else t.device,
                         dtype=dtype if dtype is not None else t.dtype)
            elif device is not None:
                t = t.to(device)
            # as torch: memory_format lays out the 4-D parameters and buffers (conv weights)
            if memory_format is not None and t.dim() == 4:
                t = t.to(memory_format=memory_format)
            return t
        return self._apply(convert)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def to_empty(self, *, device, recurse=True):
        """Moves parameters and buffers to `device` without copying their values (torch's
        to_empty): new uninitialised storage of the same shapes and dtypes. The step after
        building a module on the meta device, before loading a state dict or calling
        reset_parameters()."""
        def fresh(t):
            return _C.empty_like(t, device=device)
        if recurse:
            return self._apply(fresh)
        for key, p in self._parameters.items():
            if p is not None:
                with no_grad():
                    _C._set_data(p, fresh(p))
                p.grad = None
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fresh(b)
        return self

    def share_memory(self):
        """Moves parameters and buffers into shared memory in place (Hogwild training:
        processes forked or sent the module afterwards update the same values)."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
        return self

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dtype=dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # --- state dict ---------------------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY] = self.get_extra_state()

    def get_extra_state(self):
        """What a subclass wants saved in its state_dict besides parameters and buffers
        (under the "_extra_state" key); override it with set_extra_state."""
        raise RuntimeError("Module.get_extra_state() is called only for modules that override "
                           "it")

    def set_extra_state(self, state):
        """Receives get_extra_state()'s value from load_state_dict."""
        raise RuntimeError("Module.set_extra_state() is called only for modules that override "
                           "it")

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # positional (destination, prefix, keep_vars), deprecated in torch
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        local_metadata = {"version": self._version}
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                # the private hook's old contract: a returned dict replaces the result (only
                # the root module's return value reaches the caller, as in torch)
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(),
                                                        persistent.items()) if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key in state_dict:
                inp = state_dict[key]
                if not isinstance(inp, Tensor):
                    error_msgs.append(f'While copying the parameter named "{key}", expected '
                                      "torch.Tensor or Tensor-like object from checkpoint but "
                                      f"received {type(inp)}")
                    continue
                if len(param.shape) == 0 and len(inp.shape) == 1 and inp.shape[0] == 1:
                    inp = inp[0]
                if tuple(inp.shape) != tuple(param.shape):
                    error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                      f"{inp.shape} from checkpoint, the shape in current model "
                                      f"is {param.shape}.")
                    continue
                try:
                    with no_grad():
                        if assign:
                            if isinstance(param, Parameter):
                                inp = Parameter(inp, requires_grad=param.requires_grad)
                            setattr(self, name, inp)
                        else:
                            if param.is_meta and not inp.is_meta:
                                warnings.warn(
                                    f"for {key}: copying from a non-meta parameter in the "
                                    "checkpoint to a meta parameter in the current model, which "
                                    "is a no-op. (Did you mean to pass `assign=True` to assign "
                                    "items in the state dictionary to their corresponding key in "
                                    "the module instead of copying them in place?)")
                            param.copy_(inp)
                except Exception as ex:  # noqa: BLE001 - reported as torch does
                    error_msgs.append(f'While copying the parameter named "{key}", whose '
                                      f"dimensions in the model are {param.size()} and whose "
                                      f"dimensions in the checkpoint are {inp.size()}, an "
                                      f"exception occurred : {ex.args}.")
            elif strict:
                missing_keys.append(key)
        extra_key = prefix + _EXTRA_STATE_KEY
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    parts = key[len(prefix):].split(".", 1)
                    if len(parts) > 1:
                        if parts[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif parts[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, local, prefix=""):
            meta = {"assign_to_params_buffers": True} if assign else {}
            module._load_from_state_dict(local, prefix, meta, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(cp)}, cp)
            # the hooks see (and may edit in place) the keys found so far in the whole load
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), called before state_dict() saves the module."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, called once the module
        and its children are saved; it may edit state_dict in place."""
        hook._from_public_api = True
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def _register_state_dict_hook(self, hook):
        # torch's older private form: a returned dict replaces the root's state_dict
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook "
                               "that was previously registered via "
                               "register_state_dict_post_hook")
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs), called by _load_from_state_dict before it loads."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = _WrappedHook(
            hook, self if with_module else None)
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, called after the module and its children
        are loaded; editing incompatible_keys' lists in place changes what strict=True
        reports."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # --- hooks and calling --------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=self._forward_hooks_with_kwargs)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> tuple or None, called when the gradients w.r.t. the
        module's outputs are known; a returned tuple replaces grad_output (entries are None
        for outputs that are not tensors or got no gradient)."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> tuple or None, called when the gradients
        w.r.t. the module's positional inputs are known (None for inputs that are not
        tensors); a returned tuple replaces grad_input. If no input requires grad, it is
        called with grad_input all None once grad_output is known (and must return None).
        Hooks are registered as torch's: the module's forward sees aliases of its tensor
        inputs and the caller gets aliases of its tensor outputs; modifying the inputs in
        place inside forward raises."""
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook):
        # torch 2.13 still runs this deprecated hook with its old semantics: it is registered
        # on the grad_fn of the module's (first) output, so grad_input are the gradients of
        # the inputs of the last autograd node of forward (for Linear: addmm's bias, input
        # and weight-transpose gradients), not of the module's inputs, with FutureWarnings
        # where that differs. kiln's graph nodes take no hooks from Python, and aliasing it to
        # register_full_backward_hook would hand such hooks different values silently, so it
        # raises instead.
        raise NotImplementedError(
            "Module.register_backward_hook (deprecated in PyTorch) is not supported by kiln: "
            "its grad_input are the gradients of the last autograd node of forward, which kiln "
            "cannot hook. Use register_full_backward_hook (gradients w.r.t. the module's "
            "inputs) instead.")

    def _call_impl(self, *args, **kwargs):
        # No hook anywhere (the common case, and every step of a decoding loop): forward
        # straight away, as torch's Module does, without building the hook lists below.
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks or _global_forward_pre_hooks
                or _global_forward_hooks or _global_backward_pre_hooks
                or _global_backward_hooks):
            forward = self.forward
            if forward is not None:
                return forward(*args, **kwargs)
        full_backward_hooks = list(self._backward_hooks.values())
        backward_pre_hooks = list(self._backward_pre_hooks.values())
        if _global_backward_hooks or _global_backward_pre_hooks:
            full_backward_hooks = list(_global_backward_hooks.values()) + full_backward_hooks
            backward_pre_hooks = list(_global_backward_pre_hooks.values()) + backward_pre_hooks
        pre_hooks = list(self._forward_pre_hooks.items())
        if _global_forward_pre_hooks:
            pre_hooks = list(_global_forward_pre_hooks.items()) + pre_hooks
        for hid, hook in pre_hooks:
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        if self.forward is None:
            raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                      '"forward" function')
        bw_hook = None
        if full_backward_hooks or backward_pre_hooks:
            bw_hook = _BackwardHook(self, full_backward_hooks, backward_pre_hooks)
            args = bw_hook.setup_input_hook(args)
        try:
            result = self.forward(*args, **kwargs)
        except BaseException:
            # global forward hooks registered with always_call run even when forward raised
            for hid, hook in list(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called:
                    try:
                        if hid in _global_forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001 - the forward's error is the one to see
                        pass
            raise
        if bw_hook is not None:
            bw_hook.check_inputs_unmodified()
        post_hooks = list(self._forward_hooks.items())
        if _global_forward_hooks:
            post_hooks = list(_global_forward_hooks.items()) + post_hooks
        for hid, hook in post_hooks:
            if hid in self._forward_hooks_with_kwargs or hid in _global_forward_hooks_with_kwargs:
                r = hook(self, args, kwargs, result)
            else:
                r = hook(self, args, result)
            if r is not None:
                result = r
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a "
                              "Tensor or a tuple of Tensors but received " + str(type(result)),
                              stacklevel=2)
            result = bw_hook.setup_output_hook(result)
        return result

    __call__ = _call_impl

    # --- printing -----------------------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"
