"""kiln.onnx keeps the values a graph computes from tensor shapes (Shape / Size, then Gather,
Unsqueeze, Concat, Cast, Equal, ...) between runs and reuses them while the shapes repeat
(shape_cache.cpp, decision 0069). Results must be ONNX Runtime's whatever the order of input
shapes, also inside an If branch reading the main graph's shape values; outputs that are kept
values (or initializers) go out as copies, so writing into them changes no later run."""
import numpy as np

import kiln
import kiln.onnx

from test_onnx import BOOL, F32, I64, helper, init, make, save, to_kiln, vi  # noqa: F401
from test_onnx_fusion import ort_unoptimized


def _reshape_by_shape_model():
    # y = x reshaped to [rows * 2, -1] with rows read from x's shape; s = the target shape
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
        helper.make_node("Mul", ["rows", "two"], ["rows2"]),
        helper.make_node("Unsqueeze", ["rows2", "axes"], ["rows2_1d"]),
        helper.make_node("Concat", ["rows2_1d", "minus_one"], ["s"], axis=0),
        helper.make_node("Reshape", ["x", "s"], ["y"]),
    ]
    inits = [init("zero", np.array(0, np.int64)), init("two", np.array(2, np.int64)),
             init("axes", np.array([0], np.int64)), init("minus_one", np.array([-1], np.int64))]
    return make(nodes, [vi("x", F32, ["n", "c"])], [vi("y", F32, ["a", "b"]), vi("s", I64, [2])],
                inits)


def test_shape_values_follow_every_change_of_shape(tmp_path):
    path = save(_reshape_by_shape_model(), tmp_path)
    km = kiln.onnx.load(path)
    r = np.random.default_rng(0)
    for rows, cols in [(4, 6), (4, 6), (2, 10), (4, 6), (6, 2), (2, 10), (2, 10)]:
        x = r.standard_normal((rows, cols)).astype(np.float32)
        want = ort_unoptimized(path, {"x": x})
        out = km.run({"x": to_kiln(x)})
        np.testing.assert_array_equal(out["y"].numpy(), want[0])
        np.testing.assert_array_equal(out["s"].numpy(), want[1])
        # the caller writes into the shape output: the next run must not see it
        out["s"].fill_(7)


def test_branch_reads_the_main_graphs_shape_values(tmp_path):
    then_g = helper.make_graph(
        [helper.make_node("Unsqueeze", ["cols", "axes"], ["cols_1d"]),
         helper.make_node("Concat", ["minus_one", "cols_1d"], ["t_s"], axis=0),
         helper.make_node("Reshape", ["x", "t_s"], ["t_y"])],
        "then", [], [vi("t_y", F32, ["a", "b"])])
    else_g = helper.make_graph(
        [helper.make_node("Unsqueeze", ["cols", "axes"], ["e_1d"]),
         helper.make_node("Concat", ["e_1d", "minus_one"], ["e_s"], axis=0),
         helper.make_node("Reshape", ["x", "e_s"], ["e_y"])],
        "else", [], [vi("e_y", F32, ["a", "b"])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["cols"], axis=0),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [init("one", np.array(1, np.int64)), init("axes", np.array([0], np.int64)),
             init("minus_one", np.array([-1], np.int64))]
    model = make(nodes, [vi("x", F32, ["n", "c"]), vi("cond", BOOL, [])], [vi("y", F32, ["a", "b"])],
                 inits)
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    r = np.random.default_rng(1)
    for rows, cols, cond in [(3, 4, True), (3, 4, True), (2, 6, True), (3, 4, False),
                             (5, 2, False), (3, 4, True), (5, 2, False)]:
        x = r.standard_normal((rows, cols)).astype(np.float32)
        feeds = {"x": x, "cond": np.array(cond)}
        want = ort_unoptimized(path, feeds)[0]
        got = km.run({k: to_kiln(v) for k, v in feeds.items()})["y"].numpy()
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_outputs_that_are_the_models_own_memory_are_copies(tmp_path):
    # An initializer returned through Identity, and a folded constant: writing into the
    # returned tensors must change neither the model nor the next run.
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Identity", ["w"], ["w_out"]),
             helper.make_node("Add", ["x", "w"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3])], [vi("w_out", F32, [2, 3]), vi("y", F32, [2, 3])],
                 [init("w", w)])
    km = kiln.onnx.load(save(model, tmp_path))
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        out = km.run({"x": to_kiln(x)})
        np.testing.assert_array_equal(out["w_out"].numpy(), w)
        np.testing.assert_array_equal(out["y"].numpy(), x + w)
        out["w_out"].fill_(-1)


def test_large_shape_derived_values_are_not_kept(tmp_path):
    # ConstantOfShape(Shape(x)) is shape-derived but as large as x: it runs every time and
    # holds no memory between runs.
    one = helper.make_tensor("one", F32, [1], [1.0])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=one),
             helper.make_node("Add", ["x", "ones"], ["y"])]
    model = make(nodes, [vi("x", F32, ["a", "b"])], [vi("y", F32, ["a", "b"])])
    km = kiln.onnx.load(save(model, tmp_path))
    cpu = kiln.device("cpu")
    x = to_kiln(np.zeros((256, 256), np.float32))
    base = kiln.memory_allocated(cpu)
    for _ in range(2):
        y = km.run({"x": x})["y"]
        np.testing.assert_array_equal(y.numpy(), np.ones((256, 256), np.float32))
        del y
        assert kiln.memory_allocated(cpu) == base
    small = to_kiln(np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(km.run({"x": small})["y"].numpy(), np.ones((2, 3)))
