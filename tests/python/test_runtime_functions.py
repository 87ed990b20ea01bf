"""torch's small runtime functions: flush-denormal mode, inter-op threads, empty_permuted,
frombuffer, backward(inputs=...), post-accumulate-grad hooks, anomaly detection, eager
cond / while_loop, type names; each against torch 2.13."""
import numpy as np
import torch

import kiln


def test_small_torch_runtime_functions():
    assert kiln.set_flush_denormal(True) == torch.set_flush_denormal(True)
    try:
        tiny = kiln.tensor([1e-39, 1.0])  # 1e-39 is subnormal in float32
        assert (tiny * 1.0)[0].item() == 0.0  # flushed (torch gives the same with it on)
    finally:
        kiln.set_flush_denormal(False)
        torch.set_flush_denormal(False)
    assert (kiln.tensor([1e-39]) * 1.0).item() != 0.0
    kiln.set_num_interop_threads(3)
    assert kiln.get_num_interop_threads() == 3
    kiln.set_num_interop_threads(1)
    e = kiln.empty_permuted((2, 3, 4), (0, 2, 1))
    t = torch.empty_permuted((2, 3, 4), (0, 2, 1))
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
    data = bytearray(np.arange(6, dtype=np.float32).tobytes())
    fb = kiln.frombuffer(data, dtype=kiln.float32, count=4, offset=4)
    assert fb.tolist() == torch.frombuffer(data, dtype=torch.float32, count=4, offset=4).tolist()
    fb[0] = 10.0  # shares the buffer, as torch's
    assert np.frombuffer(data, dtype=np.float32)[1] == 10.0


def test_backward_with_inputs_accumulates_only_there():
    results = {}
    for K in (kiln, torch):
        a = K.tensor([1.0, 2.0], requires_grad=True)
        b = K.tensor([3.0, 4.0], requires_grad=True)
        c = a * b
        y = (c * c).sum()
        y.backward(inputs=[a], retain_graph=True)
        assert b.grad is None
        y.backward(inputs=[c, b], retain_graph=True)
        K.autograd.backward(y, inputs=a)  # accumulates onto the first pass's gradient
        results[K.__name__] = [t.grad.tolist() for t in (a, b, c)]
    assert results["kiln"] == results["torch"]
    with np.testing.assert_raises(RuntimeError):
        kiln.tensor([1.0], requires_grad=True).sum().backward(inputs=[])


def test_post_accumulate_grad_hook_runs_an_optimizer_in_backward():
    results = {}
    for K in (kiln, torch):
        w = K.tensor([1.0, 2.0], requires_grad=True)
        seen = []

        def step(p, K=K, seen=seen):
            seen.append(p.grad.tolist())
            with K.no_grad():
                p.sub_(0.1 * p.grad)
            p.grad = None

        handle = w.register_post_accumulate_grad_hook(step)
        (w * w).sum().backward()
        (w * 3).sum().backward()
        handle.remove()
        (w * 3).sum().backward()
        results[K.__name__] = (seen, w.tolist(), w.grad.tolist())
        with np.testing.assert_raises(RuntimeError):
            (w * 2).register_post_accumulate_grad_hook(step)
    assert results["kiln"] == results["torch"]


def test_detect_anomaly_names_the_node_that_made_nan():
    import pytest
    x = kiln.tensor([0.0, 1.0], requires_grad=True)
    with kiln.autograd.detect_anomaly():
        assert kiln.is_anomaly_enabled()
        y = (x.sqrt() * 0).sum()  # sqrt's gradient at 0 is inf, times 0: NaN
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            y.backward()
    assert not kiln.is_anomaly_enabled()
    (x.sqrt() * 0).sum().backward()  # outside the mode: no check, as torch
    tx = torch.tensor([0.0, 1.0], requires_grad=True)
    (tx.sqrt() * 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    with kiln.autograd.set_detect_anomaly(True, check_nan=False):
        assert kiln.is_anomaly_enabled() and not kiln.is_anomaly_check_nan_enabled()
        (x.sqrt() * 0).sum().backward()
    assert not kiln.is_anomaly_enabled()


def test_eager_control_flow_and_type_names_match_torch():
    for K in (kiln, torch):
        x = K.ones(2)
        assert K.cond(K.tensor(True), lambda v: v + 1, lambda v: v - 1, (x,)).tolist() == [2.0, 2.0]
        assert K.cond(False, lambda v: v + 1, lambda v: v - 1, (x,)).tolist() == [0.0, 0.0]
        i, y = K.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2), (K.tensor(0), x))
        assert int(i) == 3 and y.tolist() == [8.0, 8.0]
    assert kiln.typename(kiln.ones(2)) == "kiln.FloatTensor" and kiln.typename(3) == torch.typename(3)
    assert kiln.typename(kiln.ones(2, dtype=kiln.int64)) == "kiln.LongTensor"
    assert kiln.compiled_with_cxx11_abi() and not kiln.is_warn_always_enabled()


def test_poisoned_memory_makes_fresh_blocks_nan():
    """KILN_POISON_MEMORY=1 (a test tool) fills every block the allocator hands out with 0xFF
    bytes, reused blocks too, so that a kernel reading memory it never wrote shows."""
    import os
    import subprocess
    import sys
    code = ("import kiln\n"
            "a = kiln.ones(64); del a\n"  # a block that goes back to the cache, holding ones
            "print(kiln.empty(64).isnan().all().item(),\n"
            "      kiln.empty(5, dtype=kiln.int32).tolist(),\n"
            "      kiln.empty(3, dtype=kiln.bfloat16).float().isnan().all().item())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "KILN_POISON_MEMORY": "1"}, check=True).stdout
    assert out.split() == ["True", "[-1,", "-1,", "-1,", "-1,", "-1]", "True"]
