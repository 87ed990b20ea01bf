"""Linear algebra, view ops (values, strides, storage offsets, gradients) and shape-building
ops against PyTorch."""
import pytest

from oracle import ALL, FLOATS, NUMERIC, Op, nnf, params, run_op

MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)),
                 ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
                 ((4,), (2, 4, 3)), (("t", (3, 4)), ("t", (4, 5))), ((0, 4), (4, 3)),
                 ((3, 0), (0, 2)), ((3, 4), (5, 6))]
LINALG_DTYPES = NUMERIC


def op(name, fn, inputs, dtypes=ALL, **kw):
    return Op(name, fn, inputs, dtypes=list(dtypes), **kw)


LINALG = [
    op("matmul", lambda L, a, b: L.matmul(a, b), MATMUL_SHAPES, LINALG_DTYPES, tol=8),
    op("operator@", lambda L, a, b: a @ b, MATMUL_SHAPES[:4], LINALG_DTYPES, tol=8),
    op("mm", lambda L, a, b: L.mm(a, b), [((3, 4), (4, 5)), (("t", (3, 4)), (4, 2)),
                                         ((0, 3), (3, 2)), ((3, 4), (3, 4))], LINALG_DTYPES, tol=8),
    op("bmm", lambda L, a, b: L.bmm(a, b), [((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (3, 4, 5))],
       LINALG_DTYPES, tol=8),
    op("addmm", lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2),
       [((3, 5), (3, 4), (4, 5)), ((5,), (3, 4), (4, 5))], FLOATS, tol=8),
    op("baddbmm", lambda L, c, a, b: L.baddbmm(c, a, b, alpha=0.5),
       [((2, 3, 5), (2, 3, 4), (2, 4, 5)), ((3, 5), (2, 3, 4), (2, 4, 5))], FLOATS, tol=8),
    op("outer", lambda L, a, b: L.outer(a, b), [((3,), (4,)), ((0,), (2,))], LINALG_DTYPES),
    op("dot", lambda L, a, b: L.dot(a, b), [((5,), (5,)), ((0,), (0,)), ((3,), (4,))],
       LINALG_DTYPES, tol=8),
    op("linear", lambda L, x, w, b: nnf(L).linear(x, w, b), [((2, 3, 4), (5, 4), (5,)),
                                                             ((4,), (5, 4), (5,))], FLOATS, tol=8),
    op("linear_nobias", lambda L, x, w: nnf(L).linear(x, w), [((3, 4), (5, 4))], FLOATS, tol=8),
]

V = [((2, 3, 4),), (("t", (4, 6)),), (("s", (2, 3, 4)),)]


def view(name, fn, inputs=None, dtypes=("float32", "float64", "int64", "bool", "bfloat16"), **kw):
    return Op(name, fn, inputs or V, dtypes=list(dtypes), check_strides=True, **kw)


VIEWS = [
    view("view", lambda L, x: x.view(-1) if x.is_contiguous() else x.reshape(-1)),
    view("view_shape", lambda L, x: x.view(2, -1), [((2, 3, 4),), ((4, 6),)]),
    view("view_incompatible", lambda L, x: x.view(-1), [(("t", (4, 6)),)]),
    view("reshape", lambda L, x: x.reshape(x.shape[0], -1)),
    view("reshape_fn", lambda L, x: L.reshape(x, (-1,))),
    view("permute", lambda L, x: x.permute(*reversed(range(x.dim())))),
    view("permute_fn", lambda L, x: L.permute(x, (1, 0, 2)), [((2, 3, 4),)]),
    view("transpose", lambda L, x: x.transpose(0, -1)),
    view("t", lambda L, x: x.t(), [((3, 4),), ((5,),), ((),), (("t", (3, 4)),)]),
    view("T", lambda L, x: x.T, [((3, 4),), ((2, 3, 4),)]),
    view("mT", lambda L, x: x.mT),
    view("expand", lambda L, x: x.unsqueeze(0).expand(3, *x.shape)),
    view("expand_minus1", lambda L, x: x[..., :1].expand(-1, -1, 5), [((2, 3, 4),)]),
    view("expand_as", lambda L, x: x[:1].expand_as(x)),
    view("narrow", lambda L, x: x.narrow(1, 1, 2)),
    view("select", lambda L, x: x.select(1, -1)),
    view("squeeze", lambda L, x: x.unsqueeze(1).squeeze()),
    view("squeeze_dim", lambda L, x: x[:1].squeeze(0)),
    view("squeeze_dims", lambda L, x: x[:1, :1].squeeze((0, 1))),
    view("unsqueeze", lambda L, x: x.unsqueeze(-1)),
    view("flatten", lambda L, x: x.flatten()),
    view("flatten_range", lambda L, x: L.flatten(x, 0, 1)),
    view("unflatten", lambda L, x: x.unflatten(-1, (2, -1))),
    view("diagonal", lambda L, x: x.diagonal()), view("diagonal_offset", lambda L, x: x.diagonal(1, 0, -1)),
    view("unfold", lambda L, x: x.unfold(-1, 2, 1)),
    view("movedim", lambda L, x: L.movedim(x, 0, -1)),
    view("as_strided", lambda L, x: x.contiguous().as_strided((2, 2), (1, 2), 1)),
    view("view_as", lambda L, x: x.reshape(-1).view_as(x.contiguous())),
    view("contiguous", lambda L, x: x.contiguous()),
    view("clone", lambda L, x: x.clone()),
    view("getitem_basic", lambda L, x: x[1:, ::2, None, -1]),
    view("getitem_ellipsis", lambda L, x: x[..., 1:3]),
    view("getitem_int", lambda L, x: x[-1]),
    view("to_dtype", lambda L, x: x.to(L.float64)),
    view("unbind", lambda L, x: x.unbind(1)),
    view("split", lambda L, x: x.split(2, dim=-1)),
    view("split_sizes", lambda L, x: L.split(x, [1, 2], dim=1), [((2, 3, 4),)]),
    view("chunk", lambda L, x: x.chunk(2, dim=0)),
]

S = [((3, 4),), (("t", (4, 5)),), (("s", (2, 3, 4)),)]


def shape_op(name, fn, inputs=None, dtypes=ALL, **kw):
    return Op(name, fn, inputs or S, dtypes=list(dtypes), **kw)


def _idx(L, vals):
    return L.tensor(vals)


SHAPE_OPS = [
    shape_op("cat", lambda L, a, b: L.cat([a, b], dim=0), [((2, 3), (4, 3)), ((0, 3), (2, 3)),
                                                          (("t", (2, 3)), (1, 3))]),
    shape_op("cat_dim1", lambda L, a, b: L.cat((a, b), 1), [((2, 3), (2, 1)), ((2, 3), (3, 3))]),
    shape_op("stack", lambda L, a, b: L.stack([a, b], dim=1), [((2, 3), (2, 3)), ((), ())]),
    shape_op("tril", lambda L, x: L.tril(x)), shape_op("triu", lambda L, x: x.triu(1)),
    shape_op("repeat", lambda L, x: x.repeat(2, 1, 3)),
    shape_op("repeat_interleave", lambda L, x: x.repeat_interleave(2, dim=0)),
    shape_op("repeat_interleave_flat", lambda L, x: L.repeat_interleave(x, 3)),
    shape_op("flip", lambda L, x: x.flip(0, -1)), shape_op("flip_fn", lambda L, x: L.flip(x, [1])),
    shape_op("roll", lambda L, x: L.roll(x, 1, 0)), shape_op("roll_flat", lambda L, x: x.roll(2)),
    shape_op("roll_dims", lambda L, x: L.roll(x, (1, -2), (0, 1))),
    shape_op("pad", lambda L, x: nnf(L).pad(x, (1, 2)), dtypes=NUMERIC),
    shape_op("pad_value", lambda L, x: nnf(L).pad(x, (1, 0, 0, 2), value=3), dtypes=NUMERIC),
    shape_op("pad_reflect", lambda L, x: nnf(L).pad(x, (1, 2), mode="reflect"), dtypes=FLOATS),
    shape_op("pad_replicate", lambda L, x: nnf(L).pad(x, (2, 1), mode="replicate"), dtypes=FLOATS),
    shape_op("sort", lambda L, x: L.sort(x, dim=-1), domain="spread"),
    shape_op("sort_desc", lambda L, x: x.sort(0, descending=True), domain="spread"),
    shape_op("sort_stable", lambda L, x: L.sort(x, stable=True), domain="index"),
    shape_op("argsort", lambda L, x: L.argsort(x, dim=0), domain="spread"),
    shape_op("topk", lambda L, x: L.topk(x, 2), domain="spread", grad_of=lambda r: r[0]),
    shape_op("topk_smallest", lambda L, x: x.topk(1, dim=0, largest=False), domain="spread",
             grad_of=lambda r: r[0]),
    shape_op("unique", lambda L, x: L.unique(x), domain="index", grad=False),
    shape_op("unique_inverse_counts", lambda L, x: L.unique(x, return_inverse=True,
                                                            return_counts=True),
             domain="index", grad=False),
    shape_op("gather", lambda L, x: L.gather(x, 1, _idx(L, [[0, 1], [1, 0], [2, 2]])),
             [((3, 4),), (("t", (4, 3)),)]),
    shape_op("index_select", lambda L, x: L.index_select(x, 1, _idx(L, [2, 0, 2]))),
    shape_op("scatter", lambda L, x, s: L.scatter(x, 0, _idx(L, [[2, 0, 1]]), s),
             [((3, 3), (1, 3))]),
    shape_op("scatter_value", lambda L, x: x.scatter(1, _idx(L, [[1], [0], [2]]), 7),
             [((3, 3),)]),
    shape_op("scatter_add", lambda L, x, s: L.scatter_add(x, 1, _idx(L, [[0, 0], [1, 1]]), s),
             [((2, 3), (2, 2))], dtypes=NUMERIC),
    shape_op("scatter_reduce", lambda L, x, s: L.scatter_reduce(x, 0, _idx(L, [0, 1, 0]), s,
                                                                reduce="amax"),
             [((3,), (3,))], dtypes=NUMERIC, grad=False),
    shape_op("masked_fill", lambda L, x, m: x.masked_fill(m > 0, 5), [((3, 4), (3, 4)),
                                                                     ((3, 4), (4,))]),
    shape_op("masked_select", lambda L, x, m: L.masked_select(x, m > 0), [((3, 4), (3, 4)),
                                                                         ((3, 4), (1, 4))]),
    shape_op("nonzero", lambda L, x: L.nonzero(x), domain="index"),
    shape_op("nonzero_tuple", lambda L, x: x.nonzero(as_tuple=True), domain="index"),
    shape_op("one_hot", lambda L, x: nnf(L).one_hot(x, 4), [((5,),), ((2, 3),)], ["int64"],
             domain="index"),
    shape_op("one_hot_infer", lambda L, x: nnf(L).one_hot(x), [((5,),), ((2, 3),)], ["int64"],
             domain="index"),
    shape_op("repeat_interleave_tensor", lambda L, x: x.repeat_interleave(
        L.tensor([1, 0, 2]), dim=0), [((3, 4),), (("t", (4, 3)),)]),
]


@pytest.mark.parametrize("op,dtype", params(LINALG))
def test_linalg(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(VIEWS))
def test_view(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(SHAPE_OPS))
def test_shape_op(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(LINALG + VIEWS[:10] + SHAPE_OPS[:6],
                                            dtypes_filter=("float32",)))
def test_on_testing_device(op, dtype):
    run_op(op, dtype, device="testing:0")
