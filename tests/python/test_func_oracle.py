"""kiln.func against torch.func on identical inputs: grad / grad_and_value (argnums, has_aux,
dicts of tensors), vjp, jacrev (nested outputs, tuple argnums), hessian, functional_call with
grad over a module's parameters, the loop form of vmap (in_dims / out_dims), nesting, and the
errors for bad input (same exception class and message as torch's)."""
import numpy as np
import pytest
import torch

import kiln
import oracle

DTYPES = ["float32", "float64"]
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit noise


def arrays(dtype, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.2, 1.2, s).astype(dtype) for s in shapes]


def both(dtype, *shapes, seed=0):
    a = arrays(dtype, *shapes, seed=seed)
    return [kiln.tensor(x) for x in a], [torch.tensor(x) for x in a]


def same(k, t, where):
    if isinstance(t, dict):
        assert isinstance(k, dict) and list(k) == list(t), f"{where}: keys {k} vs {t}"
        for name in t:
            same(k[name], t[name], f"{where}[{name}]")
    elif isinstance(t, (tuple, list)) and any(isinstance(e, (dict, tuple, list)) for e in t):
        assert type(k) is type(t) and len(k) == len(t), f"{where}: {type(k)} vs {type(t)}"
        for i, (a, b) in enumerate(zip(k, t)):
            same(a, b, f"{where}[{i}]")
    else:
        if isinstance(t, tuple):
            assert isinstance(k, tuple), f"{where}: kiln {type(k).__name__}, torch a tuple"
        oracle.assert_same(k, t, 4.0, where=where)


def loss(x, y):
    return (x.sin() * y).sum() + (x * x).sum() * y.mean()


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_argnums_and_value(dtype):
    (kx, ky), (tx, ty) = both(dtype, (4,), (4,))
    for argnums in (0, 1, -1, (0, 1), (1,)):
        same(kiln.func.grad(loss, argnums)(kx, ky), torch.func.grad(loss, argnums)(tx, ty),
             f"grad argnums={argnums}")
    same(kiln.func.grad_and_value(loss, (0, 1))(kx, ky),
         torch.func.grad_and_value(loss, (0, 1))(tx, ty), "grad_and_value")
    kg = kiln.func.grad(loss)(kx, ky)
    assert not kg.requires_grad  # outermost transform on plain tensors: a plain result


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_has_aux_and_dicts(dtype):
    (kx, ky), (tx, ty) = both(dtype, (3,), (3,))

    def f(params, scale):
        value = (params["a"].exp() * params["b"]).sum() * scale
        return value, {"value": value, "double": params["a"] * 2}

    kr = kiln.func.grad(f, has_aux=True)({"a": kx, "b": ky}, 2.0)
    tr = torch.func.grad(f, has_aux=True)({"a": tx, "b": ty}, 2.0)
    same(kr[0], tr[0], "grad of a dict")
    same(kr[1], tr[1], "aux")
    kv = kiln.func.grad_and_value(f, has_aux=True)({"a": kx, "b": ky}, 2.0)
    tv = torch.func.grad_and_value(f, has_aux=True)({"a": tx, "b": ty}, 2.0)
    same(kv[1][0], tv[1][0], "value with aux")
    # kwargs are passed through and not differentiated
    g = lambda x, *, w: (x * w).sum()  # noqa: E731
    same(kiln.func.grad(g)(kx, w=ky), torch.func.grad(g)(tx, w=ty), "kwargs")
    # an argument the output does not use: zeros
    same(kiln.func.grad(lambda x, y: x.sum(), 1)(kx, ky),
         torch.func.grad(lambda x, y: x.sum(), 1)(tx, ty), "unused argnum")


@pytest.mark.parametrize("dtype", DTYPES)
def test_vjp(dtype):
    (kx, ky, kc), (tx, ty, tc) = both(dtype, (3,), (3,), (3,))
    f = lambda x, y: (x * y.exp(), (x + y).sum())  # noqa: E731
    kout, kfn = kiln.func.vjp(f, kx, ky)
    tout, tfn = torch.func.vjp(f, tx, ty)
    same(kout, tout, "vjp output")
    same(kfn((kc, kc.sum())), tfn((tc, tc.sum())), "vjp_fn")
    same(kfn((kc * 2, kc.sum())), tfn((tc * 2, tc.sum())), "vjp_fn called again")
    kout, kfn, kaux = kiln.func.vjp(lambda x: (x.sin(), x.cos()), kx, has_aux=True)
    tout, tfn, taux = torch.func.vjp(lambda x: (x.sin(), x.cos()), tx, has_aux=True)
    same((kout, kaux), (tout, taux), "vjp has_aux")
    same(kfn(kc), tfn(tc), "vjp_fn has_aux")


@pytest.mark.parametrize("dtype", DTYPES)
def test_jacrev_and_hessian(dtype):
    (kx, ky), (tx, ty) = both(dtype, (3,), (2,))
    f = lambda x, y: x.sin() * y.sum()  # noqa: E731
    same(kiln.func.jacrev(f)(kx, ky), torch.func.jacrev(f)(tx, ty), "jacrev")
    same(kiln.func.jacrev(f, (0, 1))(kx, ky), torch.func.jacrev(f, (0, 1))(tx, ty),
         "jacrev tuple argnums")
    g = lambda x: {"a": x.exp(), "b": (x[:2].sin(), x.sum())}  # noqa: E731
    same(kiln.func.jacrev(g)(kx), torch.func.jacrev(g)(tx), "jacrev nested output")
    h = lambda x: (x.sin(), x.sum())  # noqa: E731
    same(kiln.func.jacrev(h, has_aux=True)(kx), torch.func.jacrev(h, has_aux=True)(tx),
         "jacrev has_aux")
    s = lambda x, y: (x.pow(3) * y.sum()).sum() + (x.sin() * x).sum()  # noqa: E731
    same(kiln.func.hessian(s)(kx, ky), torch.func.hessian(s)(tx, ty), "hessian")
    same(kiln.func.hessian(s, (0, 1))(kx, ky), torch.func.hessian(s, (0, 1))(tx, ty),
         "hessian tuple argnums")
    (km,), (tm,) = both(dtype, (2, 3), seed=4)
    same(kiln.func.jacrev(lambda a: a @ a.t())(km), torch.func.jacrev(lambda a: a @ a.t())(tm),
         "jacrev of a matrix function")


@pytest.mark.parametrize("dtype", DTYPES)
def test_nested_and_outer_autograd(dtype):
    (kx,), (tx,) = both(dtype, (3,))
    f = lambda x: (x.sin() * x.pow(2)).sum()  # noqa: E731
    same(kiln.func.jacrev(kiln.func.grad(f))(kx),
         torch.func.jacrev(torch.func.grad(f))(tx), "jacrev(grad)")
    # third derivative through three grads of a scalar function
    g = lambda x: x.sin() * x.pow(3)  # noqa: E731
    kg3 = kiln.func.grad(kiln.func.grad(kiln.func.grad(g)))(kx[0])
    tg3 = torch.func.grad(torch.func.grad(torch.func.grad(g)))(tx[0])
    same(kg3, tg3, "grad(grad(grad))")
    # an argument requiring grad: the result is differentiable with respect to it
    results = []
    for L, x in ((kiln, kx.clone().requires_grad_(True)), (torch, tx.clone().requires_grad_())):
        gx = L.func.grad(f)(x)
        assert gx.requires_grad
        results.append(L.autograd.grad(gx.sum(), x)[0])
    same(results[0], results[1], "autograd through func.grad")


@pytest.mark.parametrize("dtype", DTYPES)
def test_functional_call_with_grad(dtype):
    torch.manual_seed(0)
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    tmodel = tmodel.to(getattr(torch, dtype))
    kmodel = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.Tanh(), kiln.nn.Linear(4, 2))
    kmodel = kmodel.to(getattr(kiln, dtype))
    kmodel.load_state_dict({n: kiln.tensor(v.numpy()) for n, v in tmodel.state_dict().items()})
    (kin,), (tin,) = both(dtype, (5, 3), seed=7)

    def make_loss(L, model):
        def compute(params, x):
            return L.func.functional_call(model, params, (x,)).pow(2).mean()
        return compute

    kp = {n: p.detach() for n, p in kmodel.named_parameters()}
    tp = {n: p.detach() for n, p in tmodel.named_parameters()}
    same(kiln.func.grad(make_loss(kiln, kmodel))(kp, kin),
         torch.func.grad(make_loss(torch, tmodel))(tp, tin), "grad through functional_call")
    # list of dicts, strict, and the module's own parameters untouched
    half = len(kp) // 2
    kd = [dict(list(kp.items())[:half]), dict(list(kp.items())[half:])]
    td = [dict(list(tp.items())[:half]), dict(list(tp.items())[half:])]
    same(kiln.func.functional_call(kmodel, kd, kin, strict=True),
         torch.func.functional_call(tmodel, td, tin, strict=True), "list of dicts")
    assert all(p.grad is None for p in kmodel.parameters())
    with pytest.raises(ValueError):
        torch.func.functional_call(tmodel, [tp, tp], tin)
    with pytest.raises(ValueError):
        kiln.func.functional_call(kmodel, [kp, kp], kin)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vmap_loop(dtype):
    (ka, kb, kw), (ta, tb, tw) = both(dtype, (4, 3), (3, 4), (3, 2))
    same(kiln.func.vmap(lambda x: x.sin() * x.sum())(ka),
         torch.func.vmap(lambda x: x.sin() * x.sum())(ta), "vmap default dims")
    same(kiln.func.vmap(lambda x, w: x @ w, in_dims=(0, None))(ka, kw),
         torch.func.vmap(lambda x, w: x @ w, in_dims=(0, None))(ta, tw), "vmap in_dims None")
    same(kiln.func.vmap(lambda x, y: x * y, in_dims=(0, 1), out_dims=1)(ka, kb),
         torch.func.vmap(lambda x, y: x * y, in_dims=(0, 1), out_dims=1)(ta, tb), "out_dims")
    same(kiln.func.vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(ka),
         torch.func.vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(ta), "tuple out_dims")
    # per-example gradients: vmap of grad
    g = lambda w, x: ((x @ w).tanh()).sum()  # noqa: E731
    same(kiln.func.vmap(kiln.func.grad(g), in_dims=(None, 0))(kw, ka),
         torch.func.vmap(torch.func.grad(g), in_dims=(None, 0))(tw, ta), "vmap(grad)")


def error_cases(L):
    x, y = L.ones(3), L.ones(2)
    scalar = lambda a, b=None: (a * a).sum()  # noqa: E731
    return {
        "grad of a non-scalar": lambda: L.func.grad(lambda a: a * 2)(x),
        "grad of a non-tensor": lambda: L.func.grad(lambda a: 1.0)(x),
        "argnums out of range": lambda: L.func.grad(scalar, 2)(x, x),
        "argnums not int": lambda: L.func.grad(scalar, "0")(x),
        "argnums repeated": lambda: L.func.grad(scalar, (0, 0))(x, x),
        "argnums empty": lambda: L.func.grad(scalar, ())(x, x),
        "has_aux without a pair": lambda: L.func.grad(scalar, has_aux=True)(x),
        "differentiate a float": lambda: L.func.grad(scalar)(2.0),
        "vjp int output": lambda: L.func.vjp(lambda a: (a > 0).long(), x),
        "vjp cotangent structure": lambda: L.func.vjp(lambda a: (a, a), x)[1](x),
        "jacrev chunk_size": lambda: L.func.jacrev(scalar, chunk_size=0),
        "vmap size mismatch": lambda: L.func.vmap(lambda a, b: a)(x, y),
        "vmap in_dims out of range": lambda: L.func.vmap(lambda a: a, in_dims=1)(x),
        "vmap non-tensor mapped": lambda: L.func.vmap(lambda a, b: a, in_dims=(0, 0))(x, 2.0),
        "vmap no inputs": lambda: L.func.vmap(lambda: x)(),
        "vmap bad in_dims": lambda: L.func.vmap(lambda a: a, in_dims="0")(x),
        "vmap non-tensor output": lambda: L.func.vmap(lambda a: 1.0)(x),
    }


# messages that name kiln's own types or structures differently: class and content checked
LOOSE_MESSAGES = {"vjp cotangent structure", "vmap bad in_dims", "vmap non-tensor output",
                  "vjp int output"}


@pytest.mark.parametrize("name", list(error_cases(torch)))
def test_errors_match_torch(name):
    with pytest.raises(Exception) as te:
        error_cases(torch)[name]()
    with pytest.raises(type(te.value)) as ke:
        error_cases(kiln)[name]()
    message, expected = str(ke.value), str(te.value)
    assert message, name
    if name not in LOOSE_MESSAGES:
        normalised = message.replace("kiln.", "torch.")
        assert normalised.split(": ")[-1] == expected.split(": ")[-1], \
            f"{name}: kiln {message!r} vs torch {expected!r}"
