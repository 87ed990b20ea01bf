"""kiln.autograd.gradcheck and gradgradcheck: torch.autograd's finite-difference checks of the
gradients that autograd computes.

gradcheck compares, for every output that requires grad and every input that requires grad, the
Jacobian from central differences with the one autograd gives (one kiln.autograd.grad call per
output element: the vector-Jacobian products with one-hot grad_outputs). Both are laid out as
torch's: (input.numel(), output.numel()) for each (input, output) pair, and compared with
allclose(analytical, numerical, rtol, atol).

Complex numbers follow torch's convention (the conjugate Wirtinger derivative):
- a complex output is checked as two real functions, its imaginary part first, then its real part;
- for a real function s of a complex input z = x + iy, the numerical entry is ds/dx + i ds/dy,
  which is what kiln's backward returns for a real grad_output of 1.
check_forward_ad=True builds the Jacobian column by column with kiln.autograd.forward_ad (one
dual level per input element) and compares it with the same numerical Jacobian; complex inputs
are split into their real and imaginary parts there, as torch does. kiln's forward_ad carries no
tangent for a complex tensor, so a complex output with check_forward_ad=True raises
NotImplementedError (complex inputs with real outputs work).

What differs from torch:
- check_undefined_grad: kiln cannot make an undefined gradient tensor. The check passes every
  output through a Function whose backward returns None (all outputs at once, then each output
  alone when there are several), with zero grad_outputs, and requires every input gradient to be
  None or zero. kiln's engine skips a node whose output gradients are all undefined (torch calls
  it with undefined ones), so a backward that cannot take all-undefined gradients is never at
  fault in kiln and passes where torch's check fails; one undefined gradient among defined ones
  reaches the backward as None (set_materialize_grads(False)) or zeros, as torch. The
  forward-mode undefined-grad check is not run.
- fast_mode=True checks v^T J u for random unit u and v (fixed generator) as torch's fast mode,
  for real inputs and outputs only; with a complex input or output it runs the full (slow) check.
- check_batched_grad and check_batched_forward_grad need batched (vmap'ed) gradients, which
  kiln.autograd.grad does not compute: they raise NotImplementedError. masked (sparse inputs)
  likewise: kiln has no sparse tensors.
- non-tensor inputs are allowed but only top-level tensors are perturbed (as torch's numerical
  path); tensors nested in lists are passed through unchanged.
"""
import warnings

import numpy as np

from . import _C
from . import _autograd_forward_ad as fwAD
from .autograd import Function, grad as _grad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck when a check fails (torch.autograd.GradcheckError)."""


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_tensor(x):
    return isinstance(x, _C.Tensor)


def _tensors(out):
    return [o for o in _as_tuple(out) if _is_tensor(o)]


def _diff_outputs(out):
    return [o for o in _tensors(out) if o.requires_grad]


def _diff_inputs(inputs):
    return [x for x in inputs if _is_tensor(x) and x.requires_grad]


def _to_np(t):
    """A copy of t's values as a numpy array (half / bfloat16 widened: numpy lacks bfloat16)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    try:
        return np.array(t.numpy(), copy=True)
    except (TypeError, RuntimeError):
        wide = _C.complex128 if t.is_complex() else _C.float64
        return np.array(t.to(wide).numpy(), copy=True)


def _np_dtype(t):
    return _to_np(_C.zeros((), dtype=t.dtype)).dtype


def _from_np(arr, like):
    t = _C.from_numpy(np.ascontiguousarray(arr))
    if t.dtype != like.dtype:
        t = t.to(like.dtype)
    return t if like.device.type == "cpu" else t.to(like.device)


def _check_inputs(inputs):
    any_requires_grad = False
    for idx, x in enumerate(inputs):
        if not (_is_tensor(x) and x.requires_grad):
            continue
        if x.dtype not in (_C.float64, _C.complex128):
            warnings.warn(f"Input #{idx} requires gradient and is not a double precision "
                          "floating point or complex. This check will likely fail if all the "
                          "inputs are not of double precision floating point or complex. ",
                          stacklevel=3)
        # A stride-0 dimension: perturbing one element would perturb several.
        if not all(st > 0 or sz <= 1 for st, sz in zip(x.stride(), x.shape)):
            raise RuntimeError(f"The {idx}th input has a dimension with stride 0. gradcheck only "
                               "supports inputs that are non-overlapping to be able to compute "
                               "the numerical gradients correctly. You should call .contiguous "
                               "on the input before passing it to gradcheck.")
        any_requires_grad = True
    if not any_requires_grad:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")


# --- numerical Jacobians ---------------------------------------------------------------------

def _central_difference(fn, inputs, idx, base, k, delta, eps):
    """(f(x + delta e_k) - f(x - delta e_k)) / (2 eps) for every tensor output, flattened; the
    perturbed input is a fresh tensor that does not require grad (torch perturbs x.data)."""
    outs = []
    for sign in (-1, 1):
        arr = base.copy()
        arr.flat[k] = arr.flat[k] + sign * delta
        args = list(inputs)
        args[idx] = _from_np(arr, inputs[idx])
        outs.append([o.detach().clone() for o in _tensors(fn(*args))])
    return [_to_np((b - a) / (2 * eps)).reshape(-1) for a, b in zip(*outs)]


def _numerical_jacobians(fn, inputs, eps):
    """For each input that requires grad: a list over fn's tensor outputs of numpy Jacobians
    (input.numel(), output.numel())."""
    result = []
    for idx, x in enumerate(inputs):
        if not (_is_tensor(x) and x.requires_grad):
            continue
        base = _to_np(x)
        cols = []
        for k in range(base.size):
            d_re = _central_difference(fn, inputs, idx, base, k, eps, eps)
            if x.is_complex():  # C -> R: the conjugate Wirtinger derivative, times 2
                d_im = _central_difference(fn, inputs, idx, base, k, eps * 1j, eps)
                d_re = [a + 1j * b for a, b in zip(d_re, d_im)]
            cols.append(d_re)
        n_out = len(cols[0]) if cols else len(_tensors(fn(*inputs)))
        per_output = []
        for m in range(n_out):
            if cols:
                jac = np.stack([c[m] for c in cols])
            else:
                jac = np.zeros((0, _tensors(fn(*inputs))[m].numel()))
            if x.is_complex():
                jac = jac.astype(np.result_type(jac.dtype, np.complex64))
            per_output.append(jac)
        result.append(per_output)
    return result


# --- analytical Jacobians ---------------------------------------------------------------------

def _vjp_rows(output, diff_inputs):
    jacs = [np.zeros((x.numel(), output.numel()), dtype=_np_dtype(x)) for x in diff_inputs]
    types_ok = sizes_ok = True
    for k in range(output.numel()):
        go = _C.zeros(tuple(output.shape), dtype=output.dtype, device=output.device)
        go.view(-1)[k] = 1
        grads = _grad(output, diff_inputs, go, retain_graph=True, allow_unused=True)
        for i, (g, x) in enumerate(zip(grads, diff_inputs)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(x.shape):
                sizes_ok = False
                continue
            if g.dtype != x.dtype:
                types_ok = False
            jacs[i][:, k] = _to_np(g).reshape(-1)
    return jacs, types_ok, sizes_ok


def _analytical_jacobians(output, diff_inputs, nondet_tol, check_grad_dtypes):
    # Twice, to catch a backward that gives different values for the same grad_output.
    jacs, types_ok, sizes_ok = _vjp_rows(output, diff_inputs)
    again, _, _ = _vjp_rows(output, diff_inputs)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    for a, b in zip(jacs, again):
        if a.size and np.abs(a - b).max() > nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and "
                "grad_output multiple times gives different values, although analytical gradient "
                f"matches numerical gradient. The tolerance for nondeterminism was {nondet_tol}.")
    return jacs


def _forward_jacobians(fn, inputs, n_outputs, check_grad_dtypes):
    """Jacobians from forward-mode AD: one dual level per element of each input that requires
    grad (a one-hot tangent for it, zero tangents for the others); row k of [input][output] is
    the output's tangent. The inputs are real here (complex ones are split by the caller)."""
    diff_idx = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    if any(inputs[i].is_complex() for i in diff_idx):
        raise ValueError("Expected inputs to be non-complex for _forward_jacobians.")
    result = []
    for i in diff_idx:
        x = inputs[i]
        per_output = [None] * n_outputs
        for k in range(x.numel()):
            with fwAD.dual_level():
                args = list(inputs)
                for j in diff_idx:
                    tangent = _C.zeros(tuple(inputs[j].shape), dtype=inputs[j].dtype,
                                       device=inputs[j].device)
                    if j == i:
                        tangent.view(-1)[k] = 1
                    args[j] = fwAD.make_dual(inputs[j].detach(), tangent)
                outs = [o for o in _tensors(fn(*args))
                        if o.is_floating_point() or o.is_complex()]
                for m, o in enumerate(outs[:n_outputs]):
                    primal, tangent = fwAD.unpack_dual(o)
                    if per_output[m] is None:
                        per_output[m] = np.zeros((x.numel(), o.numel()), dtype=_np_dtype(o))
                    if tangent is None:
                        continue
                    if check_grad_dtypes and primal.dtype != tangent.dtype:
                        raise GradcheckError("Forward AD gradient has dtype mismatch.")
                    per_output[m][k, :] = _to_np(tangent).reshape(-1)
        result.append([p if p is not None else np.zeros((0, 0)) for p in per_output])
    return result


# --- comparison -------------------------------------------------------------------------------

def _show(arr):
    return str(_C.from_numpy(np.ascontiguousarray(arr)))


def _allclose(a, n, rtol, atol):
    if a.shape != n.shape:
        return False
    return bool(np.allclose(a, n, rtol=rtol, atol=atol))


def _mismatch_message(a, n, out_idx, in_idx, complex_indices, test_imag, forward):
    complex_part = complex_indices and ((out_idx in complex_indices) if not forward
                                        else (in_idx in complex_indices))
    prefix = ""
    if complex_part:
        part = "imaginary" if test_imag else "real"
        prefix = (f"While considering the {part} part of complex "
                  f"{'inputs' if forward else 'outputs'} only, ")
    mode = "computed with forward mode " if forward else ""
    return (f"{prefix}Jacobian {mode}mismatch for output {out_idx} with respect to input "
            f"{in_idx},\nnumerical:{_show(n)}\nanalytical:{_show(a)}\n")


def _slow_check(fn, inputs, eps, rtol, atol, check_grad_dtypes, nondet_tol, complex_indices=None,
                test_imag=False, forward=False):
    func_out = _tensors(fn(*inputs))
    outputs = [o for o in func_out if o.requires_grad]
    numerical = _numerical_jacobians(fn, inputs, eps)  # [input][every tensor output]
    if not outputs:
        # No differentiable output: the function must then be locally constant.
        if any(np.count_nonzero(j) for per_in in numerical for j in per_in):
            raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    keep = [m for m, o in enumerate(func_out) if o.requires_grad]
    numerical = [[per_in[m] for m in keep] for per_in in numerical]
    if forward:
        analytical = _forward_jacobians(fn, inputs, len(outputs), check_grad_dtypes)
        for j, (a_in, n_in) in enumerate(zip(analytical, numerical)):
            for i, (a, n) in enumerate(zip(a_in, n_in)):
                if not _allclose(a, n, rtol, atol):
                    raise GradcheckError(_mismatch_message(a, n, i, j, complex_indices,
                                                           test_imag, True))
        return True
    diff_inputs = _diff_inputs(inputs)
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobians(o, diff_inputs, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][i]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_mismatch_message(a, n, i, j, complex_indices, test_imag,
                                                       False))
    return True


def _fast_check(fn, inputs, eps, rtol, atol, check_grad_dtypes, nondet_tol):
    """v^T J u for each (input, output) pair, random unit u (per input) and v (per output):
    numerically by one central difference along u, analytically by one vjp with v dotted with u.
    On a mismatch the slow check runs, for its message (and says when it passes)."""
    func_out = _tensors(fn(*inputs))
    outputs = [o for o in func_out if o.requires_grad]
    diff = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    if not outputs:
        return _slow_check(fn, inputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    rng = np.random.default_rng(0)
    us = []
    for i in diff:
        u = rng.uniform(0.0, 1.0, inputs[i].numel())
        us.append(u / max(np.linalg.norm(u), 1e-300))
    vs = [rng.uniform(0.0, 1.0, o.numel()) for o in outputs]
    keep = [m for m, o in enumerate(func_out) if o.requires_grad]
    failed = False
    for pos, i in enumerate(diff):
        x = inputs[i]
        base = _to_np(x).reshape(-1)
        outs = []
        for sign in (-1, 1):
            args = list(inputs)
            args[i] = _from_np((base + sign * eps * us[pos]).astype(base.dtype).reshape(x.shape),
                               x)
            outs.append([o.detach().clone() for o in _tensors(fn(*args))])
        jvps = [_to_np((b - a) / (2 * eps)).reshape(-1) for a, b in zip(*outs)]
        for j, m in enumerate(keep):
            numerical = float(vs[j] @ jvps[m])
            go = _from_np(vs[j].reshape(tuple(outputs[j].shape)), outputs[j])
            g, = _grad(outputs[j], [x], go, retain_graph=True, allow_unused=True)
            analytical = 0.0 if g is None else float(_to_np(g).reshape(-1) @ us[pos])
            # atol scaled as torch's fast mode (the sums of u and v's entries)
            if not abs(analytical - numerical) <= atol * us[pos].sum() * vs[j].sum() + \
                    rtol * abs(numerical):
                failed = True
    if failed:
        try:
            _slow_check(fn, inputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
        except GradcheckError as e:
            raise GradcheckError(f"Fast gradcheck failed; the full check says:\n{e}") from None
        raise GradcheckError("Fast gradcheck failed but element-wise differences are small. This "
                             "means that the test might've passed in slow_mode!")
    return True


def _real_and_imag_outputs(fn):
    def part(take):
        def wrapped(*args):
            return tuple(take(o) if _is_tensor(o) and o.is_complex() else o
                         for o in _as_tuple(fn(*args)))
        return wrapped
    return part(lambda o: o.real), part(lambda o: o.imag)


def _real_and_imag_inputs(fn, complex_indices, inputs):
    """fn with each complex input given as its real part (imaginary part held at the original
    value), and as its imaginary part (real part held)."""
    def part(join):
        def wrapped(*args):
            args = list(args)
            for i in complex_indices:
                args[i] = join(args[i], inputs[i])
            return _as_tuple(fn(*args))
        return wrapped
    real_fn = part(lambda re, orig: _C.complex(re, orig.detach().imag))
    imag_fn = part(lambda im, orig: _C.complex(orig.detach().real, im))
    return real_fn, imag_fn


def _split_input(x, take):
    if not (_is_tensor(x) and x.is_complex()):
        return x
    part = take(x.detach()).clone()
    return part.requires_grad_() if x.requires_grad else part


# --- undefined-gradient and grad_output checks -------------------------------------------------

class _UndefinedGrad(Function):
    """Identity whose backward gives no gradient: what kiln has closest to torch's undefined
    grad_output (the node before it then receives None or zeros, see the module docstring)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None


def _undefined(o):
    # kiln's custom Functions give complex outputs no graph (python/src/autograd_function.cpp
    # links floating-point outputs only): a complex output goes through as its real view.
    if o.is_complex():
        from . import view_as_real
        o = view_as_real(o)
    return _UndefinedGrad.apply(o)


_UNDEFINED_HELP = (" Backwards compatibility: New undefined gradient support checking feature is "
                   "enabled by default, but it may break existing callers of this function. If "
                   "this is true for you, you can call this function with "
                   "'check_undefined_grad=False' to disable the feature")


def _check_undefined_grad(fn, inputs):
    diff_inputs = _diff_inputs(inputs)
    n = len(_diff_outputs(fn(*inputs)))
    masks = [[True] * n]
    if n > 1:
        masks += [[k == m for k in range(n)] for m in range(n)]
    for mask in masks:
        outs = [_undefined(o) if undefined else o
                for o, undefined in zip(_diff_outputs(fn(*inputs)), mask)]
        zeros = [_C.zeros(tuple(o.shape), dtype=o.dtype, device=o.device) for o in outs]
        try:
            grads = _grad(outs, diff_inputs, zeros, allow_unused=True)
        except RuntimeError as e:
            warnings.warn(_UNDEFINED_HELP.strip(), stacklevel=4)
            raise GradcheckError("Expected backward function to handle undefined output grads. "
                                 "Please look at \"Notes about undefined output gradients\" in "
                                 "\"tools/autograd/derivatives.yaml\"" + _UNDEFINED_HELP) from e
        for g in grads:
            if g is not None and not bool(g.eq(0).all()):
                warnings.warn(_UNDEFINED_HELP.strip(), stacklevel=4)
                raise GradcheckError("Expected all input grads to be undefined or zero when all "
                                     "output grads are undefined or zero." + _UNDEFINED_HELP)


def _check_mul_by_grad_output(outputs, inputs):
    diff_inputs = _diff_inputs(inputs)
    zeros = [_C.zeros(tuple(o.shape), dtype=o.dtype, device=o.device) for o in outputs]
    grads = _grad(outputs, diff_inputs, zeros, allow_unused=True)
    for g, x in zip(grads, diff_inputs):
        if g is None:
            continue
        if not bool(g.eq(0).all()):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.device != x.device:
            raise GradcheckError("grad is incorrect device")
        if tuple(g.shape) != tuple(x.shape):
            raise GradcheckError("grad is incorrect size")


# --- public API ---------------------------------------------------------------------------------

def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False, check_forward_ad=False,
              check_backward_ad=True, fast_mode=False, masked=None):
    """Checks the gradients of func at inputs against finite differences (central, step eps):
    True when they agree within allclose(analytical, numerical, rtol, atol); otherwise raises
    GradcheckError (or returns False with raise_exception=False). inputs: a tensor or a tuple
    (non-tensors allowed); the tensors that require grad are the ones checked, and should be
    float64 / complex128 (a warning otherwise, as torch)."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to "
                             "be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires "
                             "check_forward_ad to be True")
    for name, value in (("check_batched_grad", check_batched_grad),
                        ("check_batched_forward_grad", check_batched_forward_grad)):
        if value:
            raise NotImplementedError(f"gradcheck: {name}=True needs batched gradients (vmap "
                                      "over autograd.grad), which kiln does not compute; "
                                      f"expected {name}=False")
    if masked:
        raise NotImplementedError("gradcheck: masked=True is for sparse inputs, which kiln does "
                                  "not have; expected masked=None or False")
    try:
        return _gradcheck(func, _as_tuple(inputs), eps, atol, rtol, nondet_tol,
                          check_undefined_grad, check_grad_dtypes, check_forward_ad,
                          check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, check_forward_ad, check_backward_ad, fast_mode):
    _check_inputs(inputs)
    func_out = _tensors(func(*inputs))
    outputs = [o for o in func_out if o.requires_grad]
    complex_in = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.is_complex()]
    complex_out = [i for i, o in enumerate(outputs) if o.is_complex()]
    use_fast = fast_mode and not complex_in and not any(o.is_complex() for o in func_out)

    def check(fn, ins, **kw):
        if use_fast and not kw:
            return _fast_check(fn, ins, eps, rtol, atol, check_grad_dtypes, nondet_tol)
        return _slow_check(fn, ins, eps, rtol, atol, check_grad_dtypes, nondet_tol, **kw)

    if check_backward_ad:
        if any(o.is_complex() for o in func_out):
            real_fn, imag_fn = _real_and_imag_outputs(func)
            check(imag_fn, inputs, complex_indices=complex_out, test_imag=True)
            check(real_fn, inputs, complex_indices=complex_out)
        else:
            check(func, inputs)
    if check_forward_ad:
        if any(o.is_complex() for o in outputs):
            raise NotImplementedError(
                "gradcheck: check_forward_ad=True with a complex output: kiln.autograd.forward_ad "
                "gives complex tensors no tangent (kiln/func/_linearize.py: has_derivative); "
                "expected real outputs, or check_forward_ad=False")
        if complex_in:
            real_fn, imag_fn = _real_and_imag_inputs(func, complex_in, inputs)
            imag_inputs = tuple(_split_input(x, lambda z: z.imag) for x in inputs)
            check(imag_fn, imag_inputs, complex_indices=complex_in, test_imag=True,
                  forward=True)
            real_inputs = tuple(_split_input(x, lambda z: z.real) for x in inputs)
            check(real_fn, real_inputs, complex_indices=complex_in, forward=True)
        else:
            check(func, inputs, forward=True)
    if not check_backward_ad:
        return True
    if outputs:
        _check_mul_by_grad_output(outputs, inputs)
        if check_undefined_grad:
            _check_undefined_grad(func, inputs)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the first-order gradients: of (inputs, grad_outputs) -> autograd.grad(
    func(inputs), inputs, grad_outputs, create_graph=True). Without grad_outputs, random ones
    (uniform in [-1, 1), a fixed generator, the outputs' dtypes) that require grad."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev "
                             "to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to "
                             "be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be "
                             "True")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        gen = _C.Generator().manual_seed(0)
        grad_outputs = tuple(_random_grad_output(o, gen, gen_non_contig_grad_outputs)
                             for o in _diff_outputs(func(*inputs)))
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)
    diff_in = {i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad}
    diff_go = {i for i, x in enumerate(grad_outputs) if _is_tensor(x) and x.requires_grad}

    def first_order(*args):
        # gradcheck passes some arguments as fresh tensors that do not require grad (the
        # perturbed ones): the original requires_grad flags are put back.
        ins = tuple(x.requires_grad_() if i in diff_in and not x.requires_grad else x
                    for i, x in enumerate(args[:-n_out] if n_out else args))
        gos = tuple(x.requires_grad_() if i in diff_go and not x.requires_grad else x
                    for i, x in enumerate(args[len(args) - n_out:]))
        outs = _diff_outputs(func(*ins))
        grads = _grad(outs, [x for i, x in enumerate(ins) if i in diff_in], gos,
                      create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


def _random_grad_output(o, gen, non_contiguous):
    dtype = o.dtype if (o.is_floating_point() or o.is_complex()) else _C.float64
    real = _C.float64 if dtype == _C.complex128 else \
        _C.float32 if dtype == _C.complex64 else dtype
    shape = tuple(o.shape)
    if non_contiguous:  # every other element of a last dimension twice as long, as torch
        shape = shape[:-1] + (2 * shape[-1],) if shape else (2,)

    def uniform():
        return _C.rand(shape, generator=gen, dtype=real) * 2 - 1

    g = _C.complex(uniform(), uniform()) if dtype.is_complex else uniform()
    if non_contiguous:
        g = g[..., ::2] if tuple(o.shape) else g[0]
    return g.to(o.device).detach().requires_grad_()
