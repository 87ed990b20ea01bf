"""Chrome trace export of a kiln.profiler window (prof.export_chrome_trace and
tensorboard_trace_handler): the Trace Event Format's JSON object form,
{"traceEvents": [...], ...}, which chrome://tracing, Perfetto and TensorBoard's profiler
plugin read.

Every op call and record_function range is a complete event ("ph": "X") with ts / dur in
microseconds from the window's start, pid the process and tid kiln's thread number; ops are
category "cpu_op" and ranges "user_annotation", as torch's traces. With record_shapes the args
carry "Input Dims" / "Input type" (kiln's dtype names: "float32", not torch's "float") and
"Output Dims"; with with_flops a "flops" count."""
import gzip
import json
import os
import socket
import time


def chrome_trace(events, metadata=None):
    """The trace as a JSON-ready dict."""
    pid = os.getpid()
    trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
              "args": {"name": "python"}}]
    for t in sorted({e.thread for e in events}):
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t, "ts": 0,
                      "args": {"name": f"thread {t}"}})
        trace.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": t, "ts": 0,
                      "args": {"sort_index": t}})
    for e in events:
        args = {"External id": e.id}
        if not e.is_user_annotation:
            args["Sequence number"] = e.sequence_nr
            args["Device"] = e.device_type
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
                args["Input type"] = e.input_dtypes
                args["Output Dims"] = e.output_shapes
            if e.flops:
                args["flops"] = e.flops
        trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                      "name": e.name, "pid": pid, "tid": e.thread,
                      "ts": round(e.time_range.start, 3), "dur": round(e.cpu_time_total, 3),
                      "args": args})
    doc = {"schemaVersion": 1, "displayTimeUnit": "ms"}
    doc.update(metadata or {})
    doc["traceEvents"] = trace
    return doc


def write_chrome_trace(path, events, metadata=None):
    """Writes the trace to path (gzip-compressed when path ends with .gz)."""
    doc = chrome_trace(events, metadata)
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False,
                              use_python_export=False):
    """An on_trace_ready handler writing each saved window's chrome trace to dir_name as
    {worker_name}.{time in ns}.pt.trace.json[.gz], torch's naming (worker_name defaults to
    {hostname}_{pid}), for TensorBoard's profiler plugin or Perfetto. use_python_export is
    accepted for torch's signature; kiln always writes from Python."""
    def handler(prof):
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as e:
            raise RuntimeError("Can't create directory: " + str(dir_name)) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler
