"""kiln.nn.utils against torch.nn.utils on identical weights and inputs: weight_norm and
spectral_norm (hook form and parametrizations), parametrize (chains, right_inverse, several
originals, cached, removal), functional_call, get_total_norm / clip_grads_with_norm_,
nn.init's dirac_ / sparse_, ParameterDict / ParameterList. Compared: forward values,
gradients, state_dict keys and values, the module after remove_*, the exception classes."""
import copy
import pickle

import numpy as np
import pytest
import torch

import kiln
import oracle

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def K(t):
    return kiln.tensor(t.detach().numpy())


def same(k, t, where, tol=1.0):
    oracle.assert_same(k, t, tol, where=where)


def twins(make):
    """make(L) built with torch and kiln, kiln's weights loaded from torch's."""
    torch.manual_seed(0)
    t, k = make(torch), make(kiln)
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    return t, k


def same_state(k, t, where):
    ks, ts = k.state_dict(), t.state_dict()
    assert list(ks) == list(ts), f"{where}: keys kiln {list(ks)} vs torch {list(ts)}"
    for name in ts:
        same(ks[name], ts[name], f"{where} {name}")


def same_grads(k, t, where):
    for (name, tp), (kname, kp) in zip(t.named_parameters(), k.named_parameters()):
        assert name == kname, where
        assert (kp.grad is None) == (tp.grad is None), f"{where}: grad of {name}"
        if tp.grad is not None:
            same(kp.grad, tp.grad, f"{where} grad of {name}", tol=4)


def run_both(t, k, x, where):
    """Forward and backward of sum(out * weights) on both; outputs and grads compared."""
    yt = t(x)
    yk = k(K(x))
    same(yk, yt, f"{where} forward", tol=2)
    w = torch.linspace(-1, 1, yt.numel()).reshape(yt.shape)
    (yt * w).sum().backward()
    (yk * K(w)).sum().backward()
    same_grads(k, t, where)


LAYERS = {
    "linear": (lambda L: L.nn.Linear(5, 4), (3, 5)),
    "conv2d": (lambda L: L.nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    "conv_transpose2d": (lambda L: L.nn.ConvTranspose2d(3, 4, 2, stride=2), (2, 3, 3, 3)),
    "conv1d": (lambda L: L.nn.Conv1d(2, 3, 3), (2, 2, 7)),
}


# --- weight_norm (hook form) ----------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, None, -2])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_weight_norm_hook_form(layer, dim):
    make, shape = LAYERS[layer]
    t, k = twins(make)
    torch.nn.utils.weight_norm(t, dim=dim)
    kiln.nn.utils.weight_norm(k, dim=dim)
    same_state(k, t, "after weight_norm")
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]
    x = torch.randn(*shape)
    run_both(t, k, x, f"weight_norm {layer} dim={dim}")
    # a step on g and v changes the weight at the next forward
    with torch.no_grad():
        t.weight_g.mul_(1.5)
    with kiln.no_grad():
        k.weight_g.mul_(1.5)
    same(k(K(x)), t(x), "after changing g", tol=2)
    torch.nn.utils.remove_weight_norm(t)
    kiln.nn.utils.remove_weight_norm(k)
    same_state(k, t, "after remove_weight_norm")
    assert isinstance(k.weight, kiln.nn.Parameter) and not k._forward_pre_hooks
    same(k(K(x)), t(x), "after remove", tol=2)
    oracle.record("nn.utils.weight_norm")


def test_weight_norm_hook_form_errors():
    cases = {
        "twice": lambda L: L.nn.utils.weight_norm(L.nn.utils.weight_norm(L.nn.Linear(3, 4))),
        "remove_missing": lambda L: L.nn.utils.remove_weight_norm(L.nn.Linear(3, 4)),
        "unknown_name": lambda L: L.nn.utils.weight_norm(L.nn.Linear(3, 4), name="foo"),
        "dim_out_of_range": lambda L: L.nn.utils.weight_norm(L.nn.Linear(3, 4), dim=5),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "weight_norm " + name)
    with pytest.raises(IndexError, match=r"\[-2, 1\], but got 5"):
        kiln.nn.utils.weight_norm(kiln.nn.Linear(3, 4), dim=5)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        kiln.nn.utils.remove_weight_norm(kiln.nn.Linear(3, 4))
    with pytest.warns(FutureWarning):
        kiln.nn.utils.weight_norm(kiln.nn.Linear(3, 4))


# --- spectral_norm (hook form) --------------------------------------------------------------

@pytest.mark.parametrize("n_iter", [1, 3])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_spectral_norm_hook_form(layer, n_iter):
    make, shape = LAYERS[layer]
    t, k = twins(make)
    torch.nn.utils.spectral_norm(t, n_power_iterations=n_iter)
    kiln.nn.utils.spectral_norm(k, n_power_iterations=n_iter)
    assert list(k.state_dict()) == list(t.state_dict())
    # the random start of u and v is torch's: copied
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    x = torch.randn(*shape)
    for step in range(3):  # training mode: u and v move at each forward
        same(k(K(x)), t(x), f"training forward {step}", tol=4)
        same_state(k, t, f"u, v after forward {step}")
    k.zero_grad()
    t.zero_grad()
    run_both(t, k, x, f"spectral_norm {layer}")
    t.eval()
    k.eval()
    u_before = k.weight_u.clone()
    same(k(K(x)), t(x), "eval forward", tol=4)
    same(k(K(x)), t(x), "eval forward twice", tol=4)
    np.testing.assert_array_equal(k.weight_u.numpy(), u_before.numpy(), "eval mode moved u")
    torch.nn.utils.remove_spectral_norm(t)
    kiln.nn.utils.remove_spectral_norm(k)
    same_state(k, t, "after remove_spectral_norm")
    same(k(K(x)), t(x), "after remove", tol=4)
    oracle.record("nn.utils.spectral_norm")


def test_spectral_norm_sigma_is_the_largest_singular_value():
    # many iterations: the estimate converges to numpy's largest singular value
    k = kiln.nn.Linear(6, 5)
    kiln.nn.utils.spectral_norm(k, n_power_iterations=200)
    k(kiln.randn(1, 6))
    w = k.weight_orig.detach().numpy()
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(k.weight.detach().numpy(), w / sigma, rtol=1e-4, atol=1e-6)


def test_spectral_norm_hook_form_errors():
    cases = {
        "twice": lambda L: L.nn.utils.spectral_norm(L.nn.utils.spectral_norm(L.nn.Linear(3, 4))),
        "remove_missing": lambda L: L.nn.utils.remove_spectral_norm(L.nn.Linear(3, 4)),
        "unknown_name": lambda L: L.nn.utils.spectral_norm(L.nn.Linear(3, 4), name="foo"),
        "no_iterations": lambda L: L.nn.utils.spectral_norm(L.nn.Linear(3, 4),
                                                            n_power_iterations=0),
        "none_param": lambda L: L.nn.utils.spectral_norm(L.nn.Linear(3, 4, bias=False),
                                                         name="bias"),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "spectral_norm " + name)
    with pytest.raises(ValueError, match="positive, but got n_power_iterations=0"):
        kiln.nn.utils.spectral_norm(kiln.nn.Linear(3, 4), n_power_iterations=0)


# --- parametrizations.weight_norm / spectral_norm -------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_parametrizations_weight_norm(layer, dim):
    make, shape = LAYERS[layer]
    t, k = twins(make)
    torch.nn.utils.parametrizations.weight_norm(t, dim=dim)
    kiln.nn.utils.parametrizations.weight_norm(k, dim=dim)
    assert type(k).__name__ == type(t).__name__ == "Parametrized" + type(make(kiln)).__name__
    same_state(k, t, "parametrized state")
    x = torch.randn(*shape)
    run_both(t, k, x, f"parametrizations.weight_norm {layer}")
    same(k.weight, t.weight, "weight read through the property", tol=2)
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    kiln.nn.utils.parametrize.remove_parametrizations(k, "weight")
    assert type(k) is kiln.nn.Linear or type(k).__name__ == type(t).__name__
    same_state(k, t, "after remove_parametrizations")
    oracle.record("nn.utils.parametrizations.weight_norm")


def test_parametrizations_weight_norm_loads_hook_form_state_dict():
    t, k = twins(LAYERS["linear"][0])
    torch.nn.utils.weight_norm(t)
    old = t.state_dict()  # weight_g, weight_v
    kiln.nn.utils.parametrizations.weight_norm(k)
    k.load_state_dict({n: K(v) for n, v in old.items()})
    x = torch.randn(2, 5)
    same(k(K(x)), t(x), "loaded from the hook form's keys", tol=2)


@pytest.mark.parametrize("layer", ["linear", "conv2d", "conv_transpose2d"])
def test_parametrizations_spectral_norm(layer):
    make, shape = LAYERS[layer]
    t, k = twins(make)
    torch.nn.utils.parametrizations.spectral_norm(t)
    kiln.nn.utils.parametrizations.spectral_norm(k)
    assert list(k.state_dict()) == list(t.state_dict())
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    x = torch.randn(*shape)
    for step in range(2):
        same(k(K(x)), t(x), f"training forward {step}", tol=4)
        same_state(k, t, f"_u, _v after forward {step}")
    k.zero_grad()
    t.zero_grad()
    run_both(t, k, x, f"parametrizations.spectral_norm {layer}")
    t.eval()
    k.eval()
    same(k(K(x)), t(x), "eval forward", tol=4)
    same_state(k, t, "eval leaves _u, _v")
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    kiln.nn.utils.parametrize.remove_parametrizations(k, "weight")
    same_state(k, t, "after remove_parametrizations")
    oracle.record("nn.utils.parametrizations.spectral_norm")


def test_parametrizations_spectral_norm_registration_converges():
    # 15 power steps at registration, as torch: u, v from torch's start give torch's u, v
    torch.manual_seed(3)
    t = torch.nn.Linear(4, 3)
    k = kiln.nn.Linear(4, 3)
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    torch.manual_seed(5)
    torch.nn.utils.parametrizations.spectral_norm(t)
    sn_k = kiln.nn.utils.parametrizations._SpectralNorm(k.weight)
    with kiln.no_grad():
        torch.manual_seed(5)
        u0 = torch.nn.functional.normalize(torch.empty(3).normal_(0, 1), dim=0)
        v0 = torch.nn.functional.normalize(torch.empty(4).normal_(0, 1), dim=0)
        sn_k._u.copy_(K(u0))
        sn_k._v.copy_(K(v0))
        sn_k._power_method(k.weight, 15)
    same(sn_k._u, t.parametrizations.weight[0]._u, "_u after 15 steps", tol=10)
    same(sn_k._v, t.parametrizations.weight[0]._v, "_v after 15 steps", tol=10)


def test_parametrizations_errors():
    cases = {
        "sn_unknown_name": lambda L: L.nn.utils.parametrizations.spectral_norm(
            L.nn.Linear(3, 4), name="foo"),
        "sn_dim_out_of_range": lambda L: L.nn.utils.parametrizations.spectral_norm(
            L.nn.Linear(3, 4), dim=2),
        "sn_no_iterations": lambda L: L.nn.utils.parametrizations.spectral_norm(
            L.nn.Linear(3, 4), n_power_iterations=0),
        "remove_not_parametrized": lambda L: L.nn.utils.parametrize.remove_parametrizations(
            L.nn.Linear(3, 4), "weight"),
        "remove_weight_norm_unparametrized": lambda L:
            L.nn.utils.parametrize.remove_parametrizations(
                L.nn.utils.parametrizations.weight_norm(L.nn.Linear(3, 4)), "weight",
                leave_parametrized=False),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "parametrizations " + name)
    with pytest.raises(IndexError, match=r"\[-2, 1\] but got 2"):
        kiln.nn.utils.parametrizations.spectral_norm(kiln.nn.Linear(3, 4), dim=2)


# --- parametrize ----------------------------------------------------------------------------

def symmetric(L):
    class Symmetric(L.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()
    return Symmetric()


def scaled(L, factor):
    class Scale(L.nn.Module):
        def forward(self, x):
            return x * factor

        def right_inverse(self, y):
            return y / factor
    return Scale()


def split_sum(L):
    class SplitSum(L.nn.Module):  # two originals: right_inverse returns a pair
        def forward(self, a, b):
            return a + b

        def right_inverse(self, w):
            return w * 0.25, w * 0.75
    return SplitSum()


def wrong_shape(L):
    class WrongShape(L.nn.Module):
        def forward(self, x):
            return x[:1]
    return WrongShape()


def test_register_parametrization_chain_and_right_inverse():
    t, k = twins(lambda L: L.nn.Linear(4, 4))
    for L, m in ((torch, t), (kiln, k)):
        P = L.nn.utils.parametrize
        P.register_parametrization(m, "weight", symmetric(L))
        P.register_parametrization(m, "weight", scaled(L, 2.0))
        assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
        assert not P.is_parametrized(m, "bias")
        assert P.type_before_parametrizations(m) is L.nn.Linear
    same_state(k, t, "chain state")
    same(k.weight, t.weight, "chained value")
    x = torch.randn(3, 4)
    run_both(t, k, x, "parametrize chain")
    # assignment runs right_inverse through the chain, last to first
    w = torch.randn(4, 4)
    w = w + w.T
    t.weight = w
    k.weight = K(w)
    same_state(k, t, "after assigning weight")
    same(k.weight, t.weight, "value after assigning", tol=2)
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight", leave_parametrized=False)
    kiln.nn.utils.parametrize.remove_parametrizations(k, "weight", leave_parametrized=False)
    assert type(k) is kiln.nn.Linear and not hasattr(k, "parametrizations")
    same_state(k, t, "after removal keeping the original")
    oracle.record("nn.utils.parametrize")


def test_parametrization_of_a_buffer_and_several_originals():
    t, k = twins(lambda L: L.nn.BatchNorm1d(3))
    for L, m in ((torch, t), (kiln, k)):
        L.nn.utils.parametrize.register_parametrization(m, "running_var", scaled(L, 3.0))
        L.nn.utils.parametrize.register_parametrization(m, "weight", split_sum(L))
    same_state(k, t, "buffer and split parametrized")
    assert [n for n, _ in k.named_buffers()] == [n for n, _ in t.named_buffers()]
    t.eval()
    k.eval()
    run_both(t, k, torch.randn(4, 3), "parametrized batch norm")
    for L, m in ((torch, t), (kiln, k)):
        L.nn.utils.parametrize.remove_parametrizations(m, "weight")
        L.nn.utils.parametrize.remove_parametrizations(m, "running_var")
    same_state(k, t, "after removing both")
    assert isinstance(k.weight, kiln.nn.Parameter)


def test_parametrize_cached_computes_once():
    calls = []

    class Counting(kiln.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    m = kiln.nn.Linear(3, 3)
    kiln.nn.utils.parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    with kiln.nn.utils.parametrize.cached():
        a, b = m.weight, m.weight
    assert len(calls) == 1 and a is b
    m.weight  # noqa: B018 - outside cached(): computed again
    assert len(calls) == 2


def test_parametrized_module_deepcopy_and_pickle():
    t, k = twins(lambda L: L.nn.Linear(3, 2))
    kiln.nn.utils.parametrize.register_parametrization(k, "weight", scaled(kiln, 2.0))
    k2 = copy.deepcopy(k)
    np.testing.assert_array_equal(k2.weight.detach().numpy(), k.weight.detach().numpy())
    assert k2.parametrizations.weight.original is not k.parametrizations.weight.original
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(k)


def test_parametrize_errors():
    cases = {
        "unknown_tensor": lambda L: L.nn.utils.parametrize.register_parametrization(
            L.nn.Linear(3, 3), "foo", scaled(L, 2.0)),
        "changes_shape": lambda L: L.nn.utils.parametrize.register_parametrization(
            L.nn.Linear(3, 3), "weight", wrong_shape(L)),
        "chained_changes_shape": lambda L: L.nn.utils.parametrize.register_parametrization(
            L.nn.utils.parametrize.register_parametrization(L.nn.Linear(3, 3), "weight",
                                                            scaled(L, 2.0)),
            "weight", wrong_shape(L)),
        "assign_without_right_inverse": lambda L: setattr(
            L.nn.utils.parametrize.register_parametrization(L.nn.Linear(3, 3), "weight",
                                                            wrong_shape(L), unsafe=True),
            "weight", L.zeros(3, 3)),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "parametrize " + name)
    with pytest.raises(ValueError, match=r"unparametrized shape: .*3, 3.*\nparametrized shape"):
        kiln.nn.utils.parametrize.register_parametrization(kiln.nn.Linear(3, 3), "weight",
                                                           wrong_shape(kiln))


def test_transfer_parametrizations_and_params():
    src = kiln.nn.Linear(3, 3)
    kiln.nn.utils.parametrize.register_parametrization(src, "weight", scaled(kiln, 2.0))
    dst = kiln.nn.Linear(3, 3)
    kiln.nn.utils.parametrize.transfer_parametrizations_and_params(src, dst)
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original
    np.testing.assert_allclose(dst.weight.detach().numpy(), src.weight.detach().numpy())


# --- functional_call ------------------------------------------------------------------------

class Net:
    @staticmethod
    def make(L):
        return L.nn.Sequential(L.nn.Linear(4, 3), L.nn.BatchNorm1d(3), L.nn.Linear(3, 2))


def test_functional_call_swaps_and_restores():
    t, k = twins(Net.make)
    x = torch.randn(5, 4)
    torch.manual_seed(1)
    new = {"0.weight": torch.randn(3, 4, requires_grad=True), "2.bias": torch.randn(2),
           "1.running_mean": torch.randn(3)}
    new_k = {n: K(v).requires_grad_(v.requires_grad) for n, v in new.items()}
    before_k = {n: v for n, v in k.state_dict(keep_vars=True).items()}
    t.eval()
    k.eval()
    yt = torch.func.functional_call(t, new, (x,))
    yk = kiln.nn.utils.stateless._functional_call(k, new_k, (K(x),))
    same(yk, yt, "functional_call output", tol=2)
    yt.sum().backward()
    yk.sum().backward()
    same(new_k["0.weight"].grad, new["0.weight"].grad, "grad reaches the given tensor", tol=4)
    assert k[0].weight.grad is None, "the module's own parameter got a gradient"
    after_k = k.state_dict(keep_vars=True)
    assert all(after_k[n] is before_k[n] for n in before_k), "not restored"
    same(k(K(x)), t(x), "module after the call", tol=2)
    # the deprecated form warns and gives the same
    with pytest.warns(FutureWarning):
        yk2 = kiln.nn.utils.stateless.functional_call(k, new_k, K(x))
    same(yk2, yt, "stateless.functional_call", tol=2)
    oracle.record("nn.utils.stateless.functional_call")


def test_functional_call_restores_after_an_exception():
    k = Net.make(kiln)
    before = k.state_dict(keep_vars=True)
    with pytest.raises(RuntimeError):
        kiln.nn.utils.stateless._functional_call(k, {"0.weight": kiln.randn(3, 4)},
                                                 (kiln.randn(5, 7),))  # wrong input width
    after = k.state_dict(keep_vars=True)
    assert all(after[n] is before[n] for n in before)


def test_functional_call_tied_weights_and_dict_lists():
    def tied(L):
        m = L.nn.Sequential(L.nn.Linear(3, 3, bias=False), L.nn.Linear(3, 3, bias=False))
        m[1].weight = m[0].weight
        return m
    t, k = twins(tied)
    k[1].weight = k[0].weight
    w = torch.randn(3, 3)
    x = torch.randn(2, 3)
    for tie in (True, False):
        yt = torch.func.functional_call(t, {"0.weight": w}, (x,), tie_weights=tie)
        yk = kiln.nn.utils.stateless._functional_call(k, {"0.weight": K(w)}, (K(x),),
                                                      tie_weights=tie)
        same(yk, yt, f"tie_weights={tie}", tol=2)
    parts_t = [{"0.weight": w}, {"1.weight": w}]
    parts_k = [{"0.weight": K(w)}, {"1.weight": K(w)}]
    same(kiln.nn.utils.stateless._functional_call(k, parts_k, (K(x),), tie_weights=False),
         torch.func.functional_call(t, parts_t, (x,), tie_weights=False), "list of dicts",
         tol=2)
    bad_t = [{"0.weight": w}, {"0.weight": w}]
    bad_k = [{"0.weight": K(w)}, {"0.weight": K(w)}]
    with pytest.raises(ValueError):
        torch.func.functional_call(t, bad_t, (x,))
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        kiln.nn.utils.stateless._functional_call(k, bad_k, (K(x),))
    two_t = {"0.weight": w, "1.weight": torch.randn(3, 3)}
    two_k = {n: K(v) for n, v in two_t.items()}
    with pytest.raises(ValueError):
        torch.func.functional_call(t, two_t, (x,))
    with pytest.raises(ValueError, match="which are tied"):
        kiln.nn.utils.stateless._functional_call(k, two_k, (K(x),))


def test_functional_call_strict():
    t, k = twins(Net.make)
    partial_t = {"0.weight": torch.randn(3, 4), "extra": torch.randn(1)}
    partial_k = {n: K(v) for n, v in partial_t.items()}
    with pytest.raises(RuntimeError) as te:
        torch.func.functional_call(t, partial_t, (torch.randn(2, 4),), strict=True)
    with pytest.raises(RuntimeError) as ke:
        kiln.nn.utils.stateless._functional_call(k, partial_k, (kiln.randn(2, 4),),
                                                 strict=True)
    assert str(ke.value) == str(te.value)


# --- gradient norms -------------------------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_get_total_norm_and_clip_grads_with_norm(norm_type):
    t, k = twins(Net.make)
    x = torch.randn(6, 4)
    run_both(t, k, x, "grads to clip")
    tg = [p.grad for p in t.parameters()]
    kg = [p.grad for p in k.parameters()]
    tn = torch.nn.utils.get_total_norm(tg, norm_type)
    kn = kiln.nn.utils.get_total_norm(kg, norm_type)
    same(kn, tn, f"get_total_norm p={norm_type}", tol=4)
    torch.nn.utils.clip_grads_with_norm_(t.parameters(), 0.1, tn)
    kiln.nn.utils.clip_grads_with_norm_(k.parameters(), 0.1, kn)
    same_grads(k, t, "clip_grads_with_norm_")
    with pytest.warns(FutureWarning):
        kn2 = kiln.nn.utils.clip_grad_norm(k.parameters(), 1e9, norm_type)
    tn2 = torch.nn.utils.clip_grad_norm_(t.parameters(), 1e9, norm_type)
    same(kn2, tn2, "clip_grad_norm (deprecated alias)", tol=4)
    same(kiln.nn.utils.get_total_norm([]), torch.nn.utils.get_total_norm([]), "no tensors")
    oracle.record("nn.utils.get_total_norm")


def test_get_total_norm_nonfinite():
    def case(L):
        return L.nn.utils.get_total_norm([L.tensor([1.0, float("inf")])],
                                         error_if_nonfinite=True)
    oracle.check_same_error_class(case, "get_total_norm nonfinite")


# --- skip_init, memory format ---------------------------------------------------------------

def test_skip_init():
    m = kiln.nn.utils.skip_init(kiln.nn.Linear, 4, 3, bias=False)
    assert type(m) is kiln.nn.Linear and tuple(m.weight.shape) == (3, 4) and m.bias is None
    assert not m.weight.is_meta and m.weight.requires_grad  # built on meta, then to_empty
    big = kiln.nn.utils.skip_init(kiln.nn.Linear, 1 << 14, 1 << 14, device="meta")
    assert big.weight.is_meta  # 1 GiB of weights that were never allocated nor initialised
    oracle.check_same_error_class(lambda L: L.nn.utils.skip_init(int), "skip_init not module")
    oracle.check_same_error_class(lambda L: L.nn.utils.skip_init(L.nn.ReLU),
                                  "skip_init no device arg")


def test_convert_conv2d_weight_memory_format():
    for L in (torch, kiln):
        m = L.nn.Sequential(L.nn.Conv2d(3, 4, 3), L.nn.ReLU(), L.nn.Linear(2, 2))
        w = m[0].weight
        before = m[0].weight.detach().clone()
        L.nn.utils.convert_conv2d_weight_memory_format(m, L.channels_last)
        assert m[0].weight is w
        assert m[0].weight.is_contiguous(memory_format=L.channels_last)
        assert not m[0].weight.is_contiguous()
        assert (m[0].weight.detach() == before).all()


# --- nn.init --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 3, 3, 3), 2), ((4, 2, 3, 3, 3), 1),
                                          ((3, 5, 2, 2), 1), ((8, 2, 5), 4)])
def test_dirac(shape, groups):
    t = torch.nn.init.dirac_(torch.empty(*shape), groups)
    k = kiln.nn.init.dirac_(kiln.empty(*shape), groups)
    same(k, t, f"dirac_ {shape} groups={groups}")
    oracle.record("nn.init.dirac_")


def test_dirac_conv_passes_input_through():
    conv = kiln.nn.Conv2d(3, 3, 3, padding=1, bias=False)
    kiln.nn.init.dirac_(conv.weight)
    x = kiln.randn(2, 3, 5, 5)
    np.testing.assert_allclose(conv(x).detach().numpy(), x.numpy(), rtol=1e-6, atol=1e-6)


def test_sparse():
    g = kiln.Generator()
    g.manual_seed(0)
    k = kiln.nn.init.sparse_(kiln.empty(200, 50), 0.3, std=0.5, generator=g)
    zeros_per_column = (k == 0).sum(0).numpy()
    assert (zeros_per_column == 60).all()  # ceil(0.3 * 200) in each column, as torch
    t = torch.nn.init.sparse_(torch.empty(200, 50), 0.3, std=0.5)
    assert ((t == 0).sum(0).numpy() == zeros_per_column).all()
    nonzero = k.numpy()[k.numpy() != 0]
    assert abs(nonzero.std() - 0.5) < 0.03


def test_init_errors_and_aliases():
    cases = {
        "dirac_2d": lambda L: L.nn.init.dirac_(L.empty(3, 3)),
        "dirac_groups": lambda L: L.nn.init.dirac_(L.empty(5, 3, 3), groups=2),
        "sparse_3d": lambda L: L.nn.init.sparse_(L.empty(3, 3, 3), 0.5),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "init " + name)
    torch_aliases = [n for n in dir(torch.nn.init) if not n.startswith("_")
                     and n + "_" in dir(torch.nn.init)]
    for name in torch_aliases:
        assert hasattr(kiln.nn.init, name), name
    with pytest.warns(FutureWarning, match="nn.init.constant_"):
        kiln.nn.init.constant(kiln.empty(2), 3.0)
    missing = [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")
               and not hasattr(kiln.nn.init, n)]
    assert not missing


# --- ParameterDict / ParameterList ----------------------------------------------------------

def test_parameter_dict_as_torch():
    torch.manual_seed(0)
    values = {"b": torch.randn(2, 3), "a": torch.nn.Parameter(torch.randn(3)), "c": "text"}
    t = torch.nn.ParameterDict(values)
    k = kiln.nn.ParameterDict({n: K(v) if isinstance(v, torch.Tensor) else v
                               for n, v in values.items()})
    assert list(k.keys()) == list(t.keys()) == ["a", "b", "c"]  # a plain dict is sorted
    same_state(k, t, "ParameterDict")
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert type(k["b"]) is kiln.nn.Parameter and k["c"] == "text"
    for d in (t, k):
        d["z"] = d["a"] * 2 if d is t else k["a"] * 2
        d.update([("y", "obj")])
        assert d.pop("y") == "obj"
        assert d.setdefault("a") is d["a"]
        assert d.get("missing", 7) == 7 and "z" in d and len(d) == 4
    assert list(k.keys()) == list(t.keys())
    assert list(reversed(k)) == list(reversed(t))
    assert list((k | kiln.nn.ParameterDict({"q": kiln.zeros(1)})).keys()) == \
        list((t | torch.nn.ParameterDict({"q": torch.zeros(1)})).keys())
    assert k.popitem()[0] == t.popitem()[0]
    assert repr(k).replace("kiln", "torch") == repr(t)
    errors = {
        "non_str_key": lambda L: L.nn.ParameterDict()[1],
        "call": lambda L: L.nn.ParameterDict()(1),
        "update_int": lambda L: L.nn.ParameterDict().update(3),
        "update_bad_pair": lambda L: L.nn.ParameterDict().update([("a", 1, 2)]),
        "missing_key": lambda L: L.nn.ParameterDict()["nope"],
    }
    for name, case in errors.items():
        oracle.check_same_error_class(case, "ParameterDict " + name)
    oracle.record("nn.ParameterDict")


def test_parameter_list_as_torch():
    torch.manual_seed(0)
    items = [torch.randn(2), "x", torch.nn.Parameter(torch.randn(3, 3))]
    t = torch.nn.ParameterList(items)
    k = kiln.nn.ParameterList([K(v) if isinstance(v, torch.Tensor) else v for v in items])
    same_state(k, t, "ParameterList")
    assert k[1] == "x" and type(k[0]) is kiln.nn.Parameter
    assert repr(k).replace("kiln", "torch") == repr(t)
    assert len(k[::2]) == len(t[::2]) == 2
    errors = {
        "call": lambda L: L.nn.ParameterList()(),
        "extend_tensor": lambda L: L.nn.ParameterList().extend(L.zeros(2)),
        "index": lambda L: L.nn.ParameterList([L.zeros(1)])[3],
    }
    for name, case in errors.items():
        oracle.check_same_error_class(case, "ParameterList " + name)


def test_module_dict_as_torch():
    for L in (torch, kiln):
        d = L.nn.ModuleDict({"b": L.nn.ReLU(), "a": L.nn.Tanh()})
        assert list(d.keys()) == ["b", "a"]  # insertion order, unlike ParameterDict
        d.update([("c", L.nn.Identity())])
        assert list(d) == ["b", "a", "c"] and isinstance(d.pop("a"), L.nn.Tanh)
    errors = {
        "update_bad_pair": lambda L: L.nn.ModuleDict().update([("a",)]),
        "update_int": lambda L: L.nn.ModuleDict().update(3),
        "not_module": lambda L: L.nn.ModuleDict({"a": 3}),
    }
    for name, case in errors.items():
        oracle.check_same_error_class(case, "ModuleDict " + name)
