"""kiln.export (decision 0112) against torch.export as the reference: each model is written
once for both libraries (`build(T)` with T = torch or kiln), weights are copied from torch
through numpy, and the graph signatures (kinds, placeholder / output names, targets), the
printed signature and the outputs of ep.module() on new inputs must agree. Then dynamic
dimensions (Dim ranges, other sizes, violations), specialization and data-dependent errors,
run_decompositions' mutations, and save / load with corrupted files."""
import io
import json
import math
import random
import zipfile

import numpy as np
import pytest
import torch
import torch.export

import kiln
import kiln.export
import kiln.library
from kiln.export import Dim


# --- the models, written once for both libraries ---------------------------------------------

def build(T):
    nn, F = T.nn, T.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)
            self.unused = nn.Linear(2, 2)  # lifted although never called, as torch does
            self.register_buffer("scale", T.ones(4) * 0.5)

        def forward(self, x):
            return self.fc2(T.relu(self.fc1(x))) * self.scale

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Linear(8, 5)

        def forward(self, x):
            x = self.pool(F.relu(self.bn(self.conv(x))))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.head(x)

    class Block(nn.Module):
        """A pre-norm transformer block with the attention written out; the causal mask is a
        buffer sliced to the (dynamic) sequence length."""

        def __init__(self, dim=16, heads=2, seq=12):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.register_buffer("mask", T.tril(T.ones(seq, seq)).view(1, 1, seq, seq))

        def forward(self, x):
            B, S, C = x.shape
            hd = C // self.heads
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q = q.view(B, S, self.heads, hd).transpose(1, 2)
            k = k.view(B, S, self.heads, hd).transpose(1, 2)
            v = v.view(B, S, self.heads, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(self.mask[:, :, :S, :S] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, S, C)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class KW(nn.Module):
        """Keyword inputs (one keyword-only), a defaulted one left out, nested outputs."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, y=None, *, scale=2.0, mask=None):
            h = self.fc(x)
            if y is not None:
                h = h + y
            if mask is not None:
                h = h * mask
            return h * scale, (h.sum(-1), {"a": h.relu()})

    class Nested(nn.Module):
        """A list input and an int input (specialized to its value, as torch)."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, xs, n: int):
            return self.fc(x) * n + xs[0] * xs[1]

    class Counter(nn.Module):
        """Buffer and input mutations, a non-persistent buffer, tensor constants."""

        def __init__(self):
            super().__init__()
            self.register_buffer("count", T.zeros(1))
            self.register_buffer("np", T.ones(2), persistent=False)
            self.w = nn.Parameter(T.ones(2))
            self.c = T.tensor([2.0, 3.0])

        def forward(self, x, y):
            self.count.add_(1)
            y.mul_(2)
            return x * self.count * self.np + self.c * self.w + T.tensor([1.0, 5.0]) + y

    return {"MLP": MLP, "CNN": CNN, "Block": Block, "KW": KW, "Nested": Nested,
            "Counter": Counter}


TORCH, KILN = build(torch), build(kiln)


def pair(name, train=False):
    """The torch and kiln instances of one model, kiln's weights copied from torch."""
    torch.manual_seed(0)
    tm = TORCH[name]()
    km = KILN[name]()
    sd = {k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    km.load_state_dict(sd)
    tm.train(train)
    km.train(train)
    return tm, km


def arrays(*shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def k(a):
    return kiln.from_numpy(np.array(a, copy=True))


def t(a):
    return torch.from_numpy(np.array(a, copy=True))


def np_of(x):
    return x.detach().numpy()


def specs(ep):
    sig = ep.graph_signature
    return ([(s.kind.name, s.arg.name, s.target, s.persistent) for s in sig.input_specs],
            [(s.kind.name, s.arg.name, s.target) for s in sig.output_specs])


def assert_same_signature(kep, tep):
    assert specs(kep) == specs(tep)
    # the printed signature is the same text
    assert str(kep.graph_signature) == str(tep.graph_signature)


# --- signatures and outputs against torch.export ----------------------------------------------

def test_mlp_signature_outputs_and_dynamic_batch():
    tm, km = pair("MLP")
    (x,) = arrays((3, 8))
    tb, kb = torch.export.Dim("batch", min=2, max=1024), Dim("batch", min=2, max=1024)
    tep = torch.export.export(tm, (t(x),), dynamic_shapes={"x": {0: tb}})
    kep = kiln.export.export(km, (k(x),), dynamic_shapes={"x": {0: kb}})
    assert_same_signature(kep, tep)
    assert kep.graph_signature.parameters == tep.graph_signature.parameters
    assert kep.graph_signature.buffers == ("scale",)
    assert kep.graph_signature.user_inputs == ("x",)
    assert kep.graph_signature.user_outputs == tep.graph_signature.user_outputs == ("mul",)
    assert list(kep.state_dict) == list(tep.state_dict)
    assert kep.state_dict["fc1.weight"] is km.fc1.weight  # shared, as torch's
    assert [str(s) for s in kep.range_constraints] == ["s0"]
    assert repr(list(kep.range_constraints.values())[0]) == "VR[2, 1024]"
    km_mod, tm_mod = kep.module(), tep.module()
    assert isinstance(km_mod, kiln.nn.Module)
    for n in (2, 5, 64):  # other sizes of the dynamic dimension
        (x2,) = arrays((n, 8), seed=n)
        out = km_mod(k(x2))
        assert out.shape == (n, 4)
        np.testing.assert_allclose(np_of(out), np_of(km(k(x2))), rtol=0, atol=0)
        np.testing.assert_allclose(np_of(out), np_of(tm_mod(t(x2))), rtol=1e-5, atol=1e-6)


def test_sequential_and_builtin_named_input():
    # Sequential.forward(self, input): torch names the placeholder `input` and the
    # parameters p_0_weight (no escaping of the builtin name or the leading digit)
    torch.manual_seed(2)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    km = kiln.nn.Sequential(kiln.nn.Linear(3, 5), kiln.nn.ReLU(), kiln.nn.Linear(5, 2))
    km.load_state_dict({n: k(v.detach().numpy()) for n, v in tm.state_dict().items()})
    (x,) = arrays((4, 3))
    tep = torch.export.export(tm, (t(x),))
    kep = kiln.export.export(km, (k(x),))
    assert_same_signature(kep, tep)
    assert kep.graph_signature.user_inputs == ("input",)
    assert kep.graph_signature.parameters[0] == "0.weight"
    assert specs(kep)[0][0][1] == "p_0_weight"
    np.testing.assert_allclose(np_of(kep.module()(k(x))), np_of(tep.module()(t(x))),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_of(kep.module()(input=k(x))), np_of(km(k(x))), rtol=0,
                               atol=0)


def test_cnn_batchnorm_eval():
    tm, km = pair("CNN")
    (x,) = arrays((2, 3, 8, 8))
    tep = torch.export.export(tm, (t(x),))
    kep = kiln.export.export(km, (k(x),))
    assert_same_signature(kep, tep)
    assert kep.graph_signature.buffers == ("bn.running_mean", "bn.running_var",
                                           "bn.num_batches_tracked")
    names = [n.name for n in kep.graph.nodes if n.op == "call_function"]
    assert names[:2] == ["conv2d", "batch_norm"]
    np.testing.assert_allclose(np_of(kep.module()(k(x))), np_of(tep.module()(t(x))),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError):  # torch too raises on a static size
        tep.module()(torch.zeros(3, 3, 8, 8))
    with pytest.raises(kiln.export.GuardFailed, match=r"x.size\(\)\[0\] == 2"):
        kep.module()(kiln.zeros(3, 3, 8, 8))


def test_cnn_batchnorm_train_and_run_decompositions():
    tm, km = pair("CNN", train=True)
    (x,) = arrays((4, 3, 8, 8))
    before = km.bn.running_mean.clone()
    tep = torch.export.export(tm, (t(x),))
    kep = kiln.export.export(km, (k(x),))
    # exporting runs the model on copies: the module's buffers are untouched
    assert (km.bn.running_mean == before).all() and int(km.bn.num_batches_tracked) == 0
    # torch's default IR keeps the in-place updates (no mutation outputs)
    assert_same_signature(kep, tep)
    assert any(n.target == "add_" for n in kep.graph.nodes)
    tdec = tep.run_decompositions({})
    kdec = kep.run_decompositions()
    assert_same_signature(kdec, tdec)
    assert specs(kdec)[1][:3] == [("BUFFER_MUTATION", "getitem_3", "bn.running_mean"),
                                  ("BUFFER_MUTATION", "getitem_4", "bn.running_var"),
                                  ("BUFFER_MUTATION", "add", "bn.num_batches_tracked")]
    assert not any(n.op == "call_method" and n.target.endswith("_")
                   for n in kdec.graph.nodes)
    # running it updates the module's buffers as eager does
    import copy
    ref = copy.deepcopy(km)
    mod = kdec.module()
    out = mod(k(x))
    np.testing.assert_allclose(np_of(out), np_of(ref(k(x))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_of(mod.bn.running_mean), np_of(ref.bn.running_mean),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np_of(mod.bn.running_var), np_of(ref.bn.running_var),
                               rtol=1e-6, atol=1e-7)
    assert int(mod.bn.num_batches_tracked) == 1
    np.testing.assert_allclose(np_of(out), np_of(tdec.module()(t(x))), rtol=1e-4, atol=1e-5)
    # the non-decomposed program mutates in place, with the same result
    ref2 = copy.deepcopy(ref)
    mod2 = kiln.export.export(ref, (k(x),)).module()
    np.testing.assert_allclose(np_of(mod2(k(x))), np_of(ref2(k(x))), rtol=1e-5, atol=1e-6)
    assert int(mod2.bn.num_batches_tracked) == 2


def test_transformer_block_dynamic_batch_and_sequence():
    tm, km = pair("Block")
    (x,) = arrays((2, 6, 16))
    # (torch guards s != 12 for the mask slice; kiln's graph has no such special case)
    tds = {"x": {0: torch.export.Dim("b", max=64), 1: torch.export.Dim("s", max=11)}}
    kds = {"x": {0: Dim("b", max=64), 1: Dim("s", min=1, max=12)}}
    tep = torch.export.export(tm, (t(x),), dynamic_shapes=tds)
    kep = kiln.export.export(km, (k(x),), dynamic_shapes=kds)
    assert_same_signature(kep, tep)
    assert kep.graph_signature.user_outputs == ("add_1",)
    text = str(kep)
    assert 'x: "f32[s0, s1, 16]"' in text and "Range constraints: {s0: VR[0, 64], " \
        "s1: VR[1, 12]}" in text
    assert 'add_1: "f32[s0, s1, 16]"' in text
    # the sizes are read from the input, not baked in
    assert sum(n.target is kiln.export.sym_size_int for n in kep.graph.nodes) == 2
    mod, tmod = kep.module(), tep.module()
    for shape in [(3, 7, 16), (1, 1, 16), (5, 12, 16), (2, 6, 16)]:
        (x2,) = arrays(shape, seed=sum(shape))
        out = mod(k(x2))
        np.testing.assert_allclose(np_of(out), np_of(km(k(x2))), rtol=0, atol=0)
        if shape[0] >= 2 and 2 <= shape[1] <= 11:  # torch specializes sizes 0 / 1
            np.testing.assert_allclose(np_of(out), np_of(tmod(t(x2))), rtol=1e-4, atol=1e-5)
    with pytest.raises(kiln.export.GuardFailed, match=r"x.size\(\)\[1\] <= 12"):
        mod(kiln.zeros(2, 13, 16))
    with pytest.raises(kiln.export.GuardFailed, match=r"x.size\(\)\[2\] == 16"):
        mod(kiln.zeros(2, 6, 8))
    with pytest.raises(kiln.export.GuardFailed, match=r"x.dim\(\) == 3"):
        mod(kiln.zeros(2, 6))


def test_kwargs_and_nested_outputs():
    tm, km = pair("KW")
    x, y, m = arrays((3, 4), (3, 4), (3, 4))
    tep = torch.export.export(tm, (t(x),), {"y": t(y), "mask": t(m)})
    kep = kiln.export.export(km, (k(x),), {"y": k(y), "mask": k(m)})
    assert_same_signature(kep, tep)
    assert kep.graph_signature.user_inputs == ("x", "y", "mask")
    assert kep.graph_signature.user_outputs == ("mul_1", "sum_1", "relu")
    x2, y2, m2 = arrays((3, 4), (3, 4), (3, 4), seed=1)
    out = kep.module()(k(x2), y=k(y2), mask=k(m2))
    ref = km(k(x2), y=k(y2), mask=k(m2))
    tout = tep.module()(t(x2), y=t(y2), mask=t(m2))
    assert isinstance(out, tuple) and isinstance(out[1], tuple) and set(out[1][1]) == {"a"}
    for a, b, c in [(out[0], ref[0], tout[0]), (out[1][0], ref[1][0], tout[1][0]),
                    (out[1][1]["a"], ref[1][1]["a"], tout[1][1]["a"])]:
        np.testing.assert_allclose(np_of(a), np_of(b), rtol=0, atol=0)
        np.testing.assert_allclose(np_of(a), np_of(c), rtol=1e-5, atol=1e-6)
    # y given positionally binds to the same parameter
    out2 = kep.module()(k(x2), k(y2), mask=k(m2))
    np.testing.assert_allclose(np_of(out2[0]), np_of(ref[0]), rtol=0, atol=0)
    with pytest.raises(ValueError, match="keyword mismatch"):
        kep.module()(k(x2), y=k(y2))
    with pytest.raises(ValueError, match="keyword mismatch"):
        tep.module()(t(x2), y=t(y2))
    with pytest.raises(ValueError, match="Trying to flatten user inputs"):
        kep.module()([k(x2)], y=k(y2), mask=k(m2))
    with pytest.raises(ValueError, match="Trying to flatten user inputs"):
        tep.module()([t(x2)], y=t(y2), mask=t(m2))


def test_list_and_int_inputs():
    tm, km = pair("Nested")
    x, a, b = arrays((2, 4), (2, 4), (2, 4))
    tep = torch.export.export(tm, (t(x), [t(a), t(b)], 3))
    kep = kiln.export.export(km, (k(x), [k(a), k(b)], 3))
    assert_same_signature(kep, tep)
    n_spec = kep.graph_signature.input_specs[-1]
    assert isinstance(n_spec.arg, kiln.export.ConstantArgument) and n_spec.arg.value == 3
    out = kep.module()(k(x), [k(a), k(b)], 3)
    np.testing.assert_allclose(np_of(out), np_of(tep.module()(t(x), [t(a), t(b)], 3)),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.export.GuardFailed, match="n == 3"):
        kep.module()(k(x), [k(a), k(b)], 4)


def test_custom_op_from_kiln_library():
    @kiln.library.custom_op("kiln_export_test::scale_add", mutates_args=())
    def kscale_add(x: kiln.Tensor, y: kiln.Tensor, alpha: float) -> kiln.Tensor:
        return x + alpha * y

    @kscale_add.register_fake
    def _(x, y, alpha):
        return kiln.empty_like(x)

    @torch.library.custom_op("kiln_export_test::scale_add", mutates_args=())
    def tscale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        return x + alpha * y

    @tscale_add.register_fake
    def _(x, y, alpha):
        return torch.empty_like(x)

    def build_op(T, op):
        class WithOp(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = T.nn.Linear(4, 4)

            def forward(self, x, y):
                return op(self.fc(x), y, 0.5).relu()
        return WithOp

    torch.manual_seed(1)
    tm = build_op(torch, torch.ops.kiln_export_test.scale_add)()
    km = build_op(kiln, kiln.ops.kiln_export_test.scale_add)()
    km.load_state_dict({n: k(v.detach().numpy()) for n, v in tm.state_dict().items()})
    x, y = arrays((3, 4), (3, 4))
    tep = torch.export.export(tm, (t(x), t(y)), dynamic_shapes=({0: torch.export.Dim("b")},
                                                              {0: torch.export.Dim("b")}))
    kep = kiln.export.export(km, (k(x), k(y)), dynamic_shapes=({0: Dim("b")}, {0: Dim("b")}))
    assert_same_signature(kep, tep)
    tnode = [n for n in tep.graph.nodes if "scale_add" in str(n.target)][0]
    knode = [n for n in kep.graph.nodes if "scale_add" in str(n.target)][0]
    assert knode.name == tnode.name == "scale_add"
    assert knode.target is kiln.ops.kiln_export_test.scale_add.default
    assert "kiln.ops.kiln_export_test.scale_add.default(" in kep.graph_module.code
    x2, y2 = arrays((6, 4), (6, 4), seed=3)
    out = kep.module()(k(x2), k(y2))
    np.testing.assert_allclose(np_of(out), np_of(km(k(x2), k(y2))), rtol=0, atol=0)
    np.testing.assert_allclose(np_of(out), np_of(tep.module()(t(x2), t(y2))), rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(kiln.export.GuardFailed, match=r"y.size\(\)\[0\] == x.size\(\)\[0\]"):
        kep.module()(k(x2), kiln.zeros(5, 4))
    # save / load finds the operator again by its name
    buf = io.BytesIO()
    kiln.export.save(kep, buf)
    out3 = kiln.export.load(buf.getvalue()).module()(k(x2), k(y2))
    np.testing.assert_allclose(np_of(out3), np_of(out), rtol=0, atol=0)


def test_mutations_constants_and_nonpersistent_buffers():
    tm, km = pair("Counter")
    x, y = arrays((2,), (2,))
    tep = torch.export.export(tm, (t(x), t(y)))
    kep = kiln.export.export(km, (k(x), k(y)))
    assert_same_signature(kep, tep)
    assert sorted(kep.constants) == sorted(tep.constants) == ["c", "lifted_tensor_0", "np"]
    assert sorted(kep.state_dict) == sorted(tep.state_dict) == ["count", "w"]
    assert float(km.count) == 0.0  # export did not run the mutation on the module
    tdec, kdec = tep.run_decompositions({}), kep.run_decompositions()
    assert_same_signature(kdec, tdec)
    assert specs(kdec)[1] == [("BUFFER_MUTATION", "add", "count"),
                              ("USER_INPUT_MUTATION", "mul", "y"),
                              ("USER_OUTPUT", "add_3", None)]
    for prog in (kep, kdec):
        mod = prog.module()
        assert sorted(mod.state_dict()) == ["count", "w"]
        y_k, y_ref = k(y), k(y)
        ref_model = KILN["Counter"]()
        ref_model.load_state_dict(km.state_dict())
        out, ref = mod(k(x), y_k), ref_model(k(x), y_ref)
        np.testing.assert_allclose(np_of(out), np_of(ref), rtol=0, atol=0)
        np.testing.assert_allclose(np_of(y_k), np_of(y_ref), rtol=0, atol=0)  # y mutated
        assert float(mod.count) == float(ref_model.count)
        km.count.zero_()


def test_buffer_assignment_becomes_a_mutation():
    class Acc(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", kiln.zeros(()))

        def forward(self, x):
            self.total = self.total + x.sum()
            return x * self.total

    ep = kiln.export.export(Acc(), (kiln.ones(3),)).run_decompositions()
    assert [s.kind.name for s in ep.graph_signature.output_specs] == ["BUFFER_MUTATION",
                                                                     "USER_OUTPUT"]
    mod = ep.module()
    np.testing.assert_allclose(np_of(mod(kiln.ones(3))), [3, 3, 3])
    np.testing.assert_allclose(np_of(mod(kiln.ones(3))), [6, 6, 6])
    assert float(mod.total) == 6.0


# --- dynamic shapes ---------------------------------------------------------------------------

class Branchy(kiln.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x + 1
        return x - 1


def test_guard_on_named_dim_is_a_constraint_violation():
    with pytest.raises(kiln.export.UserError, match=r"Constraints violated \(b\)") as info:
        kiln.export.export(Branchy(), (kiln.zeros(3),), dynamic_shapes=({0: Dim("b")},))
    assert info.value.error_type == kiln.export.UserErrorType.CONSTRAINT_VIOLATION
    assert "if x.shape[0] > 4:" in str(info.value)  # the line that specializes
    with pytest.raises(torch._dynamo.exc.UserError, match="Constraints violated"):
        torch.export.export(Branchy2(), (torch.zeros(3),),
                            dynamic_shapes=({0: torch.export.Dim("b")},))


class Branchy2(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x + 1
        return x - 1


def test_guard_within_range_becomes_a_runtime_assertion():
    ep = kiln.export.export(Branchy(), (kiln.zeros(3),), dynamic_shapes=({0: Dim("b", max=4)},))
    assert any(n.target is kiln.export._assert_scalar for n in ep.graph.nodes)
    mod = ep.module()
    np.testing.assert_allclose(np_of(mod(kiln.zeros(4))), [-1] * 4)
    np.testing.assert_allclose(np_of(mod(kiln.zeros(2))), [-1] * 2)
    with pytest.raises(kiln.export.GuardFailed, match="<= 4"):
        mod(kiln.zeros(5))


def test_auto_dims_specialize_and_dynamic_dims_raise():
    ep = kiln.export.export(Branchy(), (kiln.zeros(3),), dynamic_shapes=({0: Dim.AUTO},))
    assert ep.range_constraints == {}
    with pytest.raises(kiln.export.GuardFailed, match=r"x.size\(\)\[0\] == 3"):
        ep.module()(kiln.zeros(5))
    with pytest.raises(kiln.export.UserError, match="Dim.DYNAMIC"):
        kiln.export.export(Branchy(), (kiln.zeros(3),), dynamic_shapes=({0: Dim.DYNAMIC},))
    # AUTO dims that stay dynamic do
    ep = kiln.export.export(KILN["MLP"](), (kiln.zeros(3, 8),),
                            dynamic_shapes={"x": (Dim.AUTO, Dim.STATIC)})
    assert [str(s) for s in ep.range_constraints] == ["s0"]
    assert ep.module()(kiln.zeros(9, 8)).shape == (9, 4)


def test_dims_that_must_be_equal():
    class Mul(kiln.nn.Module):
        def forward(self, x, y):
            return x * y

    args = (kiln.ones(3, 4), kiln.ones(3, 4))
    with pytest.raises(kiln.export.UserError, match=r"Constraints violated \(a, b\)"):
        kiln.export.export(Mul(), args, dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    with pytest.raises(kiln.export.UserError, match="Constraints violated"):
        kiln.export.export(Mul(), args, dynamic_shapes={"x": {0: Dim("a")}, "y": None})
    ep = kiln.export.export(Mul(), args, dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("a")}})
    assert ep.module()(kiln.ones(6, 4), kiln.ones(6, 4)).shape == (6, 4)
    with pytest.raises(kiln.export.GuardFailed, match="y.size"):
        ep.module()(kiln.ones(6, 4), kiln.ones(5, 4))


def test_dynamic_shapes_validation():
    m = KILN["MLP"]()
    x = kiln.zeros(3, 8)
    with pytest.raises(kiln.export.UserError, match="outside the range"):
        kiln.export.export(m, (x,), dynamic_shapes={"x": {0: Dim("b", min=4)}})
    with pytest.raises(kiln.export.UserError, match="not inputs"):
        kiln.export.export(m, (x,), dynamic_shapes={"z": {0: Dim("b")}})
    with pytest.raises(kiln.export.UserError, match="out of range"):
        kiln.export.export(m, (x,), dynamic_shapes={"x": {2: Dim("b")}})
    with pytest.raises(ValueError, match="smaller than min"):
        Dim("b", min=5, max=4)
    with pytest.raises(NotImplementedError, match="derived dims"):
        Dim("b") * 2
    assert repr(Dim("batch", min=2, max=1024)) == "Dim('batch', min=2, max=1024)"
    assert repr(Dim.AUTO) == repr(torch.export.Dim.AUTO) == "DimHint(AUTO)"


def test_data_dependent_control_flow_errors_clearly():
    class D(kiln.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    class D2(kiln.nn.Module):
        def forward(self, x):
            return x * int(x.max())

    class TD(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    with pytest.raises(kiln.export.GuardOnDataDependentSymNode,
                       match="Could not guard on data-dependent expression") as info:
        kiln.export.export(D(), (kiln.ones(3),))
    assert "if x.sum() > 0:" in str(info.value) and "test_export.py" in str(info.value)
    with pytest.raises(RuntimeError, match="Could not guard on data-dependent expression"):
        torch.export.export(TD(), (torch.ones(3),))
    with pytest.raises(kiln.export.GuardOnDataDependentSymNode, match=r"int\(max_1\)"):
        kiln.export.export(D2(), (kiln.ones(3),))

    class Item(kiln.nn.Module):  # reading a value without branching on it is fine
        def forward(self, x):
            return x * x.sum().item()

    ep = kiln.export.export(Item(), (kiln.ones(3),))
    np.testing.assert_allclose(np_of(ep.module()(k([1.0, 2.0, 3.0]))), [6.0, 12.0, 18.0])


# --- the ExportedProgram object ---------------------------------------------------------------

def test_call_and_str_like_torch():
    tm, km = pair("MLP")
    (x,) = arrays((3, 8))
    tep = torch.export.export(tm, (t(x),))
    kep = kiln.export.export(km, (k(x),))
    with pytest.raises(RuntimeError) as tinfo:
        tep(t(x))
    with pytest.raises(RuntimeError) as kinfo:
        kep(k(x))
    assert str(kinfo.value) == str(tinfo.value)
    text = str(kep)
    assert text.startswith("ExportedProgram:\n    class GraphModule(kiln.nn.Module):\n"
                           "        def forward(self, p_fc1_weight: \"f32[16, 8]\"")
    assert 'linear: "f32[3, 16]" = kiln.nn.functional.linear(x, p_fc1_weight, p_fc1_bias)' \
        in text
    assert "Graph signature: \n    # inputs\n    p_fc1_weight: PARAMETER target='fc1.weight'" \
        in text
    assert text.rstrip().endswith("Range constraints: {}")
    assert kep.example_inputs[0][0] is not None and kep.example_inputs[1] == {}
    assert [n for n, _ in kep.named_parameters()] == list(tep.graph_signature.parameters)
    # the mode is part of the graph: module() refuses to switch it, as torch's
    for name in ("train", "eval"):
        with pytest.raises(NotImplementedError) as tinfo:
            getattr(tep.module(), name)()
        with pytest.raises(NotImplementedError) as kinfo:
            getattr(kep.module(), name)()
        assert str(kinfo.value) == str(tinfo.value)


def test_export_rejects_bad_arguments():
    m = KILN["MLP"]()
    with pytest.raises(kiln.export.UserError, match="tuple"):
        kiln.export.export(m, kiln.zeros(3, 8))
    with pytest.raises(kiln.export.UserError, match="do not match"):
        kiln.export.export(m, (kiln.zeros(3, 8), kiln.zeros(1)))
    with pytest.raises(kiln.export.UserError, match="kiln.nn.Module"):
        kiln.export.export(lambda x: x, (kiln.zeros(1),))


# --- save / load ------------------------------------------------------------------------------

def roundtrip(ep, path=None):
    if path is not None:
        kiln.export.save(ep, path)
        return kiln.export.load(path)
    buf = io.BytesIO()
    kiln.export.save(ep, buf)
    buf.seek(0)
    return kiln.export.load(buf)


def test_save_load_roundtrip(tmp_path):
    _, km = pair("Block")
    (x,) = arrays((2, 6, 16))
    ep = kiln.export.export(km, (k(x),), dynamic_shapes={"x": {0: Dim("b", max=64)}})
    ep2 = roundtrip(ep, tmp_path / "block.kep")
    assert str(ep2) == str(ep)
    assert specs(ep2) == specs(ep)
    assert ep2.range_constraints == ep.range_constraints
    for name, v in ep.state_dict.items():
        np.testing.assert_array_equal(np_of(ep2.state_dict[name]), np_of(v))
    np.testing.assert_array_equal(np_of(ep2.example_inputs[0][0]), x)
    (x2,) = arrays((5, 6, 16), seed=4)
    np.testing.assert_array_equal(np_of(ep2.module()(k(x2))), np_of(km(k(x2))))
    with pytest.raises(kiln.export.GuardFailed, match="<= 64"):
        ep2.module()(kiln.zeros(65, 6, 16))
    with zipfile.ZipFile(tmp_path / "block.kep") as z:
        assert "kiln_export/code.py" in z.namelist()
        assert json.loads(z.read("kiln_export/program.json"))["format"] == "kiln.export"

    # mutations, constants, keyword inputs and nested outputs survive too
    _, kc = pair("Counter")
    a, b = arrays((2,), (2,))
    dec = roundtrip(kiln.export.export(kc, (k(a), k(b))).run_decompositions())
    assert specs(dec)[1][0] == ("BUFFER_MUTATION", "add", "count")
    assert sorted(dec.constants) == ["c", "lifted_tensor_0", "np"]
    mod = dec.module()
    yb = k(b)
    mod(k(a), yb)
    assert float(mod.count) == 1.0
    np.testing.assert_allclose(np_of(yb), b * 2)
    _, kk = pair("KW")
    x, y, m = arrays((3, 4), (3, 4), (3, 4))
    kw = roundtrip(kiln.export.export(kk, (k(x),), {"y": k(y), "mask": k(m)}))
    out = kw.module()(k(x), y=k(y), mask=k(m))
    np.testing.assert_array_equal(np_of(out[1][1]["a"]),
                                  np_of(kk(k(x), y=k(y), mask=k(m))[1][1]["a"]))


@pytest.fixture(scope="module")
def saved_mlp():
    _, km = pair("MLP")
    ep = kiln.export.export(km, (kiln.zeros(3, 8),), dynamic_shapes={"x": {0: Dim("b")}})
    buf = io.BytesIO()
    kiln.export.save(ep, buf)
    return buf.getvalue()


def test_load_corrupted_bytes_raise_python_errors(saved_mlp):
    rng = random.Random(12345)
    failures = 0
    x = kiln.ones(4, 8)
    for _ in range(150):
        data = bytearray(saved_mlp)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        try:
            ep = kiln.export.load(bytes(data))
        except kiln.export.ExportSerializationError as e:
            assert "not a valid kiln exported program" in str(e)
            failures += 1
            continue
        ep.module()(x)  # a flip in bytes nothing checks (a zip timestamp): still a program
    assert failures > 100
    # truncations
    for n in (0, 1, 10, len(saved_mlp) // 2, len(saved_mlp) - 1):
        with pytest.raises(kiln.export.ExportSerializationError):
            kiln.export.load(saved_mlp[:n])


def test_load_forged_content_raises_python_errors(saved_mlp):
    with zipfile.ZipFile(io.BytesIO(saved_mlp)) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    rng = random.Random(7)
    outcomes = {"error": 0, "loaded": 0}
    for _ in range(120):
        key = rng.choice(["kiln_export/program.json", "kiln_export/weights.safetensors"])
        blob = bytearray(parts[key])
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(blob) if key.endswith("json") else min(len(blob), 600))
            blob[i] = ord(rng.choice('0123456789{}[]",:aZ_.-')) if rng.random() < 0.7 \
                else rng.randrange(256)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:  # re-zipped: the CRCs are right
            for n, c in parts.items():
                z.writestr(n, bytes(blob) if n == key else c)
        try:
            kiln.export.load(buf.getvalue())
            outcomes["loaded"] += 1
        except kiln.export.ExportSerializationError:
            outcomes["error"] += 1
    assert outcomes["error"] > 50


def _rezip(parts, **changes):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, c in {**parts, **changes}.items():
            z.writestr(n, c)
    return buf.getvalue()


def test_load_refuses_code_and_foreign_files(saved_mlp, tmp_path):
    with zipfile.ZipFile(io.BytesIO(saved_mlp)) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    prog = json.loads(parts["kiln_export/program.json"])

    def forged(mutate):
        p = json.loads(json.dumps(prog))
        mutate(p)
        return _rezip(parts, **{"kiln_export/program.json": json.dumps(p)})

    def fn_target(p, path):
        node = next(n for n in p["graph"]["nodes"] if n["op"] == "call_function")
        node["target"] = {"fn": path}

    def node_name(p, name):
        node = next(n for n in p["graph"]["nodes"] if n["op"] == "call_function")
        node["name"] = name

    sentinel = tmp_path / "pwned"
    opener = f"open({str(sentinel)!r}, 'w')"
    cases = [lambda p: fn_target(p, "os.system"), lambda p: fn_target(p, "kiln.os.system"),
             lambda p: fn_target(p, "kiln.__builtins__.eval"),
             lambda p: fn_target(p, "builtins.open"),
             lambda p: fn_target(p, "kiln.np.save"),
             lambda p: node_name(p, f"linear = {opener}#"),
             lambda p: p["graph"]["nodes"][-2].update(op="call_method", target="__class__"),
             lambda p: p.update(format="something else"),
             lambda p: p.update(version=99),
             lambda p: p["signature"]["inputs"].pop()]
    for mutate in cases:
        with pytest.raises(kiln.export.ExportSerializationError):
            kiln.export.load(forged(mutate))
    assert not sentinel.exists()  # nothing from the file was executed
    # foreign files: not a zip, a zip of something else, torch.export's own format
    with pytest.raises(kiln.export.ExportSerializationError, match="not a zip"):
        kiln.export.load(b"hello world")
    with pytest.raises(kiln.export.ExportSerializationError, match="program.json"):
        kiln.export.load(_rezip({"other.txt": b"x"}))
    tm, _ = pair("MLP")
    torch.export.save(torch.export.export(tm, (torch.zeros(3, 8),)), tmp_path / "t.pt2")
    with pytest.raises(kiln.export.ExportSerializationError):
        kiln.export.load(tmp_path / "t.pt2")
    # an unregistered custom operator is named in the error
    with pytest.raises(kiln.export.ExportSerializationError, match="no_such_ns::op"):
        kiln.export.load(forged(lambda p: fn_target(p, "kiln.ops.no_such_ns.op.default")))
