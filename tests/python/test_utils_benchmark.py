"""kiln.utils.benchmark against torch.utils.benchmark 2.13. The statistics, reprs and
Compare tables are compared on identical, hand-made times (timing values themselves are
never asserted beyond sanity); Timer runs use tiny min_run_time."""
import pickle
import re

import pytest

torch = pytest.importorskip("torch")
import torch.utils.benchmark as TB  # noqa: E402

import kiln  # noqa: E402
import kiln.utils.benchmark as KB  # noqa: E402

TIME_SETS = {
    "one": [2.5e-5],
    "two": [1.0e-6, 1.4e-6],
    "three": [3.0e-3, 3.1e-3, 2.9e-3],
    "tight": [1.00e-4, 1.01e-4, 0.99e-4, 1.02e-4, 1.00e-4, 0.98e-4, 1.01e-4],
    "spread": [5e-7, 9e-7, 4e-7, 1.3e-6, 7e-7, 6e-7, 2.2e-6, 8e-7],
    "moderate": [2.0e-2, 2.3e-2, 2.1e-2, 2.4e-2, 2.2e-2, 2.05e-2],
    "long": [1.5 + 0.01 * ((7 * i) % 13) for i in range(20)],
    "nanos": [3.1e-8 + 1e-10 * ((5 * i) % 11) for i in range(40)],
}


def _measurement(B, times, number_per_run=10, **spec):
    spec = {"stmt": "y = x + 1", "setup": "pass", **spec}
    return B.Measurement(number_per_run=number_per_run, raw_times=list(times),
                         task_spec=B.TaskSpec(**spec))


def _repr_body(m):
    """repr without the first line (the object's address)."""
    return repr(m).split("\n", 1)[1]


# --- common ---------------------------------------------------------------------------------

def test_exports_match_torch():
    for name in ("Timer", "Measurement", "TaskSpec", "Compare", "Colorize", "Language",
                 "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
                 "set_torch_threads", "timer"):
        assert hasattr(TB, name) and hasattr(KB, name), name
    from kiln.utils.benchmark.utils import common, compare, timer
    assert common.Measurement is KB.Measurement and timer.Timer is KB.Timer
    assert compare.Compare is KB.Compare
    assert KB.Measurement.__module__ == "kiln.utils.benchmark.utils.common"


@pytest.mark.parametrize("t", [3.2e-10, 5e-9, 4.5e-7, 2e-5, 2e-4, 0.3, 12.0, 5000.0, 2e6])
def test_select_unit(t):
    assert KB.select_unit(t) == TB.select_unit(t)
    unit = KB.select_unit(t)[0]
    assert KB.unit_to_english(unit) == TB.unit_to_english(unit)


@pytest.mark.parametrize("t", [0.0, -1e-3, float("nan")])
def test_select_unit_degenerate_like_torch(t):
    got, want = _error(KB.select_unit, t), _error(TB.select_unit, t)
    assert got == want and got is not None


@pytest.mark.parametrize("x,n", [(3.14159, 2), (3.14159, 4), (0.000123456, 3), (98765.4, 2),
                                 (-2.71828, 3), (1.0, 1), (0.5, 1), (123.456, 1)])
def test_trim_sigfig(x, n):
    # torch rounds in float32: agreement to float32 precision.
    assert KB.trim_sigfig(x, n) == pytest.approx(TB.trim_sigfig(x, n), rel=1e-6)


def test_trim_sigfig_rejects_fractional_figures():
    with pytest.raises(AssertionError, match="must be an integer"):
        KB.trim_sigfig(1.5, 2.5)


def test_ordered_unique():
    data = [3, 1, 3, "a", 1, None, "a", 2]
    assert KB.ordered_unique(data) == TB.ordered_unique(data) == [3, 1, "a", None, 2]


def test_set_torch_threads_restores_kiln_threads():
    prior = kiln.get_num_threads()
    with KB.set_torch_threads(1):
        assert kiln.get_num_threads() == 1
    assert kiln.get_num_threads() == prior
    with pytest.raises(RuntimeError, match="inside"):
        with KB.set_torch_threads(1):
            raise RuntimeError("inside")
    assert kiln.get_num_threads() == prior


TASK_SPECS = [
    dict(stmt="x + y", setup="pass"),
    dict(stmt="x + y", setup="x = 1", label="add", sub_label="ints"),
    dict(stmt="x + y", setup="", sub_label="ints", description="n=1"),
    dict(stmt="a = 1\nb = a + 1", setup="x = 1\ny = 2", description="two lines"),
    dict(stmt="a = 1\nb = a + 1", setup="pass", sub_label="s"),
    dict(stmt="f()", setup="pass", label="calls", env="env A", num_threads=4),
]


@pytest.mark.parametrize("spec", TASK_SPECS, ids=[str(i) for i in range(len(TASK_SPECS))])
def test_task_spec(spec):
    k, t = KB.TaskSpec(**spec), TB.TaskSpec(**spec)
    assert (k.title, k.setup_str(), k.summarize()) == (t.title, t.setup_str(), t.summarize())
    assert hash(k) == hash(KB.TaskSpec(**spec)) and k == KB.TaskSpec(**spec)


# --- Measurement ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(TIME_SETS))
def test_measurement_statistics(name):
    k = _measurement(KB, TIME_SETS[name])
    t = _measurement(TB, TIME_SETS[name])
    assert k.times == t.times
    for attribute in ("median", "mean", "iqr"):
        assert getattr(k, attribute) == pytest.approx(getattr(t, attribute), rel=1e-12,
                                                      abs=1e-20)
    assert k.significant_figures == t.significant_figures
    assert k.has_warnings == t.has_warnings
    for threshold in (0.01, 0.1, 0.25, 1.0):
        assert k.meets_confidence(threshold) == t.meets_confidence(threshold)


@pytest.mark.parametrize("name", sorted(TIME_SETS))
@pytest.mark.parametrize("spec", TASK_SPECS[:5], ids=[str(i) for i in range(5)])
def test_measurement_repr(name, spec):
    k = _measurement(KB, TIME_SETS[name], number_per_run=3, **spec)
    t = _measurement(TB, TIME_SETS[name], number_per_run=3, **spec)
    assert _repr_body(k) == _repr_body(t)
    assert repr(k).startswith("<kiln.utils.benchmark.utils.common.Measurement object at 0x")


def test_measurement_repr_threads():
    k = _measurement(KB, TIME_SETS["tight"], num_threads=4)
    t = _measurement(TB, TIME_SETS["tight"], num_threads=4)
    assert _repr_body(k) == _repr_body(t)
    assert "4 threads" in repr(k)


def test_measurement_forwards_task_spec_and_pickles():
    m = _measurement(KB, TIME_SETS["spread"], label="L", sub_label="S", description="D",
                     env="E", num_threads=2)
    assert (m.label, m.sub_label, m.description, m.env, m.num_threads, m.stmt) == \
        ("L", "S", "D", "E", 2, "y = x + 1")
    assert m.title == "L: S" and m.as_row_name == "S"
    assert _measurement(KB, [1.0]).env is None  # unspecified env, as torch in practice
    with pytest.raises(AttributeError):
        m.not_a_field  # noqa: B018
    m.metadata = {"run": 1}
    back = pickle.loads(pickle.dumps(m))
    assert back.raw_times == m.raw_times and back.task_spec == m.task_spec
    assert back.median == m.median and back.metadata == {"run": 1}


def test_measurement_merge():
    def build(B):
        return [_measurement(B, [1e-3, 2e-3], number_per_run=2),
                _measurement(B, [3e-3], number_per_run=1, label="other"),
                _measurement(B, [4e-3, 5e-3, 6e-3], number_per_run=4)]
    k, t = KB.Measurement.merge(build(KB)), TB.Measurement.merge(build(TB))
    assert [(m.number_per_run, m.raw_times, m.label) for m in k] == \
        [(m.number_per_run, m.raw_times, m.label) for m in t]
    assert all(m.metadata is None for m in k)


# --- Compare --------------------------------------------------------------------------------

def _results(B):
    """Two labels, three statements, two thread counts, three descriptions, one gap."""
    out = []
    for li, label in enumerate(("add", "multiply")):
        for si, stmt in enumerate(("x + y", "kiln.add(x, y)", "x.add_(y)")):
            for threads in (1, 4):
                for di, n in enumerate((1, 64, 4096)):
                    if (li, si, threads, di) == (0, 2, 4, 1):
                        continue  # a missing cell renders blank
                    base = (1 + si) * (1 + 3 * di) * (1.7 if li else 1.0) / threads * 1e-6
                    times = [base * (1 + 0.03 * ((7 * j + si + di) % 5)) for j in range(9)]
                    if (si, di) == (1, 2):
                        times[::2] = [t * 1.8 for t in times[::2]]  # a high-variance one
                    out.append(_measurement(B, times, number_per_run=100, stmt=stmt,
                                            label=label, sub_label=f"s{si}",
                                            description=f"n={n}", num_threads=threads))
    return out


def _compare(B, options=(), results=_results):
    c = B.Compare(results(B))
    for option in options:
        if option == "rowwise":
            c.colorize(rowwise=True)
        else:
            getattr(c, option)()
    return str(c)


@pytest.mark.parametrize("options", [(), ("trim_significant_figures",), ("colorize",),
                                     ("rowwise",), ("highlight_warnings",),
                                     ("trim_significant_figures", "colorize",
                                      "highlight_warnings")],
                         ids=lambda o: "-".join(o) or "plain")
def test_compare_table_matches_torch(options):
    k, t = _compare(KB, options), _compare(TB, options)
    assert k == t
    assert "Times are in nanoseconds (ns)." in k


def test_compare_envs_and_replicates():
    def results(B):
        out = []
        for env in ("before", "after"):
            for rep in range(2):  # replicates of one task are merged
                out.append(_measurement(B, [2e-3 * (1 + 0.01 * rep), 2.1e-3],
                                        number_per_run=5, env=env, label="L",
                                        description="d", sub_label="row"))
        out.append(_measurement(B, [9e-4, 9.5e-4], env="before", label="L", description="e",
                                sub_label="row"))
        return out
    k, t = _compare(KB, results=results), _compare(TB, results=results)
    assert k == t and "(before)" in k and "(after)" in k


def test_compare_print_and_extend(capsys):
    c = KB.Compare(_results(KB)[:3])
    c.extend_results(_results(KB)[3:6])
    c.print()
    printed = capsys.readouterr().out
    t = TB.Compare(_results(TB)[:3])
    t.extend_results(_results(TB)[3:6])
    assert printed == str(t) + "\n"
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`, got "
                                         "<class 'int'> instead."):
        c.extend_results([1])


def test_compare_without_descriptions():
    # torch 2.13's Compare fails on results without a description (len(None)); kiln's
    # renders them in one unnamed column.
    m = _measurement(KB, TIME_SETS["tight"], label="L")
    text = str(KB.Compare([m]))
    assert text.startswith("[") and "y = x + 1" in text and "|  10.0" in text


# --- Timer ----------------------------------------------------------------------------------

def _sane(m, number=None):
    assert isinstance(m, KB.Measurement)
    assert m.raw_times and all(t > 0 for t in m.raw_times)
    assert m.median > 0 and m.mean > 0 and m.iqr >= 0
    if number is not None:
        assert m.number_per_run == number


def test_timer_timeit():
    g = {"x": kiln.ones(4)}
    timer = KB.Timer("y = x + 1", globals=g, label="add", sub_label="ones",
                     description="n=4")
    m = timer.timeit(number=20)
    _sane(m, 20)
    assert len(m.raw_times) == 1
    assert (m.label, m.sub_label, m.description, m.num_threads) == ("add", "ones", "n=4", 1)
    assert set(g) == {"x"}  # the caller's globals are copied, not written to
    assert "1 measurement, 20 runs , 1 thread" in repr(m)


def test_timer_blocked_autorange_and_callback():
    seen = []
    timer = KB.Timer("y = kiln.add(x, x)", setup="x = kiln.zeros(8)")
    m = timer.blocked_autorange(callback=lambda n, t: seen.append((n, t)), min_run_time=1e-3)
    _sane(m)
    assert sum(m.raw_times) >= 1e-3
    assert [n for n, _ in seen] == [m.number_per_run] * len(m.raw_times)
    assert [t for _, t in seen] == m.raw_times


def test_timer_adaptive_autorange():
    m = KB.Timer("sum(range(50))").adaptive_autorange(min_run_time=1e-3, max_run_time=0.05)
    _sane(m)


def test_timer_num_threads_set_and_restored():
    prior = kiln.get_num_threads()
    seen = []
    timer = KB.Timer("seen.append(kiln.get_num_threads())", globals={"seen": seen},
                     num_threads=1)
    timer.timeit(number=3)
    assert seen and set(seen) == {1}
    assert kiln.get_num_threads() == prior
    assert timer.timeit(number=2).num_threads == 1


def test_timer_code_is_dedented_like_torch():
    stmt = """
        a = 1
        b = a + 2
    """
    setup = """
        import math
    """
    k = KB.Timer(stmt, setup=setup)
    t = TB.Timer(stmt, setup=setup)
    assert k._task_spec.stmt == t._task_spec.stmt and k._task_spec.setup == t._task_spec.setup
    _sane(k.timeit(number=5), 5)


def _error(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (the type is compared)
        return type(error), str(error)
    return None


@pytest.mark.parametrize("args,kwargs", [
    ((1,), {}),
    (("x",), dict(global_setup="int x;")),
    (("x",), dict(language="fortran")),
])
def test_timer_constructor_errors_match_torch(args, kwargs):
    got = _error(KB.Timer, *args, **kwargs)
    assert got is not None and got == _error(TB.Timer, *args, **kwargs)


def test_timer_unsupported_methods():
    k, t = KB.Timer("pass"), TB.Timer("pass")
    for method in ("repeat", "autorange"):
        assert _error(getattr(k, method)) == _error(getattr(t, method))
        assert _error(getattr(k, method))[0] is NotImplementedError
    with pytest.raises(NotImplementedError, match="valgrind"):
        k.collect_callgrind()
    with pytest.raises(NotImplementedError, match="valgrind"):
        k.collect_callgrind(number=10, repeats=2)
    with pytest.raises(ValueError, match="`repeats` must be >= 1"):
        k.collect_callgrind(repeats=0)
    for language in ("cpp", "c++", KB.Language.CPP):
        with pytest.raises(NotImplementedError, match="C\\+\\+"):
            KB.Timer("x", language=language)


def test_timer_statement_errors_surface():
    with pytest.raises(NameError):
        KB.Timer("undefined_name + 1").timeit(number=1)
    with pytest.raises(ZeroDivisionError):
        KB.Timer("pass", setup="1 / 0").timeit(number=1)


def test_timer_measurement_repr_shape_like_torch():
    k = KB.Timer("x = 1", label="L", description="D").blocked_autorange(min_run_time=1e-3)
    t = TB.Timer("x = 1", label="L", description="D").blocked_autorange(min_run_time=1e-3)
    shape = [re.sub(r"[\d.]+", "N", line) for line in _repr_body(k).splitlines()[:2]]
    assert shape == [re.sub(r"[\d.]+", "N", line) for line in _repr_body(t).splitlines()[:2]]


def test_timer_clock():
    a = KB.timer()
    b = KB.timer()
    assert b >= a
