"""kiln.autograd.gradcheck / gradgradcheck against torch 2.13's: the same functions on the same
inputs (numpy copies) must get the same verdict -- True for correct gradients, GradcheckError
(or False) for deliberately wrong ones -- and a failure names the same output / input pair with
the same first message line. Each case runs both libraries; nothing is skipped."""
import sys
import warnings

import numpy as np
import pytest
import torch

import kiln
from kiln.autograd import GradcheckError, gradcheck, gradgradcheck

TorchGradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError


def _inputs(L, arrays, requires=None):
    """The arrays as L tensors (fresh copies); requires[i] False leaves one without grad.
    Non-arrays pass through unchanged."""
    out = []
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            out.append(a)
            continue
        t = (kiln.from_numpy if L is kiln else torch.from_numpy)(a.copy())
        if requires is None or requires[i]:
            t.requires_grad_()
        out.append(t)
    return tuple(out)


def _rng(seed):
    return np.random.default_rng(seed)


def _real(shape, seed=0):
    return _rng(seed).standard_normal(shape)


def _cplx(shape, seed=0):
    r = _rng(seed)
    return r.standard_normal(shape) + 1j * r.standard_normal(shape)


def _first_line(msg):
    return str(msg).splitlines()[0]


def _verdict(check, L, fn, arrays, requires=None, **kw):
    """(True, None) or (False, first message line) of check (gradcheck or gradgradcheck) in
    library L; the GradcheckError must be L's own."""
    ins = _inputs(L, arrays, requires)
    error = GradcheckError if L is kiln else TorchGradcheckError
    chk = check if L is kiln else getattr(torch.autograd, check.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            assert chk(lambda *a: fn(L, *a), ins, **kw) is True
            return True, None
        except error as e:
            return False, _first_line(e)


def _same_verdict(check, fn, arrays, requires=None, **kw):
    got = _verdict(check, kiln, fn, arrays, requires, **kw)
    want = _verdict(check, torch, fn, arrays, requires, **kw)
    assert got == want, (got, want)
    return got


# --- correct functions pass (as torch's) -----------------------------------------------------

CORRECT = {
    "matmul_sin": (lambda L, a, b: (a @ b).sin(), lambda: (_real((3, 4)), _real((4, 2), 1))),
    "two_outputs": (lambda L, a, b: (a * b, a.exp().sum(0)),
                    lambda: (_real((2, 3)), _real((2, 3), 1))),
    "non_tensor_arg": (lambda L, a, k: a.pow(k) + a.tanh(), lambda: (_real(5), 3)),
    "softmax_cumsum": (lambda L, a: (a.softmax(-1) * a.cumsum(0)).sum(-1),
                       lambda: (_real((3, 4)),)),
    "broadcast_div": (lambda L, a, b: a / (b.abs() + 1), lambda: (_real((2, 3)), _real(3, 1))),
    "reduction_max": (lambda L, a: a.amax(1) + a.logsumexp(0).sum(), lambda: (_real((3, 4)),)),
    "scalar_out": (lambda L, a, b: (a * b).sum(), lambda: (_real(4), _real(4, 1))),
    "complex_in_out": (lambda L, z: z * z.exp(), lambda: (_cplx(3),)),
    "complex_to_real": (lambda L, z: (z * z).abs() + z.real, lambda: (_cplx((2, 2)),)),
    "complex_two_inputs": (lambda L, z, w: (z.conj() * w, (z * w).imag),
                           lambda: (_cplx(3), _cplx(3, 1))),
    "real_to_complex": (lambda L, a, z: a * z + a.sin(), lambda: (_real(3), _cplx(3, 1))),
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_gradcheck_passes_on_correct_functions(name):
    fn, make = CORRECT[name]
    assert _same_verdict(gradcheck, fn, make()) == (True, None)


def test_gradcheck_input_without_grad_is_not_checked():
    fn = lambda L, a, b: a * b.exp()  # noqa: E731
    assert _same_verdict(gradcheck, fn, (_real(4), _real(4, 1)), requires=[True, False]) == \
        (True, None)


@pytest.mark.parametrize("name", ["matmul_sin", "two_outputs", "softmax_cumsum",
                                  "complex_to_real", "scalar_out"])
def test_gradcheck_forward_ad_passes(name):
    fn, make = CORRECT[name]
    assert _same_verdict(gradcheck, fn, make(), check_forward_ad=True) == (True, None)
    assert _same_verdict(gradcheck, fn, make(), check_forward_ad=True,
                         check_backward_ad=False, check_undefined_grad=False) == (True, None)


@pytest.mark.parametrize("name", ["matmul_sin", "two_outputs", "broadcast_div"])
def test_gradcheck_fast_mode_passes(name):
    fn, make = CORRECT[name]
    assert _same_verdict(gradcheck, fn, make(), fast_mode=True) == (True, None)


# --- wrong gradients are caught ----------------------------------------------------------------

def _scaled_sin(L, factor):
    """sin whose backward is off by `factor`."""
    class ScaledSin(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x.cos() * factor
    return ScaledSin


def _wrong_second(L):
    """(x * y, x + y) with the gradient of the second output to y off by a factor 2."""
    class Pair(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y

        @staticmethod
        def backward(ctx, ga, gb):
            x, y = ctx.saved_tensors
            return ga * y + gb, ga * x + 2 * gb
    return Pair


def test_gradcheck_detects_wrong_backward():
    fn = lambda L, a: _scaled_sin(L, 1.01).apply(a)  # noqa: E731
    got = _same_verdict(gradcheck, fn, (_real((2, 3)),))
    assert got == (False, "Jacobian mismatch for output 0 with respect to input 0,")
    x, = _inputs(kiln, (_real((2, 3)),))
    assert gradcheck(lambda a: fn(kiln, a), (x,), raise_exception=False) is False
    with pytest.raises(RuntimeError) as info:  # GradcheckError is a RuntimeError
        gradcheck(lambda a: fn(kiln, a), x)
    assert isinstance(info.value, GradcheckError)
    msg = str(info.value)
    # both Jacobians are shown: numerical cos(x) on the diagonal, analytical 1.01 cos(x)
    assert "numerical:tensor(" in msg and "analytical:tensor(" in msg
    c = np.cos(_real((2, 3))).reshape(-1)
    assert f"{1.01 * c[0]:.4f}" in msg.split("analytical:")[1]
    assert f"{c[0]:.4f}" in msg.split("analytical:")[0]
    # a correct factor passes
    assert _same_verdict(gradcheck, lambda L, a: _scaled_sin(L, 1.0).apply(a),
                         (_real((2, 3)),)) == (True, None)


def test_gradcheck_names_output_and_input_of_mismatch():
    fn = lambda L, a, b: _wrong_second(L).apply(a, b)  # noqa: E731
    got = _same_verdict(gradcheck, fn, (_real(3), _real(3, 1)))
    assert got == (False, "Jacobian mismatch for output 1 with respect to input 1,")


def test_gradcheck_detects_wrong_complex_gradient():
    # z * z.detach(): the detached factor's contribution is missing from the gradient
    fn = lambda L, z: z * z.detach()  # noqa: E731
    got = _same_verdict(gradcheck, fn, (_cplx(3),))
    assert got == (False, "While considering the imaginary part of complex outputs only, "
                          "Jacobian mismatch for output 0 with respect to input 0,")
    # a real output of a complex input: no prefix
    fn = lambda L, z: (z * z.detach()).real  # noqa: E731
    assert _same_verdict(gradcheck, fn, (_cplx(3),)) == \
        (False, "Jacobian mismatch for output 0 with respect to input 0,")


def test_gradcheck_forward_mode_mismatch_message():
    fn = lambda L, a: _scaled_sin(L, 1.5).apply(a)  # noqa: E731
    k = _verdict(gradcheck, kiln, fn, (_real(3),), check_forward_ad=True,
                 check_backward_ad=False, check_undefined_grad=False)
    # torch's Function has no jvp here (it raises); kiln derives the tangent from the backward,
    # so the wrong backward shows up as a wrong forward-mode Jacobian
    assert k == (False, "Jacobian computed with forward mode mismatch for output 0 with "
                        "respect to input 0,")


def test_gradcheck_fast_mode_detects_wrong_backward():
    fn = lambda L, a: _scaled_sin(L, 1.2).apply(a)  # noqa: E731
    k_ok, _ = _verdict(gradcheck, kiln, fn, (_real(5),), fast_mode=True)
    t_ok, _ = _verdict(gradcheck, torch, fn, (_real(5),), fast_mode=True)
    assert k_ok is False and t_ok is False


def test_gradcheck_backward_not_multiplied_by_grad_output():
    def fn(L, a):
        class SumOnes(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.sum()

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return L.ones_like(x)  # ignores g: right only for g = 1
        return SumOnes.apply(a)
    assert _same_verdict(gradcheck, fn, (_real(4),)) == \
        (False, "backward not multiplied by grad_output")


def test_gradcheck_not_reentrant_backward():
    def make(L):
        calls = [0]

        class Drift(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                calls[0] += 1
                return g * (2 + 1e-9 * calls[0])  # within atol, but never the same twice
        return Drift
    for L in (kiln, torch):  # (torch's message lacks a space after "gradient.")
        ok, line = _verdict(gradcheck, L, lambda L, a: make(L).apply(a), (_real(3),))
        assert ok is False and line.startswith("Backward is not reentrant, i.e., running "
                                               "backward with same input and grad_output "
                                               "multiple times gives different values"), line
    assert _same_verdict(gradcheck, lambda L, a: make(L).apply(a), (_real(3),),
                         nondet_tol=1e-6) == (True, None)


def _pair(L, fail_on):
    """(2x, 3x) whose backward (no materialized zeros) raises when fail_on(ga, gb)."""
    calls = []

    class Pair(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            calls.append((ga is None, gb is None))
            if fail_on(ga, gb):
                raise RuntimeError("an output gradient is undefined")
            return (0 if ga is None else ga * 2) + (0 if gb is None else gb * 3)
    return Pair, calls


def test_gradcheck_backward_failing_on_one_undefined_grad_propagates():
    # The Jacobian of one output is computed with the other's gradient undefined: a backward
    # that cannot take that fails there, with its own error (torch's behaviour too).
    for L in (kiln, torch):
        Pair, _ = _pair(L, lambda ga, gb: ga is None or gb is None)
        x, = _inputs(L, (_real(3),))
        check = gradcheck if L is kiln else torch.autograd.gradcheck
        with pytest.raises(RuntimeError, match="an output gradient is undefined"):
            check(Pair.apply, (x,))


def test_gradcheck_undefined_grad_check():
    fail_all = lambda ga, gb: ga is None and gb is None  # noqa: E731
    # torch calls the backward with every output gradient undefined and reports it ...
    Pair, _ = _pair(torch, fail_all)
    x, = _inputs(torch, (_real(3),))
    with pytest.raises(TorchGradcheckError, match="Expected backward function to handle "
                                                  "undefined output grads"), \
            pytest.warns(UserWarning, match="Backwards compatibility"):
        torch.autograd.gradcheck(Pair.apply, (x,))
    assert torch.autograd.gradcheck(Pair.apply, (x,), check_undefined_grad=False)
    # ... kiln's engine never calls a backward whose output gradients are all undefined (the
    # node is skipped), so that failure cannot happen: the check passes, and the backward saw
    # one undefined gradient at a time only (documented difference)
    Pair, calls = _pair(kiln, fail_all)
    x, = _inputs(kiln, (_real(3),))
    assert gradcheck(Pair.apply, (x,)) is True
    assert (True, False) in calls and (False, True) in calls and (True, True) not in calls

    # a backward that turns an undefined gradient into a non-zero one is caught by the check
    # (with zero grad_outputs) -- the Jacobian check alone cannot see it when it only happens
    # for zero gradients
    def make(L):
        class Leaky(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                if gb is None and not bool((ga != 0).any()):
                    return L.ones_like(ga)
                return (0 if ga is None else ga * 2) + (0 if gb is None else gb * 3)
        return Leaky
    x, = _inputs(kiln, (_real(3),))
    with pytest.raises(GradcheckError, match="Expected all input grads to be undefined or "
                                             "zero"), \
            pytest.warns(UserWarning, match="Backwards compatibility"):
        gradcheck(make(kiln).apply, (x,))
    assert gradcheck(make(kiln).apply, (x,), check_undefined_grad=False) is True


def test_gradcheck_no_differentiable_outputs():
    # an integer output: locally constant, so it passes
    assert _same_verdict(gradcheck, lambda L, a: a.argmax(), (_real(5),)) == (True, None)
    # a detached output that does depend on the input
    assert _same_verdict(gradcheck, lambda L, a: a.detach() * 2, (_real(3),)) == \
        (False, "Numerical gradient for function expected to be zero")


# --- argument checks ----------------------------------------------------------------------

def test_gradcheck_warns_on_single_precision():
    x = kiln.from_numpy(_real(3).astype(np.float32)).requires_grad_()
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double"):
        assert gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2)


def test_gradcheck_input_errors():
    x = kiln.from_numpy(_real(3))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda a: a * 2, (x,))
    y = kiln.zeros(3, dtype=kiln.float64).expand(2, 3).requires_grad_()
    with pytest.raises(RuntimeError, match="has a dimension with stride 0"):
        gradcheck(lambda a: a * 2, (y,))
    with pytest.raises(NotImplementedError, match="check_batched_grad"):
        gradcheck(lambda a: a * 2, (x.requires_grad_(),), check_batched_grad=True)
    with pytest.raises(AssertionError, match="at least one of check_forward_ad"):
        gradcheck(lambda a: a * 2, (x,), check_backward_ad=False)


def test_gradcheck_raise_exception_false_returns_false_only_for_gradcheck_errors():
    x, = _inputs(kiln, (_real(3),))
    assert gradcheck(lambda a: _scaled_sin(kiln, 2.0).apply(a), (x,),
                     raise_exception=False) is False

    def broken(a):
        raise KeyError("not a gradcheck failure")
    with pytest.raises(KeyError):
        gradcheck(broken, (x,), raise_exception=False)


# --- gradgradcheck -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["matmul_sin", "two_outputs", "softmax_cumsum",
                                  "complex_in_out", "complex_two_inputs", "non_tensor_arg"])
def test_gradgradcheck_passes_on_correct_functions(name):
    fn, make = CORRECT[name]
    assert _verdict(gradgradcheck, kiln, fn, make()) == (True, None)
    assert _verdict(gradgradcheck, torch, fn, make()) == (True, None)


def test_gradgradcheck_given_and_non_contiguous_grad_outputs():
    fn = lambda L, a, b: (a @ b).tanh()  # noqa: E731
    arrays = (_real((3, 4)), _real((4, 2), 1), _real((3, 2), 2))
    for L in (kiln, torch):
        a, b, go = _inputs(L, arrays)
        check = gradgradcheck if L is kiln else torch.autograd.gradgradcheck
        assert check(lambda x, y: fn(L, x, y), (a, b), (go,)) is True
        assert check(lambda x, y: fn(L, x, y), (a, b), gen_non_contig_grad_outputs=True)
    # the generated non-contiguous grad_output really is non-contiguous
    from kiln._autograd_gradcheck import _random_grad_output
    g = _random_grad_output(kiln.zeros(3, 2, dtype=kiln.float64), kiln.Generator(), True)
    assert tuple(g.shape) == (3, 2) and not g.is_contiguous() and g.requires_grad


def _sin_with_wrong_double_backward(L):
    """sin with a correct first derivative whose own derivative is wrong: cos's backward
    returns +sin instead of -sin."""
    class WrongCos(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.cos()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x.sin()

    class Sin(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * WrongCos.apply(x)
    return Sin


def test_gradgradcheck_detects_wrong_double_backward():
    fn = lambda L, a: _sin_with_wrong_double_backward(L).apply(a)  # noqa: E731
    arrays = (_real((2, 3)),)
    # first order is right ...
    assert _same_verdict(gradcheck, fn, arrays) == (True, None)
    # ... second order is not: the mismatch is in d(grad)/d(input)
    for L in (kiln, torch):
        ok, line = _verdict(gradgradcheck, L, fn, arrays)
        assert ok is False
        assert line == "Jacobian mismatch for output 0 with respect to input 0,", (L, line)
    x, = _inputs(kiln, arrays)
    assert gradgradcheck(lambda a: fn(kiln, a), (x,), raise_exception=False) is False


def test_gradgradcheck_once_differentiable_fails():
    class Sin(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        @kiln.autograd.once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x.cos()
    x, = _inputs(kiln, (_real(3),))
    assert gradcheck(Sin.apply, (x,)) is True
    with pytest.raises(GradcheckError):
        gradgradcheck(Sin.apply, (x,))
