"""kiln.profiler events, chrome traces, shapes and FLOPs, and kiln.utils.flop_counter: FLOP
counts equal torch.utils.flop_counter's for the same models and shapes (forward and
backward, per module), traces are valid Chrome trace JSON, key_averages groups by input
shape as torch's."""
import gzip
import json
import os

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounter

import kiln
from kiln.utils.flop_counter import FlopCounterMode


def _counts(lib, build, inputs, backward, per_module):
    """{module: total FLOPs} of build(lib)(*inputs) (and its backward) under lib's counter."""
    lib.manual_seed(0)
    model = build(lib)
    counter_cls = FlopCounterMode if lib is kiln else TorchFlopCounter
    args = [lib.tensor(a, requires_grad=backward) for a in inputs]
    counter = counter_cls(display=False)  # both follow every module (global module hooks)
    with counter:
        out = model(*args)
        if isinstance(out, tuple):
            out = out[0]
        if backward:
            out.sum().backward()
    total = counter.get_total_flops()
    counts = {mod: sum(ops.values()) for mod, ops in counter.get_flop_counts().items()}
    assert total == counts["Global"]
    return counts


def _same_as_torch(build, shapes, backward=True, per_module=True):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    k = _counts(kiln, build, inputs, backward, per_module)
    t = _counts(torch, build, inputs, backward, per_module)
    assert k == t
    return k


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(),
                         nn.Sequential(nn.Linear(7, 6), nn.Tanh()), nn.Linear(6, 2))


def test_linear_and_mlp_flops_as_torch():
    assert _same_as_torch(lambda lib: lib.nn.Linear(5, 3), [(4, 5)], backward=False) == {
        "Global": 120, "Linear": 120}
    assert _same_as_torch(lambda lib: lib.nn.Linear(5, 3), [(2, 4, 5)])["Global"] == 240 * 3
    assert _same_as_torch(_mlp, [(4, 5)], backward=False)["Global"] == 712
    counts = _same_as_torch(_mlp, [(4, 5)])
    assert set(counts) == {"Global", "Sequential", "Sequential.0", "Sequential.2",
                           "Sequential.2.0", "Sequential.3"}
    # forward, weight gradients and input gradients (x requires grad): 712 each
    assert counts["Global"] == counts["Sequential"] == 712 * 3


def test_per_op_counts_and_table_of_a_sequential():
    model = _mlp(kiln)
    with FlopCounterMode(display=False) as counter:
        model(kiln.randn(4, 5, requires_grad=True)).sum().backward()
    counts = counter.get_flop_counts()
    # forward addmm (2*4*N*K), backward mm for the input's and the weight's gradients
    assert counts["Sequential.0"] == {"addmm": 280, "mm": 560}
    assert counts["Sequential.3"] == {"addmm": 96, "mm": 192}
    table = counter.get_table(depth=1)
    assert table.splitlines()[0].split() == ["Module", "FLOP", "%", "Total"]
    assert "Sequential" in table and "Sequential.0" not in table and " - addmm" in table
    assert "Sequential.2.0" in counter.get_table(depth=3)


@pytest.mark.parametrize("groups", [1, 2])
def test_convolution_flops_as_torch(groups):
    def build(lib):
        nn = lib.nn
        return nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=groups), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, padding=1),
                             nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1,
                                                groups=groups),
                             nn.Flatten(), nn.Linear(4 * 10 * 10, 3))
    _same_as_torch(build, [(2, 4, 10, 10)], backward=False)
    _same_as_torch(build, [(2, 4, 10, 10)])
    conv1d = lambda lib: lib.nn.Sequential(  # noqa: E731
        lib.nn.Conv1d(3, 6, 5, stride=2, dilation=2), lib.nn.ConvTranspose1d(6, 6, 3, groups=3))
    _same_as_torch(conv1d, [(2, 3, 20)])


class _Product:
    """A module around a binary op (the torch / kiln function of that name)."""

    def __init__(self, lib, name):
        self.fn = getattr(lib, name)

    def __call__(self, a, b):
        return self.fn(a, b)


@pytest.mark.parametrize("name,shapes,backward", [
    ("bmm", [(3, 4, 5), (3, 5, 6)], True),
    ("matmul", [(2, 3, 4, 5), (5, 6)], True),
    ("matmul", [(2, 1, 4, 5), (3, 5, 6)], True),
    ("matmul", [(4, 5), (2, 5, 6)], True),
    ("matmul", [(5,), (5, 6)], True),
    # a matrix-vector product is not counted, as torch (its backward, which torch runs as an
    # outer product and mv, runs in kiln as matmuls with a unit dim, which are counted)
    ("matmul", [(4, 5), (5,)], False),
    ("mm", [(4, 5), (5, 6)], True),
])
def test_products_flops_as_torch(name, shapes, backward):
    _same_as_torch(lambda lib: _Product(lib, name), shapes, backward, per_module=False)


def test_attention_flops_as_torch():
    def build(lib):
        return lib.nn.MultiheadAttention(8, 2, batch_first=True)

    class SelfAttention:
        def __init__(self, lib):
            self.m = build(lib)

        def __call__(self, x):
            return self.m(x, x, x)[0]
    _same_as_torch(SelfAttention, [(2, 4, 8)], per_module=False)
    # kiln's scaled_dot_product_attention runs as matmuls: the counts of torch's math kernel
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (np.random.default_rng(i).standard_normal(s).astype(np.float32)
               for i, s in enumerate([(2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)]))
    with sdpa_kernel(SDPBackend.MATH), TorchFlopCounter(display=False) as tc:
        ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True).sum().backward()
    with FlopCounterMode(display=False) as kc:
        ks = [kiln.tensor(a, requires_grad=True) for a in (q, k, v)]
        kiln.nn.functional.scaled_dot_product_attention(*ks, is_causal=True).sum().backward()
    assert kc.get_total_flops() == tc.get_total_flops() == 11232


def test_flop_counter_display_custom_mapping_and_errors(capsys):
    with FlopCounterMode() as counter:
        kiln.mm(kiln.ones(2, 3), kiln.ones(3, 4))
        assert counter.get_total_flops() == 48  # readable inside the context too
    assert "Global" in capsys.readouterr().out
    custom = FlopCounterMode(display=False, custom_mapping={"relu": lambda x, out_shape: 7})
    with custom:
        kiln.relu(kiln.ones(3))
    assert custom.get_flop_counts()["Global"] == {"relu": 7}
    # one profiler at a time, either way round; the outer one keeps working
    with kiln.profiler.profile() as prof:
        with pytest.raises(RuntimeError, match="one profiler at a time"):
            FlopCounterMode().__enter__()
        with pytest.raises(RuntimeError, match="one profiler at a time"):
            kiln.profiler.profile().__enter__()
        kiln.ones(2) + 1
    assert any(e.key == "add" for e in prof.key_averages())
    with FlopCounterMode(display=False):
        with pytest.raises(RuntimeError, match="one profiler at a time"):
            kiln.profiler.profile().__enter__()
    # an error inside the context stops the profiler and removes the module hooks
    model = kiln.nn.Linear(2, 2)
    with pytest.raises(ValueError):
        with FlopCounterMode(display=False):
            model(kiln.ones(1, 2))
            raise ValueError
    assert not kiln._C._profiler_enabled()
    from kiln.nn.modules import module as module_module
    assert not module_module._global_forward_pre_hooks
    assert not module_module._global_forward_hooks
    with pytest.warns(UserWarning, match="mods argument is not needed"):
        FlopCounterMode(model, display=False)


def _profiled_mlp(**kw):
    model = _mlp(kiln)
    with kiln.profiler.profile(**kw) as prof:
        with kiln.profiler.record_function("step"):
            for batch in (4, 4, 3):
                model(kiln.randn(batch, 5))
    return prof


def test_chrome_trace_structure(tmp_path):
    prof = _profiled_mlp(record_shapes=True)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and e["name"] and isinstance(e["pid"], int)
        assert e["cat"] in ("cpu_op", "user_annotation")
    (step,) = [e for e in complete if e["cat"] == "user_annotation"]
    ops = [e for e in complete if e["cat"] == "cpu_op"]
    assert {e["tid"] for e in ops} == {step["tid"]}
    for e in ops:  # the range encloses its ops in time
        assert step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-3
    addmm = [e for e in ops if e["name"] == "addmm"][0]
    assert addmm["args"]["Input Dims"] == [[7], [4, 5], [5, 7]]
    assert addmm["args"]["Input type"] == ["float32"] * 3
    # gzip when the name says so
    prof.export_chrome_trace(str(tmp_path / "trace.json.gz"))
    with gzip.open(tmp_path / "trace.json.gz", "rt") as f:
        assert len([e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]) == len(complete)
    with pytest.raises(NotImplementedError, match="stacks"):
        prof.export_stacks(str(tmp_path / "stacks.txt"))


def test_tensorboard_trace_handler_writes_a_trace_per_window(tmp_path):
    handler = kiln.profiler.tensorboard_trace_handler(str(tmp_path / "logs"), worker_name="w0")
    sched = kiln.profiler.schedule(wait=1, warmup=1, active=1, repeat=2)
    with kiln.profiler.profile(schedule=sched, on_trace_ready=handler) as prof:
        for i in range(8):
            with kiln.profiler.record_function(f"step{i}"):
                kiln.ones(3) * i
            prof.step()
    files = sorted(os.listdir(tmp_path / "logs"))
    assert len(files) == 2 and all(f.startswith("w0.") and f.endswith(".pt.trace.json")
                                   for f in files)
    names = [{e["name"] for e in json.loads((tmp_path / "logs" / f).read_text())["traceEvents"]
              if e.get("cat") == "user_annotation"} for f in files]
    assert names == [{"step2"}, {"step5"}]


def test_events_order_nesting_and_self_time():
    prof = _profiled_mlp()
    events = prof.events()
    assert events[0].name == "step" and events[0].is_user_annotation
    starts = [e.time_range.start for e in events]
    assert starts == sorted(starts) and [e.id for e in events] == list(range(1, len(events) + 1))
    step = events[0]
    assert all(e.cpu_parent is step for e in events[1:])
    assert len(step.cpu_children) == len(events) - 1
    assert step.self_cpu_time_total == pytest.approx(
        step.cpu_time_total - sum(e.cpu_time_total for e in events[1:]))
    assert [e.name for e in events if e.name in ("addmm", "relu", "tanh")][:4] == [
        "addmm", "relu", "addmm", "tanh"]
    assert all(e.cpu_time_total >= 0 and e.device_type == "cpu" for e in events)
    assert events[1].input_shapes == []  # record_shapes=False


def test_key_averages_by_input_shape():
    prof = _profiled_mlp(record_shapes=True)
    plain = {e.key: e for e in prof.key_averages()}
    assert plain["addmm"].count == 9 and plain["addmm"].input_shapes == []
    by_shape = {(e.key, str(e.input_shapes)): e
                for e in prof.key_averages(group_by_input_shape=True)}
    assert by_shape[("addmm", "[[7], [4, 5], [5, 7]]")].count == 2
    assert by_shape[("addmm", "[[7], [3, 5], [5, 7]]")].count == 1
    assert by_shape[("relu", "[[4, 7]]")].count == 2
    avg = by_shape[("addmm", "[[7], [4, 5], [5, 7]]")]
    assert avg.cpu_time == pytest.approx(avg.cpu_time_total / 2)
    assert avg.self_cpu_time_total == pytest.approx(avg.cpu_time_total)  # ops contain nothing
    # (row_limit generous: several rows tie on count, and ties keep no fixed order)
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="count", row_limit=50)
    assert "Input Shapes" in table.splitlines()[0] and "[[7], [4, 5], [5, 7]]" in table
    assert "Input Shapes" not in prof.key_averages().table()


def test_with_flops_totals_and_table():
    model = _mlp(kiln)
    x = kiln.randn(4, 5)
    with kiln.profiler.profile(with_flops=True) as prof:
        model(x)
    with FlopCounterMode(display=False) as counter:
        model(x)
    rows = prof.key_averages()
    assert sum(e.flops for e in rows) == counter.get_total_flops() == 712
    assert {e.key: e.flops for e in rows}["addmm"] == 712
    header = rows.table().splitlines()[0]
    assert "Total FLOPs" in header and "# of Calls" in header and "Self CPU %" in header
    assert rows.table().splitlines()[-1].split()[-1] == "712.000"
    assert prof.record_shapes  # with_flops records shapes, as torch
    with kiln.profiler.profile() as prof:
        model(x)
    assert "FLOPs" not in prof.key_averages().table()
    assert all(e.flops == 0 for e in prof.events())


def test_max_events_and_no_leftovers_after_stop():
    with pytest.warns(UserWarning, match="max_events=3"):
        with kiln.profiler.profile(max_events=3) as prof:
            for _ in range(5):
                kiln.ones(2) + 1
    assert len(prof.events()) == 3 and prof.dropped_events > 0
    assert not kiln._C._profiler_enabled()
    kiln.ones(2) * 2  # after the stop: not recorded anywhere
    with kiln.profiler.profile() as again:
        kiln.ones(2) - 1
    names = [e.name for e in again.events()]
    assert "sub" in names and "add" not in names and "mul" not in names
    assert [e.name for e in prof.events()].count("mul") == 0
    with pytest.raises(ValueError, match="max_events"):
        kiln.profiler.profile(max_events=-1)
