"""kiln.nn modules against their torch.nn twins: the same constructor arguments, torch's
weights copied into kiln through state_dict -> numpy, then the outputs, the input gradients,
the parameter gradients and the buffers after forward (BatchNorm's running statistics) are
compared in float32 and float64, with the oracle's per-dtype tolerances times `tol`. Every
compared module case is counted in the suite's "oracle: N ops, M cases" line as nn.<name>."""
import dataclasses

import numpy as np
import pytest
import torch

import kiln
import oracle


@dataclasses.dataclass
class ModCase:
    name: str
    make: object            # make(nn) -> module, nn = torch.nn or kiln.nn
    inputs: list            # per input: a shape (float input) or ("long", shape, high)
    train: bool = True      # run in training mode (False: eval)
    tol: float = 10.0
    domain: str = "real"    # float inputs: "real", "prob" (0.05..0.95), "logprob", "pos"
    grad_inputs: bool = True

    def __repr__(self):
        return self.name


def _ce_prob_target(shape):
    return ("prob", shape)


CASES = [
    ModCase("Linear", lambda nn: nn.Linear(5, 3), [(4, 5)]),
    ModCase("Linear_3d", lambda nn: nn.Linear(5, 3), [(2, 4, 5)]),
    ModCase("Linear_nobias", lambda nn: nn.Linear(5, 3, bias=False), [(4, 5)]),
    ModCase("Bilinear", lambda nn: nn.Bilinear(4, 3, 2), [(5, 4), (5, 3)]),
    ModCase("Bilinear_nobias", lambda nn: nn.Bilinear(4, 3, 2, bias=False), [(5, 4), (5, 3)]),
    ModCase("Embedding", lambda nn: nn.Embedding(10, 4), [("long", (3, 5), 10)]),
    ModCase("Embedding_padding", lambda nn: nn.Embedding(10, 4, padding_idx=0),
            [("long", (3, 5), 10)]),
    ModCase("Embedding_padding_neg", lambda nn: nn.Embedding(10, 4, padding_idx=-1),
            [("long", (7,), 10)]),
    ModCase("LayerNorm", lambda nn: nn.LayerNorm(6), [(3, 6)]),
    ModCase("LayerNorm_2d", lambda nn: nn.LayerNorm((2, 6)), [(3, 2, 6)]),
    ModCase("LayerNorm_noaffine", lambda nn: nn.LayerNorm(6, elementwise_affine=False),
            [(3, 6)]),
    ModCase("LayerNorm_nobias", lambda nn: nn.LayerNorm(6, bias=False, eps=1e-3), [(4, 6)]),
    ModCase("RMSNorm", lambda nn: nn.RMSNorm(6), [(3, 6)]),
    ModCase("RMSNorm_eps", lambda nn: nn.RMSNorm([2, 6], eps=1e-5), [(3, 2, 6)]),
    ModCase("RMSNorm_noaffine", lambda nn: nn.RMSNorm(6, elementwise_affine=False), [(3, 6)]),
    ModCase("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [(3, 4, 5)]),
    ModCase("GroupNorm_4d", lambda nn: nn.GroupNorm(3, 6, eps=1e-3), [(2, 6, 2, 3)]),
    ModCase("GroupNorm_noaffine", lambda nn: nn.GroupNorm(1, 4, affine=False), [(3, 4)]),
    ModCase("BatchNorm1d_train", lambda nn: nn.BatchNorm1d(4), [(6, 4)]),
    ModCase("BatchNorm1d_train_3d", lambda nn: nn.BatchNorm1d(4), [(5, 4, 3)]),
    ModCase("BatchNorm1d_eval", lambda nn: nn.BatchNorm1d(4), [(6, 4)], train=False),
    ModCase("BatchNorm1d_cumulative", lambda nn: nn.BatchNorm1d(4, momentum=None), [(6, 4)]),
    ModCase("BatchNorm1d_noaffine", lambda nn: nn.BatchNorm1d(4, affine=False), [(6, 4)]),
    ModCase("BatchNorm1d_nostats", lambda nn: nn.BatchNorm1d(4, track_running_stats=False),
            [(6, 4)]),
    ModCase("BatchNorm1d_nostats_eval",
            lambda nn: nn.BatchNorm1d(4, track_running_stats=False), [(6, 4)], train=False),
    ModCase("BatchNorm2d_train", lambda nn: nn.BatchNorm2d(3, momentum=0.3), [(4, 3, 2, 2)]),
    ModCase("BatchNorm2d_eval", lambda nn: nn.BatchNorm2d(3), [(4, 3, 2, 2)], train=False),
    ModCase("Dropout_p0", lambda nn: nn.Dropout(0.0), [(4, 5)]),
    ModCase("Dropout_eval", lambda nn: nn.Dropout(0.5), [(4, 5)], train=False),
    ModCase("ReLU", lambda nn: nn.ReLU(), [(4, 5)]),
    ModCase("LeakyReLU", lambda nn: nn.LeakyReLU(0.2), [(4, 5)]),
    ModCase("GELU", lambda nn: nn.GELU(), [(4, 5)]),
    ModCase("GELU_tanh", lambda nn: nn.GELU("tanh"), [(4, 5)]),
    ModCase("SiLU", lambda nn: nn.SiLU(), [(4, 5)]),
    ModCase("Tanh", lambda nn: nn.Tanh(), [(4, 5)]),
    ModCase("Sigmoid", lambda nn: nn.Sigmoid(), [(4, 5)]),
    ModCase("Softplus", lambda nn: nn.Softplus(beta=2.0), [(4, 5)]),
    ModCase("Softmax", lambda nn: nn.Softmax(dim=1), [(4, 5)]),
    ModCase("Softmax_dim0", lambda nn: nn.Softmax(dim=0), [(4, 5, 2)]),
    ModCase("LogSoftmax", lambda nn: nn.LogSoftmax(dim=-1), [(4, 5)]),
    ModCase("Identity", lambda nn: nn.Identity(3, foo=1), [(4, 5)]),
    ModCase("Flatten", lambda nn: nn.Flatten(), [(2, 3, 4)]),
    ModCase("Flatten_01", lambda nn: nn.Flatten(0, 1), [(2, 3, 4)]),
    ModCase("Unflatten", lambda nn: nn.Unflatten(1, (2, 2)), [(3, 4)]),
    ModCase("Sequential_mlp",
            lambda nn: nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.LayerNorm(8),
                                     nn.Linear(8, 3), nn.LogSoftmax(dim=-1)), [(4, 5)]),
    ModCase("Sequential_bn",
            lambda nn: nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU(),
                                     nn.Dropout(0.0), nn.Linear(6, 2)), [(7, 5)]),
    # losses: input(s), then the target
    ModCase("MSELoss", lambda nn: nn.MSELoss(), [(4, 5), (4, 5)]),
    ModCase("MSELoss_sum", lambda nn: nn.MSELoss(reduction="sum"), [(4, 5), (4, 5)]),
    ModCase("MSELoss_none", lambda nn: nn.MSELoss(reduction="none"), [(4, 5), (4, 5)]),
    ModCase("L1Loss", lambda nn: nn.L1Loss(), [(4, 5), (4, 5)]),
    ModCase("L1Loss_none", lambda nn: nn.L1Loss(reduction="none"), [(3, 5), (3, 5)]),
    ModCase("SmoothL1Loss", lambda nn: nn.SmoothL1Loss(), [(4, 5), (4, 5)]),
    ModCase("SmoothL1Loss_beta", lambda nn: nn.SmoothL1Loss(beta=0.5, reduction="sum"),
            [(4, 5), (4, 5)]),
    ModCase("HuberLoss", lambda nn: nn.HuberLoss(delta=0.7), [(4, 5), (4, 5)]),
    ModCase("CrossEntropyLoss", lambda nn: nn.CrossEntropyLoss(), [(6, 5), ("long", (6,), 5)]),
    ModCase("CrossEntropyLoss_ignore",
            lambda nn: nn.CrossEntropyLoss(ignore_index=1), [(6, 5), ("long", (6,), 5)]),
    ModCase("CrossEntropyLoss_smoothing",
            lambda nn: nn.CrossEntropyLoss(label_smoothing=0.2), [(6, 5), ("long", (6,), 5)]),
    ModCase("CrossEntropyLoss_weight",
            lambda nn: nn.CrossEntropyLoss(weight=_class_weight(nn, 5)),
            [(6, 5), ("long", (6,), 5)]),
    ModCase("CrossEntropyLoss_weight_smoothing_sum",
            lambda nn: nn.CrossEntropyLoss(weight=_class_weight(nn, 5), label_smoothing=0.1,
                                           reduction="sum"), [(6, 5), ("long", (6,), 5)]),
    ModCase("CrossEntropyLoss_none_4d",
            lambda nn: nn.CrossEntropyLoss(reduction="none"),
            [(2, 4, 3, 2), ("long", (2, 3, 2), 4)]),
    ModCase("CrossEntropyLoss_probs", lambda nn: nn.CrossEntropyLoss(),
            [(6, 5), ("prob", (6, 5))]),
    ModCase("CrossEntropyLoss_unbatched", lambda nn: nn.CrossEntropyLoss(),
            [(5,), ("long", (), 5)]),
    ModCase("NLLLoss", lambda nn: nn.NLLLoss(), [(6, 5), ("long", (6,), 5)],
            domain="logprob"),
    ModCase("NLLLoss_weight_none",
            lambda nn: nn.NLLLoss(weight=_class_weight(nn, 5), reduction="none"),
            [(6, 5), ("long", (6,), 5)], domain="logprob"),
    ModCase("NLLLoss_ignore_sum",
            lambda nn: nn.NLLLoss(ignore_index=2, reduction="sum"),
            [(6, 5), ("long", (6,), 5)], domain="logprob"),
    ModCase("BCELoss", lambda nn: nn.BCELoss(), [(4, 3), ("prob", (4, 3))], domain="prob"),
    ModCase("BCELoss_weight", lambda nn: nn.BCELoss(weight=_class_weight(nn, 3)),
            [(4, 3), ("prob", (4, 3))], domain="prob"),
    ModCase("BCEWithLogitsLoss", lambda nn: nn.BCEWithLogitsLoss(),
            [(4, 3), ("prob", (4, 3))]),
    ModCase("BCEWithLogitsLoss_posweight",
            lambda nn: nn.BCEWithLogitsLoss(pos_weight=_class_weight(nn, 3), reduction="sum"),
            [(4, 3), ("prob", (4, 3))]),
    ModCase("KLDivLoss_batchmean", lambda nn: nn.KLDivLoss(reduction="batchmean"),
            [(4, 5), ("prob", (4, 5))], domain="logprob"),
    ModCase("KLDivLoss_logtarget",
            lambda nn: nn.KLDivLoss(reduction="sum", log_target=True),
            [(4, 5), ("logprob", (4, 5))], domain="logprob"),
]


def _class_weight(nn, n):
    """Fixed per-class weights, as a tensor of the library that owns `nn`."""
    values = [0.5 + 0.25 * i for i in range(n)]
    return (torch if nn is torch.nn else kiln).tensor(values)


def _array(rng, spec, dtype, domain):
    if isinstance(spec, tuple) and spec and spec[0] == "long":
        _, shape, high = spec
        return rng.integers(0, high, size=shape).astype(np.int64)
    if isinstance(spec, tuple) and spec and spec[0] in ("prob", "logprob"):
        kind, shape = spec
        a = rng.uniform(0.05, 1.0, size=shape)
        if len(shape) >= 2 and domain in ("logprob", "real"):  # rows summing to 1
            a = a / a.sum(axis=1, keepdims=True)
        elif len(shape) >= 2:
            a = rng.uniform(0.0, 1.0, size=shape)
        return (np.log(a) if kind == "logprob" else a).astype(dtype)
    a = rng.uniform(-2.0, 2.0, size=spec)
    if domain == "wide":  # past the bends of hardswish / hardsigmoid / relu6 (+-3, 6)
        a = rng.uniform(-8.0, 8.0, size=spec)
    elif domain == "prob":
        a = rng.uniform(0.05, 0.95, size=spec)
    elif domain == "logprob":
        a = rng.uniform(0.05, 1.0, size=spec)
        a = np.log(a / a.sum(axis=-1, keepdims=True)) if len(spec) else np.log(a)
    return a.astype(dtype)


def _copy_state(tmod, kmod):
    sd = {k: kiln.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()}
    kmod.load_state_dict(sd)


def _outputs(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def run_module_case(case, dtype):
    torch.manual_seed(oracle._seed("nn", case.name))
    rng = np.random.default_rng(oracle._seed("nn-input", case.name, dtype))
    tmod, kmod = case.make(torch.nn), case.make(kiln.nn)
    tdt, kdt = getattr(torch, dtype), getattr(kiln, dtype)
    tmod.to(tdt)
    kmod.to(kdt)
    where = f"nn.{case.name}[{dtype}]"
    # Same architecture, same state_dict keys (and order), then torch's values in kiln.
    assert list(kmod.state_dict().keys()) == list(tmod.state_dict().keys()), where
    assert [n for n, _ in kmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    assert [n for n, _ in kmod.named_buffers()] == [n for n, _ in tmod.named_buffers()]
    assert repr(kmod) == repr(tmod), where
    _copy_state(tmod, kmod)
    tmod.train(case.train)
    kmod.train(case.train)
    ins_t, ins_k = [], []
    for i, spec in enumerate(case.inputs):
        a = _array(rng, spec, np.dtype(dtype), case.domain if i == 0 else "real")
        t = torch.tensor(a)
        k = kiln.tensor(a)
        if t.is_floating_point() and case.grad_inputs and i == 0:
            t.requires_grad_(True)
            k.requires_grad_(True)
        ins_t.append(t)
        ins_k.append(k)
    tr = tmod(*ins_t)
    kr = kmod(*ins_k)
    oracle.assert_same(kr, tr, case.tol, where=where + " output")
    # Buffers after forward (BatchNorm running statistics and num_batches_tracked).
    for (name, tb), (_, kb) in zip(tmod.named_buffers(), kmod.named_buffers()):
        oracle.assert_same(kb, tb, case.tol, where=f"{where} buffer {name}")
    n = 1
    if tr.requires_grad:
        g = rng.uniform(-1, 1, size=tuple(tr.shape)).astype(np.dtype(dtype))
        tr.backward(torch.tensor(g))
        kr.backward(kiln.tensor(g))
        for i, (t, k) in enumerate(zip(ins_t, ins_k)):
            if t.requires_grad:
                oracle.assert_same(k.grad, t.grad, case.tol * 4, where=f"{where} grad of input {i}")
        for (name, tp), (_, kp) in zip(tmod.named_parameters(), kmod.named_parameters()):
            if tp.grad is None:
                assert kp.grad is None or not oracle.to_numpy(kp.grad).any(), f"{where} {name}"
                continue
            assert kp.grad is not None, f"{where}: no grad for parameter {name}"
            oracle.assert_same(kp.grad, tp.grad, case.tol * 4, where=f"{where} grad of {name}")
        n += 1
    oracle.record("nn." + case.name, n)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_module_vs_torch(case, dtype):
    run_module_case(case, dtype)


# --- functional forms ---------------------------------------------------------------------

F_OPS = [
    oracle.Op("F.linear", lambda L, x, w, b: oracle.nnf(L).linear(x, w, b),
              [((4, 5), (3, 5), (3,)), ((2, 4, 5), (3, 5), (3,))], dtypes=["float32", "float64"]),
    oracle.Op("F.bilinear", lambda L, a, b, w: _F(L).bilinear(a, b, w),
              [((5, 4), (5, 3), (2, 4, 3))], dtypes=["float32", "float64"]),
    oracle.Op("F.layer_norm", lambda L, x, w, b: _F(L).layer_norm(x, (6,), w, b),
              [((3, 6), (6,), (6,)), (("t", (6, 6)), (6,), (6,)), ((40, 768), (768,), (768,))],
              dtypes=["bfloat16", "float32", "float64"], tol=10),
    oracle.Op("F.rms_norm", lambda L, x, w: _F(L).rms_norm(x, [6], w),
              [((3, 6), (6,))], dtypes=["bfloat16", "float32", "float64"], tol=10),
    oracle.Op("F.group_norm", lambda L, x, w, b: _F(L).group_norm(x, 2, w, b),
              [((3, 4, 5), (4,), (4,))], dtypes=["float32", "float64"], tol=10),
    oracle.Op("F.batch_norm_train",
              lambda L, x, w, b: _F(L).batch_norm(x, None, None, w, b, training=True),
              [((6, 4), (4,), (4,)), ((3, 4, 2), (4,), (4,))], dtypes=["float32", "float64"],
              tol=10),
    oracle.Op("F.relu", lambda L, x: _F(L).relu(x), [((4, 5),)],
              dtypes=["float32", "float64"]),
    oracle.Op("F.leaky_relu", lambda L, x: _F(L).leaky_relu(x, 0.1), [((4, 5),)],
              dtypes=["float32", "float64"]),
    oracle.Op("F.gelu", lambda L, x, **kw: _F(L).gelu(x, **kw), [((4, 5),)],
              kwargs=[{}, {"approximate": "tanh"}], dtypes=["float32", "float64"]),
    oracle.Op("F.silu", lambda L, x: _F(L).silu(x), [((4, 5),)], dtypes=["float32", "float64"]),
    oracle.Op("F.softmax", lambda L, x, **kw: _F(L).softmax(x, **kw), [((4, 5),)],
              kwargs=[{"dim": 0}, {"dim": -1}], dtypes=["float32", "float64"]),
    oracle.Op("F.log_softmax", lambda L, x, **kw: _F(L).log_softmax(x, **kw), [((4, 5),)],
              kwargs=[{"dim": 1}], dtypes=["float32", "float64"]),
    oracle.Op("F.mse_loss", lambda L, x, y, **kw: _F(L).mse_loss(x, y, **kw), [((4, 5), (4, 5))],
              kwargs=[{}, {"reduction": "sum"}, {"reduction": "none"}],
              dtypes=["float32", "float64"]),
    oracle.Op("F.l1_loss", lambda L, x, y, **kw: _F(L).l1_loss(x, y, **kw), [((4, 5), (4, 5))],
              kwargs=[{}, {"reduction": "sum"}], dtypes=["float32", "float64"]),
    oracle.Op("F.smooth_l1_loss", lambda L, x, y, **kw: _F(L).smooth_l1_loss(x, y, **kw),
              [((4, 5), (4, 5))], kwargs=[{}, {"beta": 0.3}], dtypes=["float32", "float64"]),
    oracle.Op("F.huber_loss", lambda L, x, y, **kw: _F(L).huber_loss(x, y, **kw),
              [((4, 5), (4, 5))], kwargs=[{}, {"delta": 2.0}], dtypes=["float32", "float64"]),
    oracle.Op("F.binary_cross_entropy_with_logits",
              lambda L, x, y, **kw: _F(L).binary_cross_entropy_with_logits(x, y, **kw),
              [((4, 5), (4, 5))], kwargs=[{}, {"reduction": "sum"}],
              domain=("real", "small_pos"), dtypes=["float32", "float64"]),
]


def _F(L):
    return torch.nn.functional if L is torch else kiln.nn.functional


@pytest.mark.parametrize("op,dtype", oracle.params(F_OPS))
def test_functional_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


def test_functional_losses_reject_shape_mismatch():
    # Deliberate difference: kiln requires equal shapes where torch broadcasts with a warning.
    with pytest.raises(Exception):
        kiln.nn.functional.mse_loss(kiln.ones(4, 1), kiln.ones(4))
    oracle.record("nn.mse_loss_shape_mismatch")


def test_dropout_train_statistics():
    kiln.manual_seed(0)
    x = kiln.ones(200, 100)
    d = kiln.nn.Dropout(0.3)
    y = d(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.02
    vals = y[y != 0]
    np.testing.assert_allclose(vals.numpy(), 1 / 0.7, rtol=1e-6)
    d.eval()
    assert d(x)._is_same(x) or bool((d(x) == x).all())
    oracle.record("nn.Dropout_train")


ERROR_CASES = {
    "Linear_wrong_in_features": lambda nn, L: nn.Linear(3, 2)(L.ones(4, 5)),
    "Dropout_bad_p": lambda nn, L: nn.Dropout(1.5),
    "GroupNorm_indivisible": lambda nn, L: nn.GroupNorm(3, 4),
    "BatchNorm1d_bad_dim": lambda nn, L: nn.BatchNorm1d(3)(L.ones(2, 3, 4, 5)),
    "BatchNorm2d_bad_dim": lambda nn, L: nn.BatchNorm2d(3)(L.ones(2, 3)),
    "Embedding_index_out_of_range": lambda nn, L: nn.Embedding(4, 2)(L.tensor([5])),
    "CrossEntropy_bad_reduction": lambda nn, L: nn.CrossEntropyLoss(reduction="avg")(
        L.ones(2, 3), L.tensor([0, 1])),
    "LayerNorm_shape_mismatch": lambda nn, L: nn.LayerNorm(4)(L.ones(2, 3)),
    "Sequential_index": lambda nn, L: nn.Sequential(nn.ReLU())[3],
    "ModuleList_index": lambda nn, L: nn.ModuleList([nn.ReLU()])[-2],
    "ModuleDict_key": lambda nn, L: nn.ModuleDict({"a": nn.ReLU()})["b"],
    "load_state_dict_not_mapping": lambda nn, L: nn.Linear(2, 2).load_state_dict([1, 2]),
    "param_assign_tensor": lambda nn, L: setattr(nn.Linear(2, 2), "weight", L.ones(2, 2)),
    "module_assign_int": lambda nn, L: setattr(nn.Sequential(nn.ReLU()), "0", 3),
    "register_parameter_dot": lambda nn, L: nn.Module().register_parameter(
        "a.b", nn.Parameter(L.ones(1))),
    "register_buffer_not_tensor": lambda nn, L: nn.Module().register_buffer("a", 3),
    "add_module_not_module": lambda nn, L: nn.Module().add_module("a", 3),
    "missing_attribute": lambda nn, L: nn.Linear(2, 2).nonexistent,
    "forward_missing": lambda nn, L: nn.Module()(L.ones(1)),
    "module_init_kwargs": lambda nn, L: nn.Module(foo=1),
    "kaiming_1d": lambda nn, L: nn.init.kaiming_uniform_(L.ones(3)),
    "orthogonal_1d": lambda nn, L: nn.init.orthogonal_(L.ones(3)),
    "calculate_gain_bad": lambda nn, L: nn.init.calculate_gain("foo"),
    "kaiming_bad_mode": lambda nn, L: nn.init.kaiming_normal_(L.ones(3, 3), mode="fan"),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_errors_vs_torch(name):
    fn = ERROR_CASES[name]
    te = ke = None
    try:
        fn(torch.nn, torch)
    except Exception as e:  # noqa: BLE001
        te = e
    try:
        fn(kiln.nn, kiln)
    except Exception as e:  # noqa: BLE001
        ke = e
    assert te is not None, f"{name}: torch did not raise"
    assert ke is not None, f"{name}: torch raised {type(te).__name__}: {te}; kiln did not"
    assert isinstance(ke, type(te)), \
        f"{name}: kiln raised {type(ke).__name__}: {ke}, torch {type(te).__name__}: {te}"
    oracle.record("nn.errors")
