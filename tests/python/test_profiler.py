"""kiln.profiler: op timings aggregated by op and device, with torch.profiler's shape."""
import pytest

import kiln


def test_profile_counts_ops_and_formats_a_table():
    a = kiln.ones(32, 32)
    with kiln.profiler.profile() as prof:
        for _ in range(4):
            a = a + 1
        kiln.matmul(a, a)
    events = prof.key_averages()
    by_key = {(e.key, e.device_type): e for e in events}
    assert by_key[("add", "cpu")].count == 4
    assert by_key[("add", "cpu")].cpu_time_total > 0
    assert by_key[("add", "cpu")].cpu_time == pytest.approx(by_key[("add", "cpu")].cpu_time_total / 4)
    table = events.table(sort_by="count", row_limit=1)
    assert table.splitlines()[2].split()[0] == "add"
    assert table.splitlines()[-1].startswith("total")
    with pytest.raises(ValueError, match="sort_by"):
        events.table(sort_by="bogus")


def test_profile_stops_recording_after_the_block():
    with kiln.profiler.profile() as prof:
        kiln.ones(3) * 2
    kiln.ones(3) * 2
    assert sum(e.count for e in prof.key_averages() if e.key == "mul") == 1
    disabled = kiln.profiler.profile(enabled=False)
    with disabled:
        kiln.ones(3) * 2
    with pytest.raises(RuntimeError):
        disabled.key_averages()
