"""kiln's forward-mode APIs against torch's on identical inputs: kiln.func.jvp / jacfwd /
linearize against torch.func's, kiln.autograd.forward_ad against torch.autograd.forward_ad,
jacobian / hessian with strategy="forward-mode" against torch.autograd.functional. kiln computes
them by the double-backward trick (two reverse passes), so these also check that the double
backward of the ops used is right. Compared: values (float64 tight, float32 looser), structure
(tuples, dicts, has_aux, argnums), nesting (jacfwd(jacrev(f)) is torch.func.hessian), zeros
for outputs that do not depend on the inputs, differentiability of the results, and the errors
for bad input (torch's exception class and message)."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwAD

import kiln
import kiln.autograd.forward_ad as kfwAD
import oracle

DTYPES = ["float32", "float64"]
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # torch.jit noise
              # torch.func.linearize's graph folding
              pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node")]
TOL = {"float32": 20.0, "float64": 4.0}  # scales of oracle's per-dtype tolerances


def arrays(dtype, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.2, 1.2, s).astype(dtype) for s in shapes]


def both(dtype, *shapes, seed=0):
    a = arrays(dtype, *shapes, seed=seed)
    return [kiln.tensor(x) for x in a], [torch.tensor(x) for x in a]


def same(k, t, where, scale=4.0):
    """k (kiln) equals t (torch): the same structure (dicts by key, tuples / lists in order),
    tensors equal within oracle's tolerances times scale."""
    if isinstance(t, dict):
        assert isinstance(k, dict) and list(k) == list(t), f"{where}: keys {k} vs {t}"
        for name in t:
            same(k[name], t[name], f"{where}[{name}]", scale)
    elif isinstance(t, (tuple, list)):
        assert type(k) is type(t) and len(k) == len(t), f"{where}: {type(k)} vs {type(t)}"
        for i, (a, b) in enumerate(zip(k, t)):
            same(a, b, f"{where}[{i}]", scale)
    else:
        oracle.assert_same(k, t, scale, where=where)


def as_torch(tree):
    """kiln results as torch tensors (same structure): to compare two kiln results."""
    if isinstance(tree, dict):
        return {k: as_torch(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(as_torch(v) for v in tree)
    return torch.from_numpy(tree.detach().numpy().copy())


# --- single-input functions, one per kind of op -------------------------------------------

def functions(L):
    F = L.nn.functional
    return {
        "sin": (lambda x: x.sin(), (3, 4)),
        "exp": (lambda x: x.exp(), (3, 4)),
        "tanh": (lambda x: x.tanh(), (3, 4)),
        "sigmoid": (lambda x: x.sigmoid(), (3, 4)),
        "pow": (lambda x: x.pow(3) + (x * x + 1).pow(0.5), (3, 4)),
        "division": (lambda x: x / (x * x + 1.5) - 2.0 / (x + 3), (3, 4)),
        "matmul": (lambda x: x @ x.t() + x.sin() @ x.t(), (3, 4)),
        "softmax": (lambda x: x.softmax(-1), (3, 4)),
        "log_softmax": (lambda x: F.log_softmax(x * 2, dim=0), (3, 4)),
        "layer_norm": (lambda x: F.layer_norm(x, (4,)), (3, 4)),
        "sum": (lambda x: (x * x).sum(1), (3, 4)),
        "mean": (lambda x: x.exp().mean(0), (3, 4)),
        "max": (lambda x: x.max(1)[0] + x.amax(0).sum(), (3, 4)),
        "slicing": (lambda x: x[1:, ::2].exp(), (3, 4)),
        "transpose": (lambda x: x.transpose(0, 1).sin() * x.t(), (3, 4)),
        "reshape": (lambda x: x.reshape(2, 6).cumsum(1).reshape(12), (3, 4)),
        "scalar out": (lambda x: (x.sin() * x).sum(), (3, 4)),
        "scalar in": (lambda x: x * L.tensor([1.0, -2.0, 3.0], dtype=x.dtype), ()),
        "mse": (lambda x: F.mse_loss(x.tanh(), x * 0.5), (3, 4)),
        "gelu+silu": (lambda x: F.gelu(x) * F.silu(x), (3, 4)),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(functions(torch)))
def test_jvp_jacfwd_linearize(name, dtype):
    (kf, shape), (tf, _) = functions(kiln)[name], functions(torch)[name]
    (kx, kv, kw), (tx, tv, tw) = both(dtype, shape, shape, shape, seed=len(name))
    tol = TOL[dtype]
    same(kiln.func.jvp(kf, (kx,), (kv,)), torch.func.jvp(tf, (tx,), (tv,)), f"{name} jvp", tol)
    kj, tj = kiln.func.jacfwd(kf)(kx), torch.func.jacfwd(tf)(tx)
    same(kj, tj, f"{name} jacfwd", tol)
    same(kj, as_torch(kiln.func.jacrev(kf)(kx)), f"{name} jacfwd vs kiln's jacrev", tol)
    kout, kfn = kiln.func.linearize(kf, kx)
    tout, tfn = torch.func.linearize(tf, tx)
    same(kout, tout, f"{name} linearize output", tol)
    for i, (a, b) in enumerate([(kv, tv), (kw, tw), (kx, tx)]):  # one graph, several tangents
        same(kfn(a), tfn(b), f"{name} linearize jvp_fn #{i}", tol)
    assert not kj.requires_grad  # outermost transform on plain tensors: plain results


# --- structures: several inputs / outputs, dicts, has_aux, argnums ---------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_tuples_dicts_and_aux(dtype):
    (kx, ky, kv, kw), (tx, ty, tv, tw) = both(dtype, (3,), (3,), (3,), (3,), seed=1)
    tol = TOL[dtype]

    def f(params, y):
        h = params["a"].exp() * params["b"].sin()
        return {"h": h * y, "pair": (h.sum(), (params["a"] * y).tanh())}, {"h": h}

    kr = kiln.func.jvp(f, ({"a": kx, "b": ky}, kx), ({"a": kv, "b": kw}, ky), has_aux=True)
    tr = torch.func.jvp(f, ({"a": tx, "b": ty}, tx), ({"a": tv, "b": tw}, ty), has_aux=True)
    same(kr, tr, "jvp of dicts with aux", tol)
    # torch.func.jacfwd gives zeros for a negative argnums (2.13: _replace_args compares the
    # position with the raw argnums, so the dual never replaces the argument): compared with
    # the same position counted from the front
    for argnums, torch_argnums in ((0, 0), (1, 1), (-1, 1), ((0, 1),) * 2, ((1, 0),) * 2,
                                   ((-1, 0), (1, 0))):
        kj = kiln.func.jacfwd(f, argnums, has_aux=True)({"a": kx, "b": ky}, kx)
        tj = torch.func.jacfwd(f, torch_argnums, has_aux=True)({"a": tx, "b": ty}, tx)
        same(kj, tj, f"jacfwd argnums={argnums}", tol)
        same(kj[0], as_torch(kiln.func.jacrev(f, argnums, has_aux=True)({"a": kx, "b": ky}, kx)[0]),
             f"jacfwd vs jacrev argnums={argnums}", tol)
    # lists out, a non-differentiated tensor argument (integer indices) passed through
    g = lambda x, idx: [x[idx] * x.sum(), x.exp()]  # noqa: E731
    same(kiln.func.jacfwd(g)(kx, kiln.tensor([2, 0])),
         torch.func.jacfwd(g)(tx, torch.tensor([2, 0])), "list output, index argument", tol)
    kout, kfn = kiln.func.linearize(lambda a, b: {"s": a * b, "t": (a.cos(),)}, kx, ky)
    tout, tfn = torch.func.linearize(lambda a, b: {"s": a * b, "t": (a.cos(),)}, tx, ty)
    same(kout, tout, "linearize dict output", tol)
    same(kfn(kv, kw), tfn(tv, tw), "linearize two primals", tol)


def test_outputs_independent_of_inputs_and_integer_outputs():
    (kx, kv), (tx, tv) = both("float64", (3,), (3,))
    f_k = lambda x: (kiln.ones(2, dtype=x.dtype), x.argmax(), (x > 0).sum(), x * 2)  # noqa: E731
    f_t = lambda x: (torch.ones(2, dtype=x.dtype), x.argmax(), (x > 0).sum(), x * 2)  # noqa: E731
    same(kiln.func.jvp(f_k, (kx,), (kv,)), torch.func.jvp(f_t, (tx,), (tv,)), "jvp")
    same(kiln.func.jacfwd(f_k)(kx), torch.func.jacfwd(f_t)(tx), "jacfwd")
    kout, kfn = kiln.func.linearize(lambda x: (x.sin(), kiln.ones(2, dtype=x.dtype)), kx)
    tout, tfn = torch.func.linearize(lambda x: (x.sin(), torch.ones(2, dtype=x.dtype)), tx)
    same(kfn(kv), tfn(tv), "linearize")
    # an argument the output does not use: zero Jacobian
    h = lambda x, y: x.exp()  # noqa: E731
    same(kiln.func.jacfwd(h, (0, 1))(kx, kv), torch.func.jacfwd(h, (0, 1))(tx, tv), "unused arg")
    with pytest.raises(RuntimeError, match="independent of the inputs") as ke:
        kiln.func.jvp(lambda x: (x * 2, kiln.ones(2)), (kx,), (kv,), strict=True)
    with pytest.raises(RuntimeError) as te:
        torch.func.jvp(lambda x: (x * 2, torch.ones(2)), (tx,), (tv,), strict=True)
    assert str(ke.value) == str(te.value)
    same(kiln.func.jvp(lambda x: x.sin(), (kx,), (kv,), strict=True),
         torch.func.jvp(lambda x: x.sin(), (tx,), (tv,), strict=True), "strict, dependent")


def test_tangent_dtype_and_identity():
    (kx, kv), (tx, tv) = both("float64", (4,), (4,), seed=3)
    # a float32 tangent for a float64 primal: torch computes in the primal's dtype
    same(kiln.func.jvp(lambda x: x.exp() * x, (kx,), (kv.float(),)),
         torch.func.jvp(lambda x: x.exp() * x, (tx,), (tv.float(),)), "float32 tangent")
    # a float64 tangent for a float32 primal: torch returns a float64 tangent; kiln casts the
    # tangent to the primal's dtype (module docstring), so the result is float32, same values
    kr = kiln.func.jvp(lambda x: x.exp(), (kx.float(),), (kv,))[1]
    tr = torch.func.jvp(lambda x: x.exp(), (tx.float(),), (tv,))[1]
    assert kr.dtype == kiln.float32 and tr.dtype == torch.float64
    np.testing.assert_allclose(kr.numpy(), tr.numpy(), rtol=1e-6)
    # f = identity, and an output that aliases an input
    same(kiln.func.jvp(lambda x: x, (kx,), (kv,)), torch.func.jvp(lambda x: x, (tx,), (tv,)), "id")
    same(kiln.func.jvp(lambda x, y: (x, y[1:]), (kx, kv), (kv, kx)),
         torch.func.jvp(lambda x, y: (x, y[1:]), (tx, tv), (tv, tx)), "aliases")


# --- nesting: Hessians, forward-over-reverse, reverse-over-forward --------------------------

def energy(x, y):
    return (x.sin() * y).sum() + (x * x).sum() * y.mean() + (x[:2] * y[1:]).exp().sum()


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessians_by_composition(dtype):
    (kx, ky, kv), (tx, ty, tv) = both(dtype, (3,), (3,), (3,), seed=4)
    tol = TOL[dtype]
    ref = torch.func.hessian(energy)(tx, ty)  # torch: jacfwd(jacrev(f))
    kf = kiln.func
    same(kf.jacfwd(kf.jacrev(energy))(kx, ky), ref, "jacfwd(jacrev)", tol)
    same(kf.jacrev(kf.jacfwd(energy))(kx, ky), ref, "jacrev(jacfwd)", tol)
    same(kf.jacfwd(kf.jacfwd(energy))(kx, ky), ref, "jacfwd(jacfwd)", tol)
    same(kf.jacfwd(kf.jacrev(energy, (0, 1)), (0, 1))(kx, ky),
         torch.func.hessian(energy, (0, 1))(tx, ty), "full Hessian over (0, 1)", tol)
    # forward-over-reverse Hessian-vector product
    same(kf.jvp(kf.grad(energy), (kx, ky), (kv, kv)),
         torch.func.jvp(torch.func.grad(energy), (tx, ty), (tv, tv)), "jvp(grad)", tol)
    # reverse-over-forward: the gradient of a jvp
    def jvp_sum(L):
        return lambda x: L.func.jvp(lambda a: energy(a, a.cos()), (x,), (x * 2,))[1].sum()

    same(kf.grad(jvp_sum(kiln))(kx), torch.func.grad(jvp_sum(torch))(tx), "grad(jvp)", tol)


def scalar_functions(L):
    """Scalar functions of a (3, 4) tensor over ops whose Hessian by jacfwd(jacrev) needs their
    double backward to be differentiable once more."""
    F = L.nn.functional
    eye3 = lambda x: 2 * L.eye(3, dtype=x.dtype)  # noqa: E731
    return {
        "conv1d": lambda x: F.conv1d(x.reshape(1, 2, 6), x.reshape(2, 2, 3)[:, :, :2]).pow(2).sum(),
        "conv2d": lambda x: F.conv2d(x.reshape(1, 1, 3, 4),
                                     x[:2, :2].reshape(1, 1, 2, 2)).sin().sum(),
        "max_pool1d": lambda x: F.max_pool1d(x.reshape(1, 3, 4), 2).pow(3).sum(),
        "avg_pool1d": lambda x: F.avg_pool1d(x.reshape(1, 3, 4), 2).pow(3).sum(),
        "batch_norm": lambda x: F.batch_norm(x, None, None, training=True).pow(3).sum(),
        "rms_norm": lambda x: F.rms_norm(x, (4,)).pow(3).sum(),
        "group_norm": lambda x: F.group_norm(x.reshape(1, 4, 3), 2).pow(3).sum(),
        "cross_entropy": lambda x: F.cross_entropy(x, L.tensor([0, 1, 3])),
        "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), x * 0.2 + 0.5),
        "smooth_l1": lambda x: F.smooth_l1_loss(x.sin(), x * 0.3),
        "activations": lambda x: (F.gelu(x, approximate="tanh") * F.elu(x) + F.softplus(x)
                                  * F.mish(x) + F.logsigmoid(x)).sum(),
        "norms": lambda x: x.norm() + x.std(1).sum() + x.logsumexp(1).pow(2).sum(),
        "prod/cumprod": lambda x: x.prod(1).sum() + x.cumprod(1).sum(),
        "special": lambda x: (x.erf() * L.atan2(x, x.exp()) + (x * x + 1).rsqrt()).sum(),
        "indexing": lambda x: (x.gather(1, L.tensor([[0, 1], [2, 3], [1, 1]])).pow(3).sum()
                               + x[L.tensor([0, 2])][:, L.tensor([1, 3])].pow(3).sum()),
        "sort/topk": lambda x: x.sort(1)[0].cumsum(1).pow(2).sum() + x.topk(2, 1)[0].pow(3).sum(),
        "attention": lambda x: F.scaled_dot_product_attention(
            x.reshape(1, 3, 4), x.reshape(1, 3, 4).sin(), x.reshape(1, 3, 4).cos(),
            is_causal=True).pow(2).sum(),
        "linalg": lambda x: (L.linalg.det(x[:, :3] + eye3(x))
                             + L.linalg.solve(x[:, :3] + eye3(x), x[:, 3]).pow(2).sum()
                             + L.linalg.eigh(x[:, :3] + x[:, :3].t())[0].pow(2).sum()),
        "svdvals": lambda x: L.linalg.svdvals(x).pow(3).sum(),
        "interpolate": lambda x: F.interpolate(x.reshape(1, 3, 4), scale_factor=2,
                                               mode="linear").pow(3).sum(),
        # lgamma's second derivative is trigamma, whose own derivative kiln lacks: the jvp's
        # second reverse pass must not run that node (it does not lead to the tangent's
        # input; autograd.grad skips such nodes, as torch's engine does).
        "lgamma": lambda x: (x.abs() + 0.5).lgamma().sum(),
    }


@pytest.mark.parametrize("name", list(scalar_functions(torch)))
def test_hessian_forward_over_reverse_many_ops(name):
    (kx,), (tx,) = both("float64", (3, 4), seed=12)
    kf, tf = scalar_functions(kiln)[name], scalar_functions(torch)[name]
    same(kiln.func.jacfwd(kiln.func.jacrev(kf))(kx), torch.func.hessian(tf)(tx), name)


def test_results_differentiable_when_inputs_require_grad():
    (kx, kv), (tx, tv) = both("float64", (3,), (3,), seed=5)
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    f = lambda x: (x.exp() * x.sin()).sum(0, keepdim=True) * x  # noqa: E731
    kout, kjvp = kiln.func.jvp(f, (kx,), (kv,))
    tout, tjvp = torch.func.jvp(f, (tx,), (tv,))
    assert kjvp.requires_grad and kout.requires_grad
    same(kiln.autograd.grad(kjvp.sum(), kx), torch.autograd.grad(tjvp.sum(), tx), "d jvp / dx")
    # (torch's linearize traces jvp_fn into a graph cut from x: compared with its jvp instead)
    _, kfn = kiln.func.linearize(f, kx)
    same(kiln.autograd.grad(kfn(kv).pow(2).sum(), kx),
         torch.autograd.grad(torch.func.jvp(f, (tx,), (tv,))[1].pow(2).sum(), tx),
         "d linearize jvp / dx")
    kt = kv.clone().requires_grad_(True)
    kj = kiln.func.jvp(lambda x: x.exp(), (kx.detach(),), (kt,))[1]
    same(kiln.autograd.grad(kj.sum(), kt)[0], tx.detach().exp(), "d jvp / d tangent")


# --- a module through functional_call ------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_mlp_with_functional_call(dtype):
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3),
                               torch.nn.LayerNorm(3)).to(getattr(torch, dtype))
    knet = kiln.nn.Sequential(kiln.nn.Linear(4, 5), kiln.nn.Tanh(), kiln.nn.Linear(5, 3),
                              kiln.nn.LayerNorm(3)).to(getattr(kiln, dtype))
    knet.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    tparams = {k: v.detach() for k, v in tnet.named_parameters()}
    kparams = {k: v.detach() for k, v in knet.named_parameters()}
    rng = np.random.default_rng(6)
    dirs = {k: rng.uniform(-1, 1, tuple(v.shape)).astype(dtype) for k, v in tparams.items()}
    (kx,), (tx,) = both(dtype, (2, 4), seed=7)
    tol = TOL[dtype]

    def run(L, net):
        return lambda p, x: L.func.functional_call(net, p, (x,))

    same(kiln.func.jvp(run(kiln, knet), (kparams, kx),
                       ({k: kiln.tensor(v) for k, v in dirs.items()}, kiln.zeros_like(kx))),
         torch.func.jvp(run(torch, tnet), (tparams, tx),
                        ({k: torch.tensor(v) for k, v in dirs.items()}, torch.zeros_like(tx))),
         "jvp along parameter directions", tol)
    same(kiln.func.jacfwd(run(kiln, knet), 1)(kparams, kx),
         torch.func.jacfwd(run(torch, tnet), 1)(tparams, tx), "jacfwd over the input", tol)
    same(kiln.func.jacfwd(run(kiln, knet))(kparams, kx),
         torch.func.jacfwd(run(torch, tnet))(tparams, tx), "jacfwd over the parameters", tol)


# --- errors ----------------------------------------------------------------------------------

def error_cases(L):
    x, i = L.ones(3), L.ones(3, dtype=L.int64)
    sin = lambda a: a.sin()  # noqa: E731
    return {
        "primals not a tuple": lambda: L.func.jvp(sin, x, (x,)),
        "tangent wrong shape": lambda: L.func.jvp(sin, (x,), (L.ones(4),)),
        "tangent wrong shape in a dict": lambda: L.func.jvp(lambda d: d["a"], ({"a": x},),
                                                            ({"a": L.ones(2)},)),
        "integer tangent": lambda: L.func.jvp(sin, (x,), (i,)),
        "integer primal": lambda: L.func.jvp(lambda a: a * 2, (i,), (i,)),
        "tangent not a tensor": lambda: L.func.jvp(sin, (x,), (1.0,)),
        "primal not a tensor": lambda: L.func.jvp(sin, (1.0,), (1.0,)),
        "no primals": lambda: L.func.jvp(lambda: x, (), ()),
        "non-tensor output": lambda: L.func.jvp(lambda a: (a, 1.0), (x,), (x,)),
        "empty output": lambda: L.func.jvp(lambda a: (), (x,), (x,)),
        "has_aux without a pair": lambda: L.func.jvp(lambda a: a, (x,), (x,), has_aux=True),
        "non-tensor aux": lambda: L.func.jvp(lambda a: (a, {"n": 3}), (x,), (x,), has_aux=True),
        "jacfwd non-tensor output": lambda: L.func.jacfwd(lambda a: 1.0)(x),
        "jacfwd integer input": lambda: L.func.jacfwd(lambda a: a * 2)(i),
        "jacfwd argnums out of range": lambda: L.func.jacfwd(sin, 3)(x),
        "jacfwd argnums repeated": lambda: L.func.jacfwd(lambda a, b: a, (0, 0))(x, x),
        "jacfwd has_aux without a pair": lambda: L.func.jacfwd(sin, has_aux=True)(x),
        "jacfwd bad randomness": lambda: L.func.jacfwd(sin, randomness="x")(x),
        "linearize tangent shape": lambda: L.func.linearize(sin, x)[1](L.ones(4)),
        "linearize tangent dtype": lambda: L.func.linearize(sin, x)[1](L.ones(3, dtype=L.float64)),
        "linearize integer primal": lambda: L.func.linearize(lambda a: a * 2, i),
        "forward_ad no level": lambda: L.autograd.forward_ad.make_dual(x, x),
        "forward_ad exit without enter": lambda: L.autograd.forward_ad.exit_dual_level(),
    }


# Structures print differently (torch's TreeSpec vs kiln's); the class and these words agree.
STRUCTURE_MESSAGES = {
    "jvp structure mismatch": ["jvp(f, primals, tangents): Expected primals and tangents to "
                               "have the same python structure.", "Got primals with structure",
                               "and tangents with structure"],
    "linearize tangents structure": ["Expected the tangents", "to have the same argspec as the "
                                     "primals"],
}


def structure_cases(L):
    x = L.ones(3)
    return {
        "jvp structure mismatch": lambda: L.func.jvp(lambda a: a, (x,), (x, x)),
        "linearize tangents structure": lambda: L.func.linearize(lambda a: a, x)[1](x, x),
    }


@pytest.mark.parametrize("name", list(error_cases(torch)) + sorted(STRUCTURE_MESSAGES))
def test_errors_match_torch(name):
    cases_t = {**error_cases(torch), **structure_cases(torch)}
    cases_k = {**error_cases(kiln), **structure_cases(kiln)}
    with pytest.raises(Exception) as te:
        cases_t[name]()
    with pytest.raises(type(te.value)) as ke:
        cases_k[name]()
    message, expected = str(ke.value), str(te.value)
    if name in STRUCTURE_MESSAGES:
        for words in STRUCTURE_MESSAGES[name]:
            assert words in message and words in expected, (name, words, message, expected)
    else:
        assert message.replace("kiln.", "torch.") == expected, \
            f"{name}: {message!r} vs {expected!r}"


def test_errors_where_torch_has_none():
    x = kiln.ones(3)
    # torch fails inside (AttributeError: 'float' object has no attribute 'numel')
    with pytest.raises(RuntimeError, match="Expected primals to only contain Tensors"):
        kiln.func.jacfwd(lambda a: a * 2)(2.0)
    with pytest.raises(RuntimeError, match="Expected primals to only contain Tensors"):
        kiln.func.linearize(lambda a: a * 2, 2.0)


class SquareOnceDifferentiable(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    @kiln.autograd.once_differentiable
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return 2 * a * grad


class SquareTwiceDifferentiable(SquareOnceDifferentiable):
    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return 2 * a * grad


def test_op_without_double_backward_is_named():
    """A backward that is not differentiable would silently drop its share of J t; kiln checks
    <J t, u> against <t, J^T u> and names the op (torch: custom Functions need a jvp)."""
    (kx, kv), (tx, tv) = both("float64", (3,), (3,), seed=8)
    for f in (lambda a: SquareOnceDifferentiable.apply(a.exp()) + a.sin(),
              lambda a: SquareOnceDifferentiable.apply(a)):
        with pytest.raises(RuntimeError, match="SquareOnceDifferentiableBackward.*not "
                                               "differentiable"):
            kiln.func.jvp(f, (kx,), (kv,))
        with pytest.raises(RuntimeError, match="SquareOnceDifferentiableBackward"):
            kiln.func.jacfwd(f)(kx)
    same(kiln.func.jvp(lambda a: SquareTwiceDifferentiable.apply(a.exp()) + a.sin(), (kx,), (kv,)),
         torch.func.jvp(lambda a: (a.exp() * a.exp()) + a.sin(), (tx,), (tv,)),
         "twice-differentiable custom Function")


# --- kiln.autograd.forward_ad ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_ad_dual_tensors(dtype):
    (kx, kt, ky, ks), (tx, tt, ty, ts) = both(dtype, (3, 4), (3, 4), (4,), (4,), seed=9)
    tol = TOL[dtype]
    for name, (kf, _) in functions(kiln).items():
        tf = functions(torch)[name][0]
        if name == "scalar in":
            continue
        with kfwAD.dual_level(), tfwAD.dual_level():
            kp, ktan = kfwAD.unpack_dual(kf(kfwAD.make_dual(kx, kt)))
            tp, ttan = tfwAD.unpack_dual(tf(tfwAD.make_dual(tx, tt)))
            same((kp, ktan), (tp, ttan), f"forward_ad {name}", tol)
            assert not ktan.requires_grad and not kp.requires_grad, name
    with kfwAD.dual_level() as klevel, tfwAD.dual_level() as tlevel:
        assert klevel == tlevel
        kd, td = kfwAD.make_dual(kx, kt), tfwAD.make_dual(tx, tt)
        ke, te = kfwAD.make_dual(ky, ks), tfwAD.make_dual(ty, ts)
        same(tuple(kfwAD.unpack_dual(kd)), tuple(tfwAD.unpack_dual(td)), "a dual itself", tol)
        same(tuple(kfwAD.unpack_dual((kd * ke).tanh() + ke)),
             tuple(tfwAD.unpack_dual((td * te).tanh() + te)), "two duals", tol)
        assert kfwAD.unpack_dual(kx).tangent is None  # not a dual, not computed from one
        assert kfwAD.unpack_dual(kd.detach() * 2).tangent is None
        assert isinstance(kfwAD.unpack_dual(kd), kfwAD.UnpackedDualTensor)
        kz = kd.exp()
    assert kfwAD.unpack_dual(kz).tangent is None  # the level is gone


def test_forward_ad_through_parameters_that_require_grad():
    """Tangents stay backward-differentiable with respect to other tensors (torch's too)."""
    (kx, kt, kw), (tx, tt, tw) = both("float64", (2, 3), (2, 3), (3, 3), seed=10)
    kw.requires_grad_(True)
    tw.requires_grad_(True)
    with kfwAD.dual_level(), tfwAD.dual_level():
        kp, ktan = kfwAD.unpack_dual((kfwAD.make_dual(kx, kt) @ kw).sin())
        tp, ttan = tfwAD.unpack_dual((tfwAD.make_dual(tx, tt) @ tw).sin())
        same((kp, ktan), (tp, ttan), "values")
        assert ktan.requires_grad and kp.requires_grad
        same(kiln.autograd.grad((ktan * kp).sum(), kw), torch.autograd.grad((ttan * tp).sum(), tw),
             "d (tangent * primal) / dw")


def test_forward_ad_errors():
    x = kiln.ones(3)
    with kfwAD.dual_level(), tfwAD.dual_level():
        kd, td = kfwAD.make_dual(x, x), tfwAD.make_dual(torch.ones(3), torch.ones(3))
        for kcall, tcall in [
                (lambda: kfwAD.make_dual(kd, x), lambda: tfwAD.make_dual(td, torch.ones(3))),
                (lambda: kfwAD.make_dual(x, kiln.ones(4)),
                 lambda: tfwAD.make_dual(torch.ones(3), torch.ones(4))),
                (lambda: kfwAD.make_dual(x, kiln.ones(3, dtype=kiln.int64)),
                 lambda: tfwAD.make_dual(torch.ones(3), torch.ones(3, dtype=torch.int64))),
                (kfwAD.enter_dual_level, tfwAD.enter_dual_level)]:
            with pytest.raises(Exception) as te:
                tcall()
            with pytest.raises(type(te.value)) as ke:
                kcall()
            assert str(ke.value).replace("kiln.", "torch.") == str(te.value)
        # kiln only: tangents follow the autograd graph, which no_grad does not record
        with kiln.no_grad(), pytest.raises(NotImplementedError, match="grad mode"):
            kfwAD.make_dual(x, x)


# --- kiln.autograd.functional with strategy="forward-mode" ---------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_functional_jacobian_and_hessian_forward_mode(dtype):
    (kx, ky), (tx, ty) = both(dtype, (3,), (2,), seed=11)
    tol = TOL[dtype]
    KF, TF = kiln.autograd.functional, torch.autograd.functional
    f = lambda x, y: (x.exp() * y.sum(), (x[:2] * y).sin())  # noqa: E731
    same(KF.jacobian(f, (kx, ky), vectorize=True, strategy="forward-mode"),
         TF.jacobian(f, (tx, ty), vectorize=True, strategy="forward-mode"), "jacobian", tol)
    same(KF.jacobian(lambda x: x.tanh(), kx, vectorize=True, strategy="forward-mode"),
         TF.jacobian(lambda x: x.tanh(), tx, vectorize=True, strategy="forward-mode"),
         "jacobian, one tensor", tol)
    g = lambda x, y: (x.pow(3) * y[:1].exp()).sum() + (x * x).sum() * y.sum()  # noqa: E731
    kh = KF.hessian(g, (kx, ky), vectorize=True, outer_jacobian_strategy="forward-mode")
    th = TF.hessian(g, (tx, ty), vectorize=True, outer_jacobian_strategy="forward-mode")
    # (torch's forward-mode hessian comes back requiring grad, as lists of lists: lists as torch)
    same(kh, [[b.detach() for b in row] for row in th], "hessian", tol)
    same(KF.jvp(f, (kx, ky), (kx, ky)), TF.jvp(f, (tx, ty), (tx, ty)), "jvp still", tol)
    same(KF.hvp(g, (kx, ky), (kx, ky)), TF.hvp(g, (tx, ty), (tx, ty)), "hvp still", tol)
    with pytest.raises(NotImplementedError, match="vectorize=True"):  # as torch
        KF.jacobian(f, (kx, ky), strategy="forward-mode")
