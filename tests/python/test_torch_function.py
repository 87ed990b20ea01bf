"""torch's __torch_function__ protocol in kiln (decision 0109), against torch 2.13 running the
same code (torch_function_scenarios.py). Everything that defines a __torch_function__ class
runs in subprocesses: kiln installs its dispatching wrappers the first time one is defined,
and that must not leak into this process (the rest of the suite runs without them)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import torch_function_scenarios as scenarios

HERE = os.path.dirname(os.path.abspath(__file__))


def _python(code):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, cwd=HERE, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture(scope="module")
def results():
    out = subprocess.run([sys.executable, os.path.join(HERE, "torch_function_scenarios.py")],
                         capture_output=True, text=True, cwd=HERE, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", [f.__name__ for f in scenarios.SCENARIOS])
def test_same_as_torch(results, name):
    got = results[name]
    assert got["kiln"] == got["torch"]
    assert not str(got["torch"]).startswith("raised"), got["torch"]


def test_zero_cost_until_a_class_uses_the_protocol():
    print(_python("""
        import builtins, kiln
        import kiln.nn.functional as F
        nb_method = type(kiln._C.Tensor.__dict__["dim"])

        def untouched():
            return (kiln.add is kiln._C.add and type(kiln.Tensor.__dict__["__add__"]) is nb_method
                    and not hasattr(F.relu, "__wrapped__") and type(kiln.Tensor.__dict__["add"])
                    is nb_method and not kiln.overrides._installed())

        assert untouched()
        x = kiln.ones(2) + 1
        p = kiln.nn.Parameter(kiln.ones(2)) * 2          # Parameter opts out

        class Opted(kiln.Tensor):                           # disabled: nothing to route
            __torch_function__ = kiln.Tensor._disabled_torch_function_impl

        class Other:                                        # no __torch_function__
            pass

        import torch                                        # torch's own classes do not count
        assert untouched()

        class Duck:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return func.__name__

        assert kiln.add.__wrapped__ is kiln._C.add and kiln.add(Duck(), 1) == "add"
        assert kiln.overrides._installed()
        assert builtins.__build_class__ is kiln._torch_function_install._original_build_class
    """))


def test_tensor_subclass_installs():
    _python("""
        import kiln
        assert kiln.add is kiln._C.add

        class Sub(kiln.Tensor):
            pass

        assert kiln.add.__wrapped__ is kiln._C.add
        assert type(kiln.ones(2).as_subclass(Sub) * 2) is Sub
    """)


def test_mode_installs():
    _python("""
        import kiln
        seen = []

        class M(kiln.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(func)
                return func(*args, **(kwargs or {}))

        m = M.__new__(M)                  # made without a class statement being watched
        kiln.overrides.TorchFunctionMode.__init__(m)
        with m:
            kiln.ones(2).sum()
        assert [f.__name__ for f in seen] == ["ones", "sum"], seen
    """)


def test_wrappers_are_exact():
    """Installed wrappers behave as the originals for plain tensors: names, docs, errors,
    pickling, autograd, kiln.compile capture."""
    _python("""
        import pickle, kiln
        import kiln.nn.functional as F
        originals = {n: getattr(kiln, n) for n in ("add", "xlogy", "cat", "einsum")}
        relu, t_add, shape = F.relu, kiln.Tensor.add, kiln.Tensor.shape

        def error(fn, *a):
            try:
                fn(*a)
            except Exception as e:
                return type(e), str(e)

        before = [error(kiln.add, kiln.ones(2), kiln.ones(3)), error(kiln.add, "a", 1),
                  error(lambda: kiln.ones(2) + "a"), error(lambda: kiln.ones(2)[5])]

        class Sub(kiln.Tensor):
            pass

        assert kiln.add is not originals["add"]
        for n, f in originals.items():
            w = getattr(kiln, n)
            assert w.__wrapped__ is f and w.__name__ == f.__name__ and w.__doc__ == f.__doc__
        assert F.relu.__wrapped__ is relu and F.relu.__module__ == relu.__module__
        assert kiln.Tensor.add.__wrapped__ is t_add and kiln.Tensor.add.__name__ == "add"
        assert kiln.Tensor.shape.__doc__ == shape.__doc__
        after = [error(kiln.add, kiln.ones(2), kiln.ones(3)), error(kiln.add, "a", 1),
                 error(lambda: kiln.ones(2) + "a"), error(lambda: kiln.ones(2)[5])]
        assert before == after, (before, after)
        for f in (kiln.xlogy, F.relu, kiln.linalg.norm, kiln.fft.fft, kiln.add,
                  kiln.Tensor.add, kiln.Tensor.square):
            assert pickle.loads(pickle.dumps(f)) is f, f
        x = kiln.tensor([1.0, -2.0, 3.0], requires_grad=True)
        (kiln.add(x, x) * x).relu().sum().backward()
        assert x.grad.tolist() == [4.0, -8.0, 12.0]

        def f(a, b):
            return F.relu(a @ b + 1).sum(0)

        g = kiln.compile(f)
        a, b = kiln.randn(3, 4), kiln.randn(4, 2)
        assert kiln.allclose(g(a, b), f(a, b)) and kiln.allclose(g(a, b), f(a, b))
    """)


def test_disabled_impl_and_names():
    import kiln
    assert kiln._C.DisableTorchFunctionSubclass is kiln.overrides.DisableTorchFunctionSubclass
    assert kiln.nn.Parameter.__torch_function__ is kiln.Tensor._disabled_torch_function_impl
    assert kiln.overrides.get_ignored_functions() >= {kiln.manual_seed, kiln.is_tensor}
