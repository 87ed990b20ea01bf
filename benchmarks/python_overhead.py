"""Per-call overhead of a small op from Python: `a + b` on 1-element float32 tensors (and a
call that does no tensor work, `a.dim()`), through kiln's nanobind module, PyTorch, and
optionally a pybind11 binding of the same kiln functions compiled on the fly into /tmp
(--pybind11; needs `pip install pybind11` and a C++ compiler; nothing is written to the repo).

    python benchmarks/python_overhead.py [--pybind11] [--repeat 7] [--number 200000]

Prints ns per call (best of --repeat runs) and the ratio to PyTorch measured in this run.
"""
import argparse
import os
import subprocess
import sys
import sysconfig
import timeit

import kiln
import torch

PYBIND11_SOURCE = r"""
// The same kiln calls as kiln._C's Tensor.__add__ / Tensor.dim, bound with pybind11.
#include <pybind11/pybind11.h>
#include "kiln/kiln.h"
namespace py = pybind11;
PYBIND11_MODULE(kiln_pybind11, m) {
  py::class_<kiln::Tensor>(m, "Tensor")
      .def("__add__", [](const kiln::Tensor& a, const kiln::Tensor& b) { return kiln::add(a, b); },
           py::call_guard<py::gil_scoped_release>(), py::is_operator())
      .def("add_gil_held", [](const kiln::Tensor& a, const kiln::Tensor& b) { return kiln::add(a, b); })
      .def("dim", &kiln::Tensor::dim);
  m.def("ones", [](int64_t n) { return kiln::ones({n}); });
}
"""


def build_pybind11(repo):
    """Compiles the pybind11 module into /tmp and returns it (or None with a reason)."""
    try:
        import pybind11
    except ImportError:
        print("pybind11: not installed (pip install pybind11); skipped")
        return None
    out_dir = "/tmp/kiln_pybind11_bench"
    os.makedirs(out_dir, exist_ok=True)
    src = os.path.join(out_dir, "kiln_pybind11.cpp")
    with open(src, "w") as f:
        f.write(PYBIND11_SOURCE)
    kiln_dir = os.path.dirname(kiln._C.__file__)  # editable installs keep _C apart
    lib = [n for n in os.listdir(kiln_dir) if n.startswith("libkiln.so")][0]
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    target = os.path.join(out_dir, "kiln_pybind11" + ext)
    cmd = [os.environ.get("CXX", "c++"), "-O3", "-DNDEBUG", "-shared", "-fPIC", "-std=c++20",
           "-fvisibility=hidden", f"-I{pybind11.get_include()}",
           f"-I{sysconfig.get_paths()['include']}", f"-I{os.path.join(repo, 'include')}",
           src, os.path.join(kiln_dir, lib), f"-Wl,-rpath,{kiln_dir}", "-o", target]
    print("pybind11: compiling", target, "...", flush=True)
    subprocess.run(cmd, check=True)
    sys.path.insert(0, out_dir)
    import kiln_pybind11
    return kiln_pybind11


def best_ns(stmt, number, repeat, env):
    times = timeit.repeat(stmt, globals=env, number=number, repeat=repeat)
    return min(times) / number * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pybind11", action="store_true", help="also build and time a pybind11 binding")
    ap.add_argument("--number", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    torch.set_num_threads(1)

    rows = []
    env = {"a": kiln.ones(1), "b": kiln.ones(1)}
    rows.append(("kiln (nanobind)", best_ns("a + b", args.number, args.repeat, env),
                 best_ns("a.dim()", args.number, args.repeat, env)))
    tenv = {"a": torch.ones(1), "b": torch.ones(1)}
    torch_add = best_ns("a + b", args.number, args.repeat, tenv)
    torch_dim = best_ns("a.dim()", args.number, args.repeat, tenv)
    rows.append(("torch " + torch.__version__, torch_add, torch_dim))
    if args.pybind11:
        pb = build_pybind11(repo)
        if pb is not None:
            penv = {"a": pb.ones(1), "b": pb.ones(1)}
            rows.append(("kiln (pybind11)", best_ns("a + b", args.number, args.repeat, penv),
                         best_ns("a.dim()", args.number, args.repeat, penv)))
            rows.append(("kiln (pybind11, GIL held)",
                         best_ns("a.add_gil_held(b)", args.number, args.repeat, penv), None))
    # The C++ cost of the op itself (no Python), for reference: kiln's own benchmark is
    # the place for that; here the difference between rows is the binding.
    print(f"{'binding':<28}{'a + b (ns)':>12}{'vs torch':>10}{'a.dim() (ns)':>14}{'vs torch':>10}")
    for name, add_ns, dim_ns in rows:
        dim_s = f"{dim_ns:14.0f}{dim_ns / torch_dim:10.2f}" if dim_ns is not None else ""
        print(f"{name:<28}{add_ns:12.0f}{add_ns / torch_add:10.2f}{dim_s}")


if __name__ == "__main__":
    main()
