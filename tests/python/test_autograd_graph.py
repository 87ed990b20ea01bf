"""kiln.autograd.graph against torch.autograd.graph (torch 2.13): saved-tensor hooks,
save_on_cpu, disable_saved_tensors_hooks, gradient edges, increment_version,
register_multi_grad_hook, allow_mutation_on_saved_tensors; Tensor.backward(inputs=)."""
import numpy as np
import pytest
import torch
import torch.autograd.graph as TG

import kiln
import kiln.autograd.graph as KG


def pair(*shape, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return kiln.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(k, t, tol=1e-10):
    assert k is not None and t is not None
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def mlp(lib, x, w1, w2):
    F = lib.nn.functional
    h = F.gelu(x @ w1)
    h = F.layer_norm(h, (h.shape[-1],))
    return F.log_softmax(h @ w2, dim=-1).sum() + (h.tanh() * h).mean()


class Offload:
    """Hooks that keep each saved tensor as a numpy copy (nothing of the original)."""

    def __init__(self, lib):
        self.lib, self.packs, self.unpacks, self.grad_modes = lib, 0, 0, set()

    def pack(self, t):
        self.packs += 1
        self.grad_modes.add(self.lib.is_grad_enabled())
        return (t.detach().numpy().copy(), t.dtype)

    def unpack(self, packed):
        self.unpacks += 1
        self.grad_modes.add(self.lib.is_grad_enabled())
        return self.lib.tensor(packed[0], dtype=packed[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_offloading_hooks_give_the_same_gradients(dtype):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    kx, tx = pair(4, 6, seed=1, dtype=dtype)
    kw1, tw1 = pair(6, 8, seed=2, dtype=dtype)
    kw2, tw2 = pair(8, 3, seed=3, dtype=dtype)
    kh, th = Offload(kiln), Offload(torch)
    with KG.saved_tensors_hooks(kh.pack, kh.unpack):
        ky = mlp(kiln, kx, kw1, kw2)
    with TG.saved_tensors_hooks(th.pack, th.unpack):
        ty = mlp(torch, tx, tw1, tw2)
    ky.backward()
    ty.backward()
    for k, t in [(kx, tx), (kw1, tw1), (kw2, tw2)]:
        close(k.grad, t.grad, tol)
    assert kh.packs > 0 and kh.unpacks > 0
    # kiln saves every input and output of a recorded op (torch what each derivative reads),
    # so the counts differ; the grad mode inside the hooks is torch's: off.
    assert kh.grad_modes == th.grad_modes == {False}


def test_hooks_apply_to_higher_order_gradients():
    kx, tx = pair(5, seed=4)
    for lib, x in [(kiln, kx), (torch, tx)]:
        graph = KG if lib is kiln else TG
        with graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
            y = (x.sin() * x * x).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        g.sum().backward()
    close(kx.grad, tx.grad)


def test_packed_copies_survive_in_place_writes_like_torch():
    results = []
    for lib, graph in [(kiln, KG), (torch, TG)]:
        x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
            e = x.exp()
            loss = (e * e).sum()
        with lib.no_grad():
            e.add_(10.0)  # the graph reads the packed clones, not e
        loss.backward()
        results.append(x.grad)
    close(*results)


def test_unpack_must_return_a_tensor():
    for lib, graph in [(kiln, KG), (torch, TG)]:
        x = lib.ones(3, requires_grad=True)
        with graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
            y = x.exp().sum()
        with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be a "
                                            "Tensor but got result of type int"):
            y.backward()


def test_unpack_with_the_wrong_shape_is_an_error_naming_both_shapes():
    x = kiln.ones(3, requires_grad=True)
    with KG.saved_tensors_hooks(lambda t: t, lambda t: kiln.zeros(5)):
        y = x.exp().sum()
    with pytest.raises(RuntimeError, match=r"returned a tensor of shape \[5\].*saved tensor of "
                                           r"shape \[3\]"):
        y.backward()


def test_only_the_innermost_hooks_apply():
    seen = []
    x = kiln.ones(2, requires_grad=True)
    with KG.saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        with KG.saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
            x.exp()
        assert set(seen) == {"inner"}
        x.exp()
    assert "outer" in seen
    seen.clear()
    x.exp()
    assert seen == []


def test_disable_saved_tensors_hooks_matches_torch():
    for graph in (KG, TG):
        with pytest.raises(RuntimeError, match="no hooks in here"):
            with graph.disable_saved_tensors_hooks("no hooks in here"):
                with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with pytest.raises(RuntimeError, match="busy"):
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                with graph.disable_saved_tensors_hooks("busy"):
                    pass

        @graph.disable_saved_tensors_hooks("decorated")
        def f():
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
        with pytest.raises(RuntimeError, match="decorated"):
            f()
        with graph.saved_tensors_hooks(lambda t: t, lambda t: t):  # restored after each
            pass


def test_hooks_must_be_callable():
    with pytest.raises(TypeError):
        with KG.saved_tensors_hooks(1, lambda t: t):
            pass


def test_save_on_cpu_cpu_tensors():
    kx, tx = pair(3, 4, seed=5)
    with KG.save_on_cpu():
        ky = (kx.sin() @ kx.t()).sum()
    with TG.save_on_cpu():
        ty = (tx.sin() @ tx.t()).sum()
    ky.backward()
    ty.backward()
    close(kx.grad, tx.grad)


@pytest.mark.skipif(not kiln.xpu.is_available(), reason="no xpu device")
def test_save_on_cpu_moves_xpu_activations_to_the_host_and_back():
    devices = []
    a = np.random.default_rng(6).standard_normal((4, 5)).astype(np.float32)
    kx = kiln.tensor(a).to("xpu").requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    real_pack = KG.save_on_cpu().pack_hook

    def pack(t):
        packed = real_pack(t)
        devices.append((str(t.device), str(packed[1].device)))
        return packed
    unpack = KG.save_on_cpu().unpack_hook
    with KG.saved_tensors_hooks(pack, unpack):
        ky = (kx.exp() * kx).sum()
    ky.backward()
    (tx.exp() * tx).sum().backward()
    assert devices and all(d == ("xpu:0", "cpu") or d == ("xpu", "cpu") for d in devices), devices
    assert str(kx.grad.device).startswith("xpu")
    close(kx.grad.cpu(), tx.grad, 1e-5)


def test_custom_function_saves_through_the_hooks():
    class Cube(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g

    seen = []
    kx, tx = pair(4, seed=7)
    with KG.saved_tensors_hooks(lambda t: seen.append(tuple(t.shape)) or t.clone(), lambda t: t):
        y = Cube.apply(kx).sum()
    assert (4,) in seen
    y.backward()
    (tx ** 3).sum().backward()
    close(kx.grad, tx.grad)
    with KG.saved_tensors_hooks(lambda t: t, lambda t: "x"):
        y = Cube.apply(kx).sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()


def test_identity_hooks_do_not_keep_the_graph_alive():
    # kiln gives pack a saved output without its grad_fn, so a hook that keeps it forms no
    # reference cycle (torch 2.13 leaks the graph here): the memory comes back.
    cpu = kiln.device("cpu")
    x = kiln.randn(256, 256, requires_grad=True)
    base = kiln.memory_allocated(cpu)
    with KG.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x.exp().exp()
    assert kiln.memory_allocated(cpu) - base >= 2 * 256 * 256 * 4
    del y
    assert kiln.memory_allocated(cpu) - base == 0


def test_gradient_edge_as_grad_input_matches_torch():
    kx, tx = pair(3, seed=8)
    res = []
    for lib, graph, x in [(kiln, KG, kx), (torch, TG, tx)]:
        y = x.exp()
        edge = graph.get_gradient_edge(y)
        assert edge.output_nr == 0 and edge.node is not None
        z = (y * y).sum()
        del y  # the edge outlives the tensor
        g_edge, = lib.autograd.grad(z, edge, retain_graph=True)
        g_both = lib.autograd.grad(z, [edge, x])
        res.append((g_edge, g_both))
    close(res[0][0], res[1][0])
    close(res[0][1][0], res[1][1][0])
    close(res[0][1][1], res[1][1][1])
    leaf_edge = KG.get_gradient_edge(kx)
    assert leaf_edge.node.name() == "AccumulateGrad"
    for graph in (KG, TG):
        with pytest.raises(RuntimeError, match="does not require gradients"):
            graph.get_gradient_edge(kiln.ones(2) if graph is KG else torch.ones(2))


def test_increment_version_invalidates_saved_tensors_like_torch():
    for lib, graph in [(kiln, KG), (torch, TG)]:
        x = lib.ones(3, requires_grad=True)
        y = x.exp()
        z = (y * y).sum()
        v = y._version
        graph.increment_version(y)
        assert y._version == v + 1
        graph.increment_version([y])
        assert y._version == v + 2
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


@pytest.mark.parametrize("use_b", [True, False])
def test_multi_grad_hook_all(use_b):
    calls = {}
    for lib, graph in [(kiln, KG), (torch, TG)]:
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        got = []
        handle = graph.register_multi_grad_hook((a, b), lambda gs: got.append(gs))
        for k in range(2):
            loss = (a * a * (k + 1)).sum() + ((b ** 3).sum() if use_b else 0)
            loss.backward()
        handle.remove()
        (a * a).sum().backward()
        calls[lib.__name__] = got
    assert len(calls["kiln"]) == len(calls["torch"]) == 2
    for kg, tg in zip(calls["kiln"], calls["torch"]):
        assert len(kg) == len(tg) == 2
        for k, t in zip(kg, tg):
            assert (k is None) == (t is None)
            if k is not None:
                close(k, t)


def test_multi_grad_hook_any_fires_once_per_pass():
    counts = {}
    for lib, graph in [(kiln, KG), (torch, TG)]:
        a = lib.ones(2, requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        got = []
        graph.register_multi_grad_hook((a, b), lambda g: got.append(g.shape), mode="any")
        for _ in range(3):
            (a * b).sum().backward()
        counts[lib.__name__] = len(got)
    assert counts["kiln"] == counts["torch"] == 3
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        KG.register_multi_grad_hook((kiln.ones(1, requires_grad=True),), print, mode="some")


def test_allow_mutation_on_saved_tensors_matches_torch():
    grads = []
    for lib, graph in [(kiln, KG), (torch, TG)]:
        x = lib.tensor([0.5, 1.5, -2.0], dtype=lib.float64, requires_grad=True)
        with graph.allow_mutation_on_saved_tensors():
            y = x * 1
            z = (y * y).sum()  # saves y
            y.mul_(10)        # allowed: backward sees y before the write
            z.backward()
        grads.append(x.grad)
    close(*grads)
    for lib, graph in [(kiln, KG), (torch, TG)]:
        x = lib.ones(2, requires_grad=True)
        with graph.allow_mutation_on_saved_tensors():
            z = (x.exp() * 2).sum()
        with pytest.raises(AssertionError, match="outside of the "
                                                 "'allow_mutation_on_saved_tensors' context"):
            z.backward()


def test_tensor_backward_inputs_matches_torch():
    kx, tx = pair(3, seed=9)
    kw, tw = pair(3, seed=10)
    for x, w in [(kx, kw), (tx, tw)]:
        (x * w).sum().backward(inputs=[w])
    assert kx.grad is None and tx.grad is None
    close(kw.grad, tw.grad)


def run_node_hooks(lib):
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = x * 3
    z = y.exp().sum()
    log = []

    def pre(grad_outputs):
        log.append(("pre", grad_outputs))
        return (grad_outputs[0] * 2,)

    def post(grad_inputs, grad_outputs):
        log.append(("post", grad_inputs, grad_outputs))

    y.grad_fn.register_prehook(pre)
    handle = y.grad_fn.register_hook(post)
    y.register_hook(lambda g: log.append(("tensor", (g,))))
    acc = y.grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: log.append(("acc", gi, go)))
    z.backward(retain_graph=True)
    handle.remove()
    z.backward()
    return log, x.grad


def test_node_hooks_match_torch():
    klog, kgrad = run_node_hooks(kiln)
    tlog, tgrad = run_node_hooks(torch)
    close(kgrad, tgrad)
    assert [e[0] for e in klog] == [e[0] for e in tlog]
    for ke, te in zip(klog, tlog):
        for kgs, tgs in zip(ke[1:], te[1:]):
            assert len(kgs) == len(tgs)
            for k, t in zip(kgs, tgs):
                assert (k is None) == (t is None)
                if k is not None:
                    close(k, t)


def test_node_hook_returning_the_wrong_count_and_metadata():
    for lib in (kiln, torch):
        x = lib.ones(2, requires_grad=True)
        w = x * 2
        node = w.grad_fn
        assert node.metadata == {}
        node.metadata["tag"] = 7
        assert w.grad_fn.metadata == {"tag": 7}  # kept by the node, whichever wrapper

        def bad(grad_outputs):
            return (grad_outputs[0], grad_outputs[0])
        node.register_prehook(bad)
        with pytest.raises(RuntimeError, match=r"hook 'bad' has returned an incorrect number "
                                               r"of values \(got 2, but expected 1\)"):
            w.sum().backward()


def test_multi_grad_hooks_recover_after_a_failed_pass():
    counts = {}
    for lib, graph in [(kiln, KG), (torch, TG)]:
        a = lib.ones(2, requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        got_all, got_any = [], []
        graph.register_multi_grad_hook((a, b), lambda gs: got_all.append(len(gs)))
        graph.register_multi_grad_hook((a, b), lambda g: got_any.append(1), mode="any")

        def boom(g):
            raise ValueError("boom")
        c = a * 2
        c.register_hook(boom)
        with pytest.raises(ValueError, match="boom"):
            (c * b).sum().backward()
        for _ in range(2):
            (a * b).sum().backward()
        counts[lib.__name__] = (len(got_all), len(got_any))
    assert counts["kiln"] == counts["torch"]


def test_backward_inputs_runs_leaf_hooks_like_torch():
    grads = []
    for lib in (kiln, torch):
        a = lib.ones(2, requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        a.register_hook(lambda g: g * 10)
        seen = []
        a.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (a * b * 2).sum().backward(inputs=[a])
        assert b.grad is None and len(seen) == 1
        grads.append(a.grad)
    close(*grads)


def test_a_pack_hook_failing_in_an_in_place_op_changes_nothing():
    results = []
    for lib, graph in [(kiln, KG), (torch, TG)]:
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 3.0], requires_grad=True)
        b = a * 1

        def bad_pack(t):
            raise ValueError("no room")
        with pytest.raises(ValueError, match="no room"):
            with graph.saved_tensors_hooks(bad_pack, lambda t: t):
                b.mul_(c)
        b.sum().backward()
        results.append((b.detach().numpy().tolist(), a.grad.numpy().tolist()))
    assert results[0] == results[1] == ([1.0, 2.0], [1.0, 1.0])


def test_hooks_registering_hooks_on_the_same_node():
    x = kiln.ones(2, requires_grad=True)
    y = x * 3
    node = y.grad_fn
    calls = []

    def pre(go):
        calls.append("pre")
        for _ in range(64):  # would reallocate the list being walked
            node.register_prehook(lambda g: None)

    def post(gi, go):
        calls.append("post")
        for _ in range(64):
            node.register_hook(lambda gi, go: None)
    node.register_prehook(pre)
    node.register_hook(post)
    y.sum().backward()
    assert calls == ["pre", "post"]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_node_hook_must_return_a_sequence():
    for lib in (kiln, torch):
        x = lib.ones(1, requires_grad=True)
        y = x * 2
        y.grad_fn.register_prehook(lambda go: go[0])  # a tensor, not a tuple
        with pytest.raises(TypeError):
            y.sum().backward()


def test_removed_hooks_release_their_callables():
    import gc
    import weakref

    class Payload:
        pass
    x = kiln.ones(2, requires_grad=True)
    y = x * 3
    refs, handles = [], []
    for register in (lambda f: y.grad_fn.register_prehook(lambda go: f and None),
                     lambda f: y.grad_fn.register_hook(lambda gi, go: f and None),
                     lambda f: y.register_hook(lambda g: f and None),
                     lambda f: x.register_post_accumulate_grad_hook(lambda t: f and None)):
        payload = Payload()
        refs.append(weakref.ref(payload))
        handles.append(register(payload))
        del payload
    gc.collect()
    assert all(r() is not None for r in refs)  # held by the graph while registered
    for h in handles:
        h.remove()
    gc.collect()
    assert all(r() is None for r in refs)  # dropped at remove(), not with the graph
    y.sum().backward()  # the emptied slots are skipped
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
