"""kiln.optim.Optimizer: param_groups, per-parameter state, zero_grad, state_dict and
load_state_dict with torch.optim's layout (parameters numbered in group order), and torch's
hooks: step pre / post hooks (per optimizer and global), state_dict and load_state_dict pre /
post hooks."""
import copy
import functools
from collections import OrderedDict, defaultdict
from itertools import chain
from typing import Any, Callable

from .. import _C
from .._C import Tensor
from ..autograd import enable_grad, no_grad

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]

# Hooks for every optimizer: the pre hooks run before each optimizer's own, the post hooks after.
_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


def _removable(hooks, hook, prepend=False):
    # imported here: kiln.nn imports kiln.optim's neighbours at start-up
    from ..nn.modules.module import RemovableHandle
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before every step()."""
    return _removable(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) -> None, after every step()."""
    return _removable(_global_optimizer_post_hooks, hook)


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(o):
    t = type(o)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _use_grad(step):
    """Runs step() under no_grad (the update must not be recorded)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with no_grad():
            return step(self, *args, **kwargs)
    return wrapper


_HOOK_DICTS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
               "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
               "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks")


def _run_step_hooks(step):
    """step() with the pre hooks (global ones first) and post hooks (global ones last) around
    it; a pre hook may replace step's arguments by returning (args, kwargs). As torch's, args
    starts with the optimizer itself (and a replacement must keep it there)."""
    @functools.wraps(step)
    def wrapper(*args, **kwargs):
        self = args[0]
        for pre_hook in chain(_global_optimizer_pre_hooks.values(),
                              self._hooks("_optimizer_step_pre_hooks").values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step} must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(*args, **kwargs)
        for post_hook in chain(self._hooks("_optimizer_step_post_hooks").values(),
                               _global_optimizer_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True
    return wrapper


class Optimizer:
    OptimizerPreHook = Callable[..., Any]
    OptimizerPostHook = Callable[..., None]

    def __init__(self, params, defaults):
        for name in _HOOK_DICTS:
            setattr(self, name, OrderedDict())
        self._patch_step_function()
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        # hooks are not pickled (nor deep-copied): a restored optimizer starts without any
        self.__dict__.update(state)
        self._patch_step_function()

    # --- hooks ---------------------------------------------------------------------------

    def _hooks(self, name):
        # created on first use too, for subclasses that never ran Optimizer.__init__
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = self.__dict__[name] = OrderedDict()
        return hooks

    def _patch_step_function(self):
        # As torch: the class's step is wrapped once, on the first instance, so that custom
        # subclasses get the hooks without decorating their step.
        cls = self.__class__
        if not getattr(cls.step, "hooked", False):
            cls.step = _run_step_hooks(cls.step)

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before step()."""
        return _removable(self._hooks("_optimizer_step_pre_hooks"), hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, after step()."""
        return _removable(self._hooks("_optimizer_step_post_hooks"), hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, before state_dict() builds the dict."""
        return _removable(self._hooks("_optimizer_state_dict_pre_hooks"), hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None (None: keep the given one)."""
        return _removable(self._hooks("_optimizer_state_dict_post_hooks"), hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, before load_state_dict() reads
        it (it gets a shallow copy of the caller's dict)."""
        return _removable(self._hooks("_optimizer_load_state_dict_pre_hooks"), hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, after load_state_dict() has installed the state."""
        return _removable(self._hooks("_optimizer_load_state_dict_post_hooks"), hook, prepend)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if not seen.isdisjoint(id(p) for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        g = p.grad.detach()
                        g.zero_()
                        p.grad = g

    def step(self, closure=None):
        raise NotImplementedError

    def _closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # --- state dict ---------------------------------------------------------------------

    def state_dict(self):
        for pre_hook in self._hooks("_optimizer_state_dict_pre_hooks").values():
            pre_hook(self)
        mapping = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack_group(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        state_dict = {"state": state, "param_groups": groups}
        for post_hook in self._hooks("_optimizer_state_dict_post_hooks").values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _cast(param, value, key=None):
        if isinstance(value, Tensor):
            if key == "step":
                return value.detach().clone()
            if param.is_floating_point():
                return value.detach().to(dtype=param.dtype, device=param.device).clone()
            return value.detach().to(device=param.device).clone()
        if isinstance(value, dict):
            return {k: Optimizer._cast(param, v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            # LBFGS keeps its history as lists of tensors: copied too, so that a loaded
            # optimizer never shares (and pops from) the saved one's lists.
            return type(value)(Optimizer._cast(param, v) for v in value)
        return value

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)  # shallow copy: a pre hook may edit it, not the caller's
        for pre_hook in self._hooks("_optimizer_load_state_dict_pre_hooks").values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for old_id, p in zip(s["params"], g["params"]):
                id_map[old_id] = p
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = self._cast(id_map[k], v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups
        self._after_load_state_dict()
        for post_hook in self._hooks("_optimizer_load_state_dict_post_hooks").values():
            post_hook(self)

    def _after_load_state_dict(self):
        """Subclasses' fix-ups of the loaded state (run before the post hooks see it)."""


def _step_tensor():
    """The per-parameter step counter: a float32 0-d tensor, as torch."""
    return _C.tensor(0.0, dtype=_C.float32)


def _get_value(x):
    return x.item() if isinstance(x, Tensor) else x


def _lerp_(t, end, weight):
    """t.lerp_(end, weight) (kiln has only the out-of-place lerp)."""
    return t.copy_(_C.lerp(t, end, weight))


def _keep_float32(optimizer, keys):
    """After load_state_dict (which casts every state tensor but "step" to its parameter's
    dtype, as torch's does): the 0-d float32 bookkeeping tensors named by keys back to float32,
    so that a resumed run rounds them as the uninterrupted run does."""
    for state in optimizer.state.values():
        for key in keys:
            value = state.get(key) if isinstance(state, dict) else None
            if isinstance(value, Tensor) and value.dtype != _C.float32:
                state[key] = value.to(dtype=_C.float32)
