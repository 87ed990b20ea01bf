"""EventList.table(): torch.profiler's summary table in kiln's layout.

The columns are torch's (Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
# of Calls, then Input Shapes when the rows carry shapes and Total FLOPs, scaled to KFLOPs /
MFLOPs / ..., when FLOPs were counted); a Device column is added when ops ran on another
device than the CPU. kiln's layout puts the header first, then a rule, the rows and a last row
named `total` (torch ends with "Self CPU time total: ..."): code reading kiln's earlier table
relies on that."""
import math

# sort_by keys. kiln times every device's ops on the host, so torch's device-time keys sort
# by the host times rather than fail in scripts written for CUDA.
_SORT_KEYS = {
    "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "cpu_time": "cpu_time", "count": "count", "cpu_time_max": "cpu_time_max", "flops": "flops",
    "cuda_time_total": "cpu_time_total", "device_time_total": "cpu_time_total",
    "xpu_time_total": "cpu_time_total", "self_cuda_time_total": "self_cpu_time_total",
    "self_device_time_total": "self_cpu_time_total", "self_xpu_time_total": "self_cpu_time_total",
}

_FLOP_UNITS = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]


def format_time(us, unit=None):
    if unit == "s" or (unit is None and us >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and us >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _percent(part, whole):
    return f"{100.0 * part / whole:.2f}%" if whole > 0 else "0.00%"


def _flop_scale(rows):
    """(divisor, header) from the smallest non-zero count, as torch picks its unit."""
    smallest = min(e.flops for e in rows if e.flops > 0)
    idx = int(max(0, min(math.log10(smallest) / 3, len(_FLOP_UNITS) - 1)))
    return 1000 ** idx, "Total " + _FLOP_UNITS[idx]


def _clip(text, width):
    return text if width is None or len(text) < width - 3 else text[:width - 3] + "..."


def build_table(events, sort_by="cpu_time_total", row_limit=100, max_name_column_width=55,
                max_shapes_column_width=80, header=None, top_level_events_only=False,
                time_unit=None, with_flops=False):
    if sort_by is not None and sort_by not in _SORT_KEYS:
        raise ValueError(f"sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
    rows = list(events)
    if sort_by is not None:
        rows.sort(key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
    if top_level_events_only:
        rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]
    self_total = sum(e.self_cpu_time_total for e in events)
    show_device = any(e.device_type != "cpu" for e in events)
    show_shapes = any(e.input_shapes for e in events)
    show_flops = with_flops and any(e.flops > 0 for e in events)
    scale, flop_header = _flop_scale(events) if show_flops else (1, "")

    headers = ["Name"] + (["Device"] if show_device else []) + [
        "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    if show_shapes:
        headers.append("Input Shapes")
    if show_flops:
        headers.append(flop_header)

    def cells(e):
        c = [_clip(e.key, max_name_column_width)]
        if show_device:
            c.append(e.device_type)
        c += [_percent(e.self_cpu_time_total, self_total),
              format_time(e.self_cpu_time_total, time_unit),
              _percent(e.cpu_time_total, self_total), format_time(e.cpu_time_total, time_unit),
              format_time(e.cpu_time, time_unit), str(e.count)]
        if show_shapes:
            c.append(_clip(str(e.input_shapes), max_shapes_column_width))
        if show_flops:
            c.append(f"{e.flops / scale:.3f}" if e.flops > 0 else "--")
        return c

    body = [cells(e) for e in rows]
    total = ["total"] + ([""] if show_device else []) + [
        "100.00%" if self_total > 0 else "0.00%", format_time(self_total, time_unit), "", "", "",
        str(sum(e.count for e in events))]
    if show_shapes:
        total.append("")
    if show_flops:
        total.append(f"{sum(e.flops for e in events) / scale:.3f}")
    widths = [max(len(r[i]) for r in [headers, total] + body) for i in range(len(headers))]

    def line(values):
        # the name column left-aligned, numbers right-aligned, shapes left-aligned
        out = []
        for i, (v, w) in enumerate(zip(values, widths)):
            left = i == 0 or headers[i] in ("Device", "Input Shapes")
            out.append(v.ljust(w) if left else v.rjust(w))
        return "  ".join(out).rstrip()

    lines = [line(headers), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    if header is not None:
        lines.insert(0, header)
    lines += [line(r) for r in body]
    lines.append(line(total))
    return "\n".join(lines)
