"""The meta device (tensors with shapes and dtypes but no data), `with kiln.device(...)`,
Module.to_empty, and tensor attributes / weak references / as_subclass, against torch 2.13."""
import gc
import warnings
import weakref

import numpy as np
import pytest
import torch

import kiln
import kiln.nn as nn


def test_factories_and_repr_match_torch():
    for shape, dtype, tdtype in [((2, 3), None, None), ((3,), kiln.int64, torch.int64),
                                 ((), None, None), ((0, 4), kiln.bfloat16, torch.bfloat16)]:
        k = kiln.empty(shape, device="meta", dtype=dtype)
        t = torch.empty(shape, device="meta", dtype=tdtype)
        assert repr(k) == repr(t).replace("torch.", "kiln.")
        assert k.is_meta and t.is_meta
        assert str(k.device) == "meta" and k.device == kiln.device("meta")
        assert tuple(k.shape) == tuple(t.shape) and k.stride() == t.stride()
    x = kiln.empty(2, 3, device="meta", requires_grad=True)
    assert repr(x) == "tensor(..., device='meta', size=(2, 3), requires_grad=True)"
    assert repr(x * 2).startswith("tensor(..., device='meta', size=(2, 3), grad_fn=<")
    assert repr(kiln.device("meta")) == repr(torch.device("meta"))


def test_huge_tensors_cost_no_memory():
    x = kiln.empty(1 << 20, 1 << 20, device="meta")  # 4 TiB of float32
    assert x.nbytes == 4 << 40
    y = x @ x.T
    assert y.shape == (1 << 20, 1 << 20)


@pytest.mark.parametrize("name", ["matmul", "add", "softmax", "conv", "reductions", "views",
                                  "cat", "embedding", "layer_norm", "dtype_promotion"])
def test_op_shapes_and_dtypes_match_torch(name):
    def run(lib, dev):
        F = lib.nn.functional
        e = lambda *s, dtype=None: lib.empty(*s, device=dev, dtype=dtype)  # noqa: E731
        if name == "matmul":
            return [e(5, 7, 3) @ e(3, 4), lib.bmm(e(2, 3, 4), e(2, 4, 6))]
        if name == "add":
            return [e(4, 1) + e(1, 5), lib.add(e(3), 2.0, alpha=3)]
        if name == "softmax":
            return [lib.softmax(e(4, 9), -1), F.log_softmax(e(2, 3, 4), 1)]
        if name == "conv":
            return [F.conv2d(e(2, 3, 17, 19), e(8, 3, 3, 3), stride=2, padding=1),
                    F.max_pool2d(e(1, 4, 9, 9), 2)]
        if name == "reductions":
            x = e(3, 4, 5)
            return [x.sum(1), x.mean((0, 2), keepdim=True), x.amax(-1), x.argmax(1),
                    x.var(0)]
        if name == "views":
            x = e(2, 3, 4)
            return [x.transpose(0, 2), x.reshape(6, 4), x[:, 1:, ::2], x.unsqueeze(1),
                    x.permute(2, 0, 1).contiguous()]
        if name == "cat":
            return [lib.cat([e(2, 3), e(4, 3)]), lib.stack([e(3), e(3)], 1)]
        if name == "embedding":
            return [F.embedding(e(5, 7, dtype=lib.int64), e(100, 16))]
        if name == "layer_norm":
            return [F.layer_norm(e(2, 5, 8), (8,), e(8), e(8)), F.gelu(e(3, 3))]
        return [e(3, dtype=lib.int32) + e(3, dtype=lib.float64),
                e(2, dtype=lib.bfloat16) * 2.5, (e(2) > 0)]
    for k, t in zip(run(kiln, "meta"), run(torch, "meta")):
        assert k.is_meta
        assert tuple(k.shape) == tuple(t.shape), name
        assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1], name
        assert k.stride() == t.stride(), name


def test_reading_values_raises_like_torch():
    x = kiln.empty(2, 3, device="meta")
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        x.cpu()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        x.tolist()
    with pytest.raises((TypeError, NotImplementedError)):
        x.numpy()
    with pytest.raises((RuntimeError, NotImplementedError)):
        kiln.empty((), device="meta").item()
    with pytest.raises(NotImplementedError, match="meta device"):
        kiln.nonzero(x)
    with pytest.raises(RuntimeError):  # a real tensor and a meta tensor in one op
        x + kiln.ones(2, 3)
    # a 0-d CPU tensor joins a meta tensor, as torch
    assert (x + kiln.tensor(1.0)).is_meta


def test_writes_into_meta_are_accepted_and_host_is_untouched():
    host = kiln.arange(6.0).reshape(2, 3)
    m = host.to("meta")
    assert m.is_meta and m.shape == (2, 3)
    m.copy_(host)
    m.add_(1.0)
    m.uniform_()
    assert host.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(NotImplementedError):
        host.copy_(m)


def test_autograd_on_meta_gives_meta_gradients():
    w = kiln.empty(4, 3, device="meta", requires_grad=True)
    x = kiln.empty(2, 3, device="meta")
    (x @ w.T).relu().sum().backward()
    assert w.grad.is_meta and w.grad.shape == (4, 3)


def test_device_context_manager_sets_factories_default():
    assert kiln.get_default_device() == kiln.device("cpu")
    with kiln.device("meta"):
        assert kiln.zeros(3).is_meta
        assert kiln.get_default_device() == kiln.device("meta")
        lin = nn.Linear(3, 4)
        with kiln.device("cpu"):
            assert not kiln.ones(2).is_meta
        assert kiln.ones(2).is_meta
        # *_like follow their input, as torch
        assert not kiln.zeros_like(kiln.ones(2, device="cpu")).is_meta
    assert not kiln.zeros(3).is_meta
    assert lin.weight.is_meta and lin.bias.is_meta


def test_device_context_restores_after_an_exception():
    with pytest.raises(ValueError):
        with kiln.device("meta"):
            raise ValueError("boom")
    assert not kiln.empty(1).is_meta


def _torch_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                               torch.nn.Linear(16, 4))


def _kiln_mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))


def test_meta_model_to_empty_then_load_state_dict_matches_torch():
    ref = _torch_mlp()
    state = {k: kiln.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}
    with kiln.device("meta"):
        model = _kiln_mlp()
    assert all(p.is_meta for p in model.parameters())
    model.to_empty(device="cpu")
    assert all(not p.is_meta and p.requires_grad for p in model.parameters())
    model.load_state_dict(state)
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    got = model(kiln.tensor(x)).detach().numpy()
    want = ref(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_meta_model_load_state_dict_assign():
    ref = _torch_mlp()
    state = {k: kiln.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}
    with kiln.device("meta"):
        model = _kiln_mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.load_state_dict(state, assign=True)
    assert all(not p.is_meta for p in model.parameters())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(model(kiln.tensor(x)).detach().numpy(),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_copying_a_checkpoint_into_meta_params_warns_as_torch():
    with kiln.device("meta"):
        model = nn.Linear(2, 3)
    state = {"weight": kiln.ones(3, 2), "bias": kiln.zeros(3)}
    with pytest.warns(UserWarning, match="copying from a non-meta parameter"):
        model.load_state_dict(state)
    assert model.weight.is_meta


def test_to_empty_without_recursion_and_on_module_to():
    m = nn.Sequential(nn.Linear(2, 2))
    m.to("meta")
    assert m[0].weight.is_meta
    m.to_empty(device="cpu", recurse=False)  # no own parameters: children stay meta
    assert m[0].weight.is_meta
    m[0].to_empty(device="cpu", recurse=False)
    assert not m[0].weight.is_meta


def test_tensor_attributes_and_weak_references():
    t = kiln.ones(3)
    t.tag = "activation"
    assert t.tag == "activation"
    assert t.__dict__ == {"tag": "activation"}
    r = weakref.ref(t)
    assert r() is t
    table = weakref.WeakKeyDictionary()
    table[t] = 1
    del t
    gc.collect()
    assert r() is None and len(table) == 0
    p = nn.Parameter(kiln.ones(2))
    p.sharded = True
    assert p.sharded and weakref.ref(p)() is p


def test_as_subclass_keeps_data_and_autograd_like_torch():
    class Tagged(kiln.Tensor):
        def describe(self):
            return f"tagged {tuple(self.shape)}"

    x = kiln.ones(2, 3, requires_grad=True)
    y = x.as_subclass(Tagged)
    assert type(y) is Tagged and y.describe() == "tagged (2, 3)"
    assert y.requires_grad and y.grad_fn is not None  # torch: AliasBackward0
    (y * 3).sum().backward()
    assert x.grad.tolist() == [[3.0] * 3] * 2
    d = kiln.zeros(2)
    s = d.as_subclass(Tagged)
    s.add_(1)
    assert d.tolist() == [1.0, 1.0]  # same data
    with pytest.raises(TypeError):
        d.as_subclass(int)


def test_attributes_survive_pickle_and_deepcopy_as_torch():
    import copy
    import pickle

    t = kiln.arange(3.0)
    t.tag = {"role": "bias"}
    for r in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert r.tolist() == [0.0, 1.0, 2.0] and r.tag == {"role": "bias"}
    d = copy.deepcopy(t)
    assert d.tag is not t.tag  # deep
    p = nn.Parameter(kiln.ones(2))
    p.sharded = True
    for r in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert isinstance(r, nn.Parameter) and r.sharded is True


def test_meta_tensors_pickle_and_deepcopy_as_meta():
    import copy
    import pickle

    m = kiln.empty(4, 5, device="meta", dtype=kiln.bfloat16, requires_grad=True)
    for r in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert r.is_meta and r.shape == (4, 5) and r.dtype == kiln.bfloat16 and r.requires_grad
    with kiln.device("meta"):
        lin = nn.Linear(3, 2)
    r = pickle.loads(pickle.dumps(lin))
    assert r.weight.is_meta and isinstance(r.weight, nn.Parameter)
    c = copy.deepcopy(lin)
    assert c.weight.is_meta and c.weight.shape == (2, 3)


def test_deepcopy_keeps_a_tensor_subclass():
    import copy

    class Tagged(kiln.Tensor):
        pass

    x = kiln.ones(2).as_subclass(Tagged)
    y = copy.deepcopy(x)
    assert type(y) is Tagged and y.tolist() == [1.0, 1.0]


def _tiny_decoder(lib):
    nn, F = lib.nn, lib.nn.functional

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(100, 16)
            self.pos = nn.Embedding(32, 16)
            self.ln = nn.LayerNorm(16)
            self.qkv = nn.Linear(16, 48)
            self.head = nn.Linear(16, 100, bias=False)

        def forward(self, ids):
            T = ids.shape[1]
            # positions from a plain arange (on the CPU): meta kernels take CPU index tensors
            x = self.tok(ids) + self.pos(lib.arange(T).unsqueeze(0))
            q, k, v = self.qkv(self.ln(x)).split(16, dim=-1)
            a = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                                               is_causal=True).squeeze(1)
            return self.head(x + a)

    return Decoder()


def test_a_decoder_runs_on_meta_as_torch():
    outs = []
    for lib in (kiln, torch):
        with lib.device("meta"):
            model = _tiny_decoder(lib).eval()
        ids = lib.empty(2, 7, dtype=lib.int64, device="meta")
        y = model(ids)
        assert y.is_meta
        outs.append(tuple(y.shape))
        y.sum().backward()
        assert model.qkv.weight.grad.is_meta
    assert outs[0] == outs[1] == (2, 7, 100)
    with pytest.raises(RuntimeError):  # a float CPU tensor still may not join a meta op
        kiln.empty(3, device="meta") + kiln.ones(3)
