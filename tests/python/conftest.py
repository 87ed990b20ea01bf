"""pytest configuration of the kiln oracle suite. PyTorch is required: without it the
oracle modules are not collected and test_torch_available fails (nothing is skipped). The
run ends with the coverage line "oracle: N ops, M cases"."""
import glob
import os

# The xpu tests run on any OpenCL device: a CPU driver (PoCL) where the machine has no GPU.
os.environ.setdefault("KILN_XPU_DEVICE_TYPES", "all")

try:
    import torch
except ImportError:
    torch = None
    _here = os.path.dirname(__file__)
    collect_ignore = [os.path.basename(p) for p in glob.glob(os.path.join(_here, "test_*.py"))
                      if not p.endswith("test_torch_available.py")]


def pytest_configure(config):
    # torch warns about degenerate inputs that the oracle feeds on purpose.
    config.addinivalue_line("filterwarnings", "ignore:.*degrees of freedom is <= 0:UserWarning")
    config.addinivalue_line("filterwarnings", "ignore:The use of `x.T` on tensors:UserWarning")


def pytest_sessionstart(session):
    # Record which of kiln's registered ops the suite dispatches (printed in the summary).
    import kiln
    kiln._C._op_coverage_start()


def _grouped(counter):
    """{"op: reason": n} -> lines "reason: op, op, ... (n cases)"."""
    by_reason = {}
    for key, n in counter.items():
        op, _, reason = key.partition(": ")
        ops, total = by_reason.get(reason, (set(), 0))
        ops.add(op)
        by_reason[reason] = (ops, total + n)
    return [f"  {reason}: {', '.join(sorted(ops))} ({n} cases)"
            for reason, (ops, n) in sorted(by_reason.items())]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tr = terminalreporter
    if torch is None:
        tr.write_line("oracle: 0 ops, 0 cases (PyTorch is not importable: "
                      "pip install torch==2.13.0)")
        return
    import oracle
    stats = oracle.STATS
    sections = [
        ("known differences (oracle.KNOWN)", stats["known"]),
        ("not implemented in kiln (NotImplementedError where torch works)",
         stats["not_implemented"]),
    ]
    for title, counter in sections:
        if counter:
            tr.write_line(f"{title}, {sum(counter.values())} cases:")
            for line in _grouped(counter):
                tr.write_line(line)
    import kiln
    seen = set(kiln._C._op_coverage_stop())
    registered = sorted(kiln._C._registered_ops())
    missing = [op for op in registered if op not in seen]
    tr.write_line(f"kiln registry ops dispatched by the suite: {len(registered) - len(missing)} "
                  f"of {len(registered)}" + (f" (not reached: {', '.join(missing)})"
                                              if missing else ""))
    tr.write_line(f"oracle: {len(stats['ops'])} ops, {stats['cases']} cases "
                  f"(torch {torch.__version__})")
