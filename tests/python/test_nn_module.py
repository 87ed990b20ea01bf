"""kiln.nn.Module subclassing semantics against torch.nn.Module: the same user-written model
class, defined once over `nn` and instantiated with torch.nn and kiln.nn, must register the
same parameters, buffers and submodules under the same names, print the same repr, give the
same state_dict keys and the same load_state_dict errors; plus hooks, apply, train/eval, to(),
zero_grad, nn.init and gradient clipping."""
import math

import numpy as np
import pytest
import torch

import kiln
import oracle


def make_model_class(nn, L):
    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc = nn.Linear(dim, dim)
            self.register_buffer("scale", L.ones(dim))
            self.register_buffer("cache", L.zeros(2), persistent=False)
            self.gate = nn.Parameter(L.zeros(1))
            self.unused = None

        def forward(self, x):
            return x + self.fc(self.norm(x)) * self.scale + self.gate

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(7, 4)
            self.blocks = nn.ModuleList([Block(4) for _ in range(2)])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 3), "b": nn.Linear(4, 2, bias=False)})
            self.shared = self.heads["a"]  # the same module twice: listed once
            self.register_parameter("maybe", None)
            self.act = nn.Sequential(nn.GELU(), nn.Identity())

        def forward(self, idx):
            h = self.embed(idx)
            for b in self.blocks:
                h = b(h)
            h = self.act(h)
            return self.heads["a"](h).sum() + self.heads["b"](h).sum()

    return Net


def both():
    return make_model_class(torch.nn, torch)(), make_model_class(kiln.nn, kiln)()


def test_registration_and_names_match_torch():
    t, k = both()
    assert list(k.state_dict()) == list(t.state_dict())
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in k.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in t.named_parameters(remove_duplicate=False)]
    assert [n for n, _ in k.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in k.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in k.named_modules(prefix="m")] == [n for n, _ in t.named_modules(prefix="m")]
    assert [n for n, _ in k.named_children()] == [n for n, _ in t.named_children()]
    assert [n for n, _ in k.blocks[0].named_parameters(prefix="x", recurse=False)] == \
        [n for n, _ in t.blocks[0].named_parameters(prefix="x", recurse=False)]
    assert len(list(k.parameters())) == len(list(t.parameters()))
    assert len(list(k.modules())) == len(list(t.modules()))
    assert repr(k) == repr(t)
    assert isinstance(k.blocks[0].gate, kiln.nn.Parameter)
    assert k.maybe is None and k.blocks[1].unused is None
    assert sorted(k.state_dict(keep_vars=True)) == sorted(t.state_dict(keep_vars=True))
    assert k.get_submodule("blocks.1.fc") is k.blocks[1].fc
    assert k.get_parameter("blocks.1.fc.weight") is k.blocks[1].fc.weight
    oracle.record("nn.Module.registration", 14)


def test_state_dict_roundtrip_and_forward():
    t, k = both()
    k.load_state_dict({n: kiln.tensor(v.numpy()) for n, v in t.state_dict().items()})
    idx = np.array([[1, 2, 3], [4, 5, 6]])
    tr = t(torch.tensor(idx))
    kr = k(kiln.tensor(idx))
    oracle.assert_same(kr, tr, 10, where="Net forward")
    tr.backward()
    kr.backward()
    for (n, tp), (_, kp) in zip(t.named_parameters(), k.named_parameters()):
        oracle.assert_same(kp.grad, tp.grad, 40, where=f"Net grad {n}")
    # state_dict values are detached aliases of the parameters
    sd = k.state_dict()
    assert not sd["embed.weight"].requires_grad
    oracle.record("nn.Module.state_dict", 3)


def _load_error(model, sd, strict=True):
    try:
        r = model.load_state_dict(sd, strict=strict)
    except RuntimeError as e:
        return str(e)
    return r


def test_load_state_dict_errors_match_torch():
    t, k = both()
    tsd, ksd = t.state_dict(), k.state_dict()
    for mutate in [lambda sd: sd.pop("blocks.0.fc.bias"),
                   lambda sd: sd.__setitem__("blocks.0.extra", sd["blocks.0.scale"]),
                   lambda sd: sd.__setitem__("nothere.weight", sd["blocks.0.scale"]),
                   lambda sd: (sd.pop("embed.weight"), sd.__setitem__("heads.c.weight",
                                                                       sd["blocks.0.scale"]))]:
        a, b = dict(tsd), dict(ksd)
        mutate(a)
        mutate(b)
        te, ke = _load_error(t, a), _load_error(k, b)
        assert isinstance(te, str) and ke == te, (ke, te)
        # strict=False: the same missing / unexpected lists, no error
        tr, kr = t.load_state_dict(a, strict=False), k.load_state_dict(b, strict=False)
        assert kr.missing_keys == tr.missing_keys and kr.unexpected_keys == tr.unexpected_keys
    r = k.load_state_dict(ksd)
    assert r.missing_keys == [] and r.unexpected_keys == [] and \
        repr(r) == repr(t.load_state_dict(tsd))
    # shape mismatch: both report it (torch prints torch.Size, kiln kiln.Size)
    a, b = dict(tsd), dict(ksd)
    a["blocks.0.fc.weight"] = torch.zeros(3, 3)
    b["blocks.0.fc.weight"] = kiln.zeros(3, 3)
    te, ke = _load_error(t, a), _load_error(k, b)
    assert ke.replace("kiln.", "torch.") == te
    oracle.record("nn.Module.load_state_dict", 10)


def test_setattr_semantics():
    for nn, L in ((torch.nn, torch), (kiln.nn, kiln)):
        m = nn.Linear(2, 3)
        m.weight = nn.Parameter(L.ones(3, 2))  # replace a parameter
        assert float(m.weight.sum()) == 6
        m.bias = None
        assert "bias" not in m.state_dict()
        m.extra = L.ones(1)  # a plain tensor attribute is not registered
        assert "extra" not in m.state_dict()
        m.register_buffer("buf", L.zeros(2))
        m.buf = L.ones(2)  # assigning to a buffer name updates the buffer
        assert float(m.state_dict()["buf"].sum()) == 2
        m.sub = nn.ReLU()
        assert [n for n, _ in m.named_children()] == ["sub"]
        del m.sub
        assert list(m.named_children()) == []
        with pytest.raises(TypeError):
            m.weight = L.ones(3, 2)
        with pytest.raises(KeyError):
            m.register_buffer("weight", L.ones(1))
        with pytest.raises(AttributeError):
            m.nothing
        class Early(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(L.ones(1))
        with pytest.raises(AttributeError):
            Early()
    oracle.record("nn.Module.setattr", 9)


def test_train_eval_apply_zero_grad_hooks():
    t, k = both()
    for m in (t, k):
        m.eval()
        assert not any(x.training for x in m.modules())
        m.train()
        assert all(x.training for x in m.modules())
        seen = []
        m.apply(lambda mod: seen.append(type(mod).__name__))
        assert seen[-1] == "Net"
    assert [type(x).__name__ for x in k.modules()] == [type(x).__name__ for x in t.modules()]
    # zero_grad
    kr = k(kiln.tensor([[1, 2]]))
    kr.backward()
    assert k.embed.weight.grad is not None
    k.zero_grad(set_to_none=False)
    assert float(k.embed.weight.grad.abs().sum()) == 0
    k.zero_grad()
    assert k.embed.weight.grad is None
    # forward hooks
    lin_k, lin_t = kiln.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    calls = []
    for lin, L in ((lin_k, kiln), (lin_t, torch)):
        h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        h2 = lin.register_forward_hook(lambda mod, args, out: out * 0 + 1)
        out = lin(L.ones(1, 2))
        calls.append(float(out.sum()))
        h1.remove()
        h2.remove()
        calls.append(float((lin(L.ones(1, 2)) - lin.weight.sum(1) - lin.bias).abs().sum()))
    assert calls[0] == calls[2] == 2.0 and calls[1] < 1e-6 and calls[3] < 1e-6
    oracle.record("nn.Module.modes_hooks", 6)


def test_to_dtype_keeps_parameter_objects():
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 2), kiln.nn.BatchNorm1d(2))
    w = m[0].weight
    m.to(kiln.float64)
    assert m[0].weight is w and w.dtype == kiln.float64 and w.requires_grad
    assert isinstance(w, kiln.nn.Parameter)
    assert m[1].running_mean.dtype == kiln.float64
    assert m[1].num_batches_tracked.dtype == kiln.int64
    m.float()
    assert w.dtype == kiln.float32
    m.to("cpu")
    with pytest.raises(TypeError):
        m.to(kiln.int32)
    oracle.record("nn.Module.to", 5)


def test_parameter_semantics():
    for nn, L in ((torch.nn, torch), (kiln.nn, kiln)):
        p = nn.Parameter(L.ones(2, 2))
        assert p.requires_grad and p.is_leaf and isinstance(p, L.Tensor)
        q = nn.Parameter(L.ones(2), requires_grad=False)
        assert not q.requires_grad
        assert type(p * 2).__name__ == "Tensor"
        assert repr(p).startswith("Parameter containing:\n")
        import copy
        c = copy.deepcopy(p)
        assert isinstance(c, nn.Parameter) and c is not p
    oracle.record("nn.Parameter", 2)


# --- init -----------------------------------------------------------------------------------

def test_default_init_follows_torch_distributions():
    kiln.manual_seed(1)
    lin = kiln.nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    b = lin.bias.detach().numpy()
    assert np.abs(b).max() <= bound
    emb = kiln.nn.Embedding(300, 200, padding_idx=3).weight.detach().numpy()
    assert abs(emb.std() - 1) < 0.02 and not emb[3].any()
    bil = kiln.nn.Bilinear(50, 40, 30).weight.detach().numpy()
    assert np.abs(bil).max() <= 1 / math.sqrt(50)
    oracle.record("nn.init.defaults", 4)


@pytest.mark.parametrize("name,kwargs,expected_std", [
    ("kaiming_uniform_", {}, math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(200)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, 1 / math.sqrt(3 * 200)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2 / 300)),
    ("xavier_uniform_", {"gain": 2.0}, 2 * math.sqrt(2 / 500)),
    ("xavier_normal_", {}, math.sqrt(2 / 500)),
    ("normal_", {"mean": 0.0, "std": 0.3}, 0.3),
    ("uniform_", {"a": -1.0, "b": 1.0}, 1 / math.sqrt(3)),
    ("trunc_normal_", {"std": 0.02}, 0.02),
])
def test_init_statistics(name, kwargs, expected_std):
    w = kiln.empty(300, 200)
    g = kiln.Generator().manual_seed(5) if hasattr(kiln.Generator(), "manual_seed") else None
    r = getattr(kiln.nn.init, name)(w, **kwargs, generator=g)
    assert r is w
    a = w.numpy()
    assert abs(a.std() - expected_std) < 0.03 * expected_std, (a.std(), expected_std)
    if name == "trunc_normal_":
        assert a.min() >= -2 and a.max() <= 2
    # the same generator seed gives the same values
    w2 = kiln.empty(300, 200)
    getattr(kiln.nn.init, name)(w2, **kwargs, generator=kiln.Generator().manual_seed(5))
    np.testing.assert_array_equal(a, w2.numpy())
    oracle.record("nn.init." + name)


def test_init_misc_vs_torch():
    for nl, p in [("linear", None), ("relu", None), ("tanh", None), ("leaky_relu", 0.2),
                  ("sigmoid", None), ("selu", None), ("conv2d", None)]:
        assert kiln.nn.init.calculate_gain(nl, p) == pytest.approx(
            torch.nn.init.calculate_gain(nl, p))
    w = kiln.empty(5, 8)
    kiln.nn.init.orthogonal_(w, gain=1.5)
    np.testing.assert_allclose(w.numpy() @ w.numpy().T, 2.25 * np.eye(5), atol=1e-5)
    for fn, val in [(kiln.nn.init.zeros_, 0), (kiln.nn.init.ones_, 1)]:
        fn(w)
        assert (w.numpy() == val).all()
    kiln.nn.init.constant_(w, 0.25)
    assert (w.numpy() == 0.25).all()
    kiln.nn.init.eye_(w)
    np.testing.assert_array_equal(w.numpy(), np.eye(5, 8))
    p = kiln.nn.Parameter(kiln.empty(3, 4))
    assert kiln.nn.init.normal_(p) is p and p.requires_grad and p.grad_fn is None
    oracle.record("nn.init.misc", 12)


# --- gradient clipping ----------------------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_vs_torch(norm_type, max_norm):
    rng = np.random.default_rng(3)
    grads = [rng.normal(size=s) for s in [(3, 4), (5,), (2, 2, 2)]]
    tps, kps = [], []
    for g in grads:
        tp = torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64))
        tp.grad = torch.tensor(g)
        kp = kiln.nn.Parameter(kiln.zeros(g.shape, dtype=kiln.float64))
        kp.grad = kiln.tensor(g)
        tps.append(tp)
        kps.append(kp)
    kps.append(kiln.nn.Parameter(kiln.zeros(2)))  # no grad: skipped
    tps.append(torch.nn.Parameter(torch.zeros(2)))
    tn = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    kn = kiln.nn.utils.clip_grad_norm_(kps, max_norm, norm_type)
    oracle.assert_same(kn, tn, where="total norm")
    for tp, kp in zip(tps[:-1], kps[:-1]):
        oracle.assert_same(kp.grad, tp.grad, where="clipped grad")
    oracle.record("nn.utils.clip_grad_norm_")


def test_clip_grad_value_vs_torch():
    g = np.linspace(-3, 3, 12).reshape(3, 4)
    tp, kp = torch.nn.Parameter(torch.zeros(3, 4)), kiln.nn.Parameter(kiln.zeros(3, 4))
    tp.grad, kp.grad = torch.tensor(g, dtype=torch.float32), kiln.tensor(g, dtype=kiln.float32)
    torch.nn.utils.clip_grad_value_([tp], 1.5)
    kiln.nn.utils.clip_grad_value_([kp], 1.5)
    oracle.assert_same(kp.grad, tp.grad)
    v = kiln.nn.utils.parameters_to_vector([kp, kp])
    assert tuple(v.shape) == (24,)
    oracle.record("nn.utils.clip_grad_value_")
