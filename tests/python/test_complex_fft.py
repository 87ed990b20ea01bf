"""kiln's complex dtypes (complex64 / complex128), kiln.fft and kiln.stft / kiln.istft against
PyTorch 2.13 on identical inputs (seeded numpy data moved with from_numpy / .numpy()).

Every comparison checks the exact dtype and shape of torch's result; values are compared
relative to max |torch result|: 1e-12 for float64 / complex128 results, and for float32 /
complex64 ones 5e-6 * sqrt(max(1, log2 n)) for transforms of n points (a few float32 roundings
per butterfly level) or a fixed 2e-6-ish bound for elementwise work.

Deliberately not asserted (torch and C99 / std::complex disagree, or torch is inconsistent):
- neg's sign of zero parts: torch's vectorised complex neg is 0 - x (so -(0+0j) = 0+0j) while
  its scalar tail loop is -x; kiln is -x everywhere. neg is compared ignoring the sign of zeros.
- reciprocal at zeros and infinities (torch 1/(-0+0j) = inf+nanj, 1/(inf+infj) = nan+nanj;
  std::complex gives -inf+nanj and 0): reciprocal is compared on finite non-zero values.
- a float16 tensor with a complex Python scalar: torch gives complex32, which kiln has not.
Cases marked xfail(strict=True) are kiln bugs found by this file."""
import math
import warnings

import numpy as np
import pytest
import torch

import kiln
import oracle

INF, NAN = math.inf, math.nan

C_DTYPES = ["complex64", "complex128"]
FFT_DTYPES = ["float32", "float64", "complex64", "complex128", "int64"]


# --- helpers -----------------------------------------------------------------------------

def K(t):
    """A kiln copy of a torch tensor (contiguous)."""
    return kiln.from_numpy(np.array(t.detach().numpy(), order="C", copy=True))


def T(k):
    """A torch copy of a kiln tensor."""
    return torch.from_numpy(np.array(k.numpy(), order="C", copy=True))


def kdt(name):
    return getattr(kiln, name)


def tdt(name):
    return getattr(torch, name)


def dname(dtype):
    return str(dtype).split(".")[-1]


def data(shape, dtype, seed=0):
    """Seeded torch data of a dtype name: normal parts for floats / complex, small ints."""
    rng = np.random.default_rng(seed)
    if dtype in C_DTYPES:
        a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return torch.from_numpy(a.astype(np.complex64 if dtype == "complex64" else np.complex128))
    if dtype in ("float32", "float64"):
        return torch.from_numpy(rng.standard_normal(shape).astype(dtype))
    if dtype == "bool":
        return torch.from_numpy(rng.integers(0, 2, shape).astype(bool))
    return torch.from_numpy(rng.integers(-5, 6, shape).astype(dtype))


def is_double(dtype):
    return dname(dtype) in ("float64", "complex128")


def fft_tol(dtype, n):
    """Relative tolerance of a transform of n points (the product of the transformed sizes)."""
    if is_double(dtype):
        return 1e-12
    return 5e-6 * math.sqrt(max(1.0, math.log2(max(n, 1))))


def same(got, want, rtol, op=None):
    """got (kiln) has want's (torch) dtype and shape, and |got - want| <= rtol * max|want|
    (NaN where want has NaN)."""
    assert isinstance(got, kiln.Tensor), type(got)
    assert dname(got.dtype) == dname(want.dtype), f"dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"shape {tuple(got.shape)} != " \
                                                  f"{tuple(want.shape)}"
    oracle.record(op)
    if want.numel() == 0:
        return
    g = T(got)
    if want.dtype == torch.bool or not (want.is_floating_point() or want.is_complex()):
        assert torch.equal(g, want), f"\n{g}\n{want}"
        return
    g, w = g.to(torch.complex128), want.to(torch.complex128)
    gn, wn = torch.isnan(g), torch.isnan(w)
    assert torch.equal(gn, wn), f"NaN positions differ\n{g}\n{w}"
    finite = torch.isfinite(w)
    assert torch.equal(g[~finite & ~wn], w[~finite & ~wn]), "infinities differ"
    g, w = g[finite], w[finite]
    if w.numel() == 0:
        return
    scale = w.abs().max().item()
    err = (g - w).abs().max().item()
    assert err <= rtol * max(scale, 1e-300), f"max error {err:.3g} > {rtol:.3g} * {scale:.3g}"


def raises_like_torch(torch_fn, kiln_fn):
    """Both raise, and kiln's exception is an instance of torch's exception's class."""
    with pytest.raises(Exception) as want:
        torch_fn()
    with pytest.raises(want.type):
        kiln_fn()


def bitwise_same(got, want):
    """Element for element the same, NaNs in the same places and zeros of the same sign."""
    g, w = T(got), want
    assert dname(got.dtype) == dname(w.dtype) and tuple(got.shape) == tuple(w.shape)
    for a, b in zip(g.reshape(-1).tolist(), w.reshape(-1).tolist()):
        for p, q in ((a.real, b.real), (a.imag, b.imag)) if isinstance(b, complex) else ((a, b),):
            if math.isnan(q):
                assert math.isnan(p), (a, b)
            elif q == 0 or math.isinf(q):
                assert p == q and math.copysign(1, p) == math.copysign(1, q), (a, b)
            else:
                assert abs(p - q) <= 4e-16 * abs(q) if is_double(w.dtype) else \
                    abs(p - q) <= 2.5e-7 * abs(q), (a, b)


# --- kiln.fft: the one-dimensional functions -----------------------------------------------

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_ONLY = {"rfft", "ihfft", "rfftn", "ihfftn", "rfft2", "ihfft2"}


def _name_dtype(names):
    """(name, dtype) pairs; the real-input transforms without complex inputs (their refusal
    is in test_fft_errors)."""
    return [(n, d) for n in names for d in FFT_DTYPES if not (n in REAL_ONLY and d in C_DTYPES)]


@pytest.mark.parametrize("name,dtype", _name_dtype(ONE_D))
def test_fft_1d_matches_torch(name, dtype):
    x = data((6, 10), dtype, seed=len(name))
    for norm in (None, "backward", "ortho", "forward"):
        for n in (None, 1, 4, 10, 13, 32):
            for dim in (-1, 0, 1, -2):
                want = getattr(torch.fft, name)(x, n=n, dim=dim, norm=norm)
                got = getattr(kiln.fft, name)(K(x), n=n, dim=dim, norm=norm)
                same(got, want, fft_tol(want.dtype, want.shape[dim]), "fft." + name)


# --- kiln.fft: the n-dimensional functions -------------------------------------------------

ND = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fft2", "ifft2", "rfft2", "irfft2",
      "hfft2", "ihfft2"]
ND_ARGS = [(None, None), ((3, 9), None), ((5,), None), ((2, 3, 4), None), (None, (0, 2)),
           ((4, 6), (2, 0)), (None, (-1,)), ((-1, 9), (1, 2)), ((7,), (-3,)), (None, 1),
           ((8, -1), (-1, -2)), ((1, 1, 1), None)]


@pytest.mark.parametrize("name,dtype", _name_dtype(ND))
def test_fft_nd_matches_torch(name, dtype):
    x = data((4, 5, 6), dtype, seed=len(name) + 1)
    compared = 0
    for norm in (None, "ortho", "forward"):
        for s, dim in ND_ARGS:
            if name.endswith("2") and (s is not None and len(s) != 2 or dim is not None and
                                       (isinstance(dim, int) or len(dim) != 2)):
                continue  # the 2-D forms: dim (-2, -1) by default; s and dim of two entries
            kw = {"norm": norm}
            if s is not None:
                kw["s"] = s
            if dim is not None:
                kw["dim"] = dim
            want = getattr(torch.fft, name)(x, **kw)
            got = getattr(kiln.fft, name)(K(x), **kw)
            same(got, want, fft_tol(want.dtype, want.numel()), "fft." + name)
            compared += 1
    assert compared >= 6


def test_fft_empty_dim_tuple_is_a_copy():
    x = data((3, 4), "complex64")
    for name in ("fftn", "ifftn"):
        want = getattr(torch.fft, name)(x, dim=())
        got = getattr(kiln.fft, name)(K(x), dim=())
        same(got, want, 0, "fft." + name)


# --- lengths: smooth, odd, prime and Bluestein ---------------------------------------------

LENGTHS = [1, 2, 3, 7, 16, 97, 360, 1009, 4099, 10007]


@pytest.mark.parametrize("n", LENGTHS)
def test_fft_lengths_match_torch(n):
    rows = 3 if n < 4000 else 2
    for dtype in ("float32", "float64", "complex64", "complex128"):
        x = data((rows, n), dtype, seed=n)
        for name in ONE_D:
            if name in REAL_ONLY and dtype in C_DTYPES:
                continue
            if name in ("irfft", "hfft") and n == 1:
                continue  # the default output length 2 * (1 - 1) = 0 is refused (test_fft_errors)
            want = getattr(torch.fft, name)(x)
            got = getattr(kiln.fft, name)(K(x))
            same(got, want, fft_tol(want.dtype, n), "fft." + name)
        # along the first dim of the transposed batch (a strided signal)
        xt = x.t()
        same(kiln.fft.fft(K(x).t(), dim=0), torch.fft.fft(xt, dim=0), fft_tol(x.dtype, n),
             "fft.fft")
        # n larger / smaller than the signal
        for m in (n + 1, 2 * n + 3, max(1, n // 2)):
            want = torch.fft.fft(x, n=m)
            same(kiln.fft.fft(K(x), n=m), want, fft_tol(want.dtype, m), "fft.fft")


# --- batches: the vector lanes and the four-step split (decision 0094) --------------------

BATCH_SHAPES = [(40, 512), (33, 100), (17, 37), (9, 4096), (3, 5, 64), (40, 6), (20, 2310)]


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fft_batches_match_torch(shape):
    """Batches of lines along the last dim (rows) and along the others (lines side by side),
    full and partial lane groups, smooth / generic-prime / Bluestein / four-step lengths."""
    for dtype in ("float32", "float64", "complex64", "complex128"):
        x = data(shape, dtype, seed=sum(shape))
        for dim in range(-1, -len(shape) - 1, -1):
            n = shape[dim]
            for name in ONE_D:
                if name in REAL_ONLY and dtype in C_DTYPES:
                    continue
                if name in ("irfft", "hfft") and n == 1:
                    continue
                want = getattr(torch.fft, name)(x, dim=dim)
                got = getattr(kiln.fft, name)(K(x), dim=dim)
                same(got, want, fft_tol(want.dtype, max(n, want.shape[dim])), "fft." + name)
        for name in ("fft2", "ifft2") + (("rfft2", "irfft2") if dtype in ("float32", "float64") else ()):
            want = getattr(torch.fft, name)(x)
            got = getattr(kiln.fft, name)(K(x))
            same(got, want, fft_tol(want.dtype, shape[-1] * shape[-2]), "fft." + name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [6, 37, 64, 100, 4096, 1 << 16])
def test_real_transforms_keep_each_rows_own_accuracy(n, dtype):
    """Rows a million times smaller than their neighbours: each row's rfft / irfft error stays
    relative to its own size (packing two real rows into one complex transform fails this)."""
    rows = 40 if n < 5000 else 2
    x = data((rows, n), dtype, seed=n)
    x = x * torch.tensor([1e-6 if i % 2 else 1.0 for i in range(rows)], dtype=x.dtype)[:, None]
    tol = fft_tol(dtype, n)

    def row_errors(got, ref):
        return ((got - ref).abs().amax(dim=1) / ref.abs().amax(dim=1)).max().item()

    ref = torch.fft.rfft(x.double())
    assert row_errors(T(kiln.fft.rfft(K(x))).to(torch.complex128), ref) <= tol
    spec = torch.fft.rfft(x)
    ref = torch.fft.irfft(spec.to(torch.complex128), n=n)
    assert row_errors(T(kiln.fft.irfft(K(spec), n=n)).double(), ref) <= tol


def test_fft_2d_bluestein_and_prime_sizes():
    for dtype in ("float32", "complex128"):
        x = data((97, 31), dtype, seed=3)
        for name in ("fft2", "ifftn", "rfft2" if dtype == "float32" else "hfft2"):
            want = getattr(torch.fft, name)(x)
            same(getattr(kiln.fft, name)(K(x)), want, fft_tol(want.dtype, 97 * 31), "fft." + name)
        want = torch.fft.fftn(x, s=(101, 29))
        same(kiln.fft.fftn(K(x), s=(101, 29)), want, fft_tol(want.dtype, 101 * 29), "fft.fftn")


# --- non-contiguous inputs -----------------------------------------------------------------

def _views(x):
    return {"transposed": x.transpose(0, 1), "stepped": x[::2, 1::3],
            "stepped_t": x.transpose(0, 1)[1::2, ::3], "narrowed": x.narrow(1, 2, 7)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_fft_noncontiguous_inputs(dtype):
    x = data((12, 15), dtype, seed=9)
    kx = K(x)
    tv, kv = _views(x), _views(kx)
    for key in tv:
        assert not kv[key].is_contiguous()
        for name in ONE_D + ["fftn", "irfftn", "fft2"]:
            if name in REAL_ONLY and dtype in C_DTYPES:
                continue
            for dim in ((-1, 0) if name in ONE_D else (None,)):
                kw = {} if dim is None else {"dim": dim}
                want = getattr(torch.fft, name)(tv[key], **kw)
                got = getattr(kiln.fft, name)(kv[key], **kw)
                same(got, want, fft_tol(want.dtype, 15 * 12), "fft." + name)
    # the input is left as it was
    assert torch.equal(T(kx), x)


# --- out= --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ONE_D + ["fftn", "rfft2", "irfftn", "ihfftn"])
def test_fft_out(name):
    dtype = "float64" if name in REAL_ONLY else "complex128"
    x = data((4, 6), dtype, seed=2)
    want = getattr(torch.fft, name)(x)
    out = kiln.empty(tuple(want.shape), dtype=kdt(dname(want.dtype)))
    got = getattr(kiln.fft, name)(K(x), out=out)
    assert got is out
    same(out, want, 1e-12, "fft." + name)


def test_fft_out_resizes_an_empty_out():
    x = data((4, 6), "complex64")
    want = torch.fft.fft(x)
    out = kiln.empty(0, dtype=kiln.complex64)
    kiln.fft.fft(K(x), out=out)
    same(out, want, 1e-5, "fft.fft")


# --- fftfreq / rfftfreq / fftshift / ifftshift ---------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 8, 11, 100])
def test_fftfreq_rfftfreq(n):
    for d in (1.0, 0.1, 2.5, 3):
        for dt in (None, "float32", "float64"):
            for name in ("fftfreq", "rfftfreq"):
                want = getattr(torch.fft, name)(n, d, dtype=None if dt is None else tdt(dt))
                got = getattr(kiln.fft, name)(n, d, dtype=None if dt is None else kdt(dt))
                same(got, want, 1e-15 if dt == "float64" else 1.2e-7, "fft." + name)
    # out= and the default dtype
    out = kiln.empty(n, dtype=kiln.float64)
    assert kiln.fft.fftfreq(n, 0.5, dtype=kiln.float64, out=out) is out
    same(out, torch.fft.fftfreq(n, 0.5, dtype=torch.float64), 1e-15, "fft.fftfreq")
    out = kiln.empty(n // 2 + 1)
    assert kiln.fft.rfftfreq(n, 0.5, out=out) is out
    same(out, torch.fft.rfftfreq(n, 0.5), 1.2e-7, "fft.rfftfreq")
    try:
        kiln.set_default_dtype(kiln.float64)
        torch.set_default_dtype(torch.float64)
        same(kiln.fft.rfftfreq(n), torch.fft.rfftfreq(n), 1e-15, "fft.rfftfreq")
    finally:
        kiln.set_default_dtype(kiln.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_fftfreq_out_dtype_from_out(name):
    m = 5 if name == "fftfreq" else 3
    want = getattr(torch.fft, name)(5, 0.5, out=torch.empty(m, dtype=torch.float64))
    out = kiln.empty(m, dtype=kiln.float64)
    getattr(kiln.fft, name)(5, 0.5, out=out)
    same(out, want, 1e-15, "fft." + name)


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex64", "bool"])
def test_fftshift_ifftshift(dtype):
    x = data((3, 4, 5), dtype, seed=4)
    for src_t, src_k in ((x, K(x)), (x.transpose(0, 2)[::2], K(x).transpose(0, 2)[::2])):
        for dim in (None, 0, -1, 2, (0, 2), (-2,), [1, 2], (-1, 0, 1)):
            for name in ("fftshift", "ifftshift"):
                want = getattr(torch.fft, name)(src_t, dim=dim)
                same(getattr(kiln.fft, name)(src_k, dim=dim), want, 0, "fft." + name)
    # ifftshift undoes fftshift on odd sizes
    k = K(x)
    same(kiln.fft.ifftshift(kiln.fft.fftshift(k)), x, 0, "fft.ifftshift")


# --- errors ------------------------------------------------------------------------------

HERMITIAN_NORM_XFAIL = ()  # (a KeyError once; fixed)


@pytest.mark.parametrize("name", [pytest.param(n, marks=HERMITIAN_NORM_XFAIL) if "hfft" in n else n
                                  for n in ONE_D + ND])
def test_fft_invalid_norm_is_refused(name):
    """The brief's expectation: ValueError (torch 2.13 itself raises RuntimeError: see
    test_fft_invalid_norm_raises_runtime_error_like_torch)."""
    src = K(data((4, 6), "float32" if name in REAL_ONLY else "complex64"))
    for norm in ("xx", "Ortho", "none", ""):
        with pytest.raises((ValueError, RuntimeError), match="Invalid normalization mode"):
            getattr(kiln.fft, name)(src, norm=norm)


def test_fft_errors():
    x, c = data((4, 6), "float32"), data((4, 6), "complex64")
    kx, kc = K(x), K(c)
    cases = [
        (lambda L, a, b: L.fft.fft(a, n=0)), (lambda L, a, b: L.fft.ifft(b, n=-1)),
        (lambda L, a, b: L.fft.rfft(a, n=0)), (lambda L, a, b: L.fft.irfft(b, n=0)),
        (lambda L, a, b: L.fft.irfft(b[:, :1])),  # default n = 2 * (1 - 1) = 0
        (lambda L, a, b: L.fft.hfft(b[:, :1])),
        (lambda L, a, b: L.fft.fftn(a, s=(0, 3))), (lambda L, a, b: L.fft.rfftn(a, s=(3, 0))),
        (lambda L, a, b: L.fft.fft(a.to(L.float16))), (lambda L, a, b: L.fft.rfft(a.to(L.float16))),
        (lambda L, a, b: L.fft.fftn(a.to(L.float16))),
        (lambda L, a, b: L.fft.ifft(a.to(L.bfloat16))),
        (lambda L, a, b: L.fft.rfft(b)), (lambda L, a, b: L.fft.rfftn(b)),
        (lambda L, a, b: L.fft.ihfft(b)), (lambda L, a, b: L.fft.rfft2(b)),
        (lambda L, a, b: L.fft.ihfft2(b)),
        (lambda L, a, b: L.fft.fftn(a, dim=(0, 0))), (lambda L, a, b: L.fft.fftn(a, dim=(1, -1))),
        (lambda L, a, b: L.fft.rfftn(a, dim=(1, -1))),
        (lambda L, a, b: L.fft.irfftn(b, dim=(0, 0))),
        (lambda L, a, b: L.fft.ifft2(b, dim=(-1, 1))),
        (lambda L, a, b: L.fft.fft(a, dim=2)), (lambda L, a, b: L.fft.fftn(a, dim=(0, 5))),
        (lambda L, a, b: L.fft.fft(a[0, 0])),
        (lambda L, a, b: L.fft.fftn(a, s=(3,), dim=(0, 1))),
        (lambda L, a, b: L.fft.fftn(a, s=(3, 3, 3))),
    ]
    for case in cases:
        raises_like_torch(lambda: case(torch, x, c), lambda: case(kiln, kx, kc))
    # the messages of the ones the brief names
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        kiln.fft.fft(kx, n=0)
    with pytest.raises(RuntimeError, match="(?i)unsupported dtype"):
        kiln.fft.fft(kx.to(kiln.float16))
    with pytest.raises(RuntimeError, match="real"):
        kiln.fft.rfft(kc)
    with pytest.raises(RuntimeError, match="unique"):
        kiln.fft.fftn(kx, dim=(0, 0))


@pytest.mark.parametrize("name", ["fft", "rfftn", "ihfft"])
def test_fft_invalid_norm_raises_runtime_error_like_torch(name):
    x = data((4, 6), "float32")
    raises_like_torch(lambda: getattr(torch.fft, name)(x, norm="xx"),
                      lambda: getattr(kiln.fft, name)(K(x), norm="xx"))


def test_fft_non_tensor_input_is_a_type_error():
    raises_like_torch(lambda: torch.fft.fft([1.0, 2.0]), lambda: kiln.fft.fft([1.0, 2.0]))


# --- complex tensors: construction ----------------------------------------------------------

def test_complex_construction():
    cases = [
        (lambda L: L.tensor([1 + 2j, 3 - 1j])), (lambda L: L.tensor([1, 2.5, 1j])),
        (lambda L: L.tensor([[1 + 1j, 2], [3, 4j]], dtype=L.complex128)),
        (lambda L: L.tensor(3 - 4j)), (lambda L: L.tensor([1.5, 2], dtype=L.cfloat)),
        (lambda L: L.tensor([True, False], dtype=L.cdouble)),
        (lambda L: L.zeros(2, 3, dtype=L.complex64)), (lambda L: L.ones(4, dtype=L.cdouble)),
        (lambda L: L.full((2, 2), 1 - 2j)), (lambda L: L.full((3,), 2.5, dtype=L.complex128)),
        (lambda L: L.full((3,), 1j, dtype=L.complex64)),
        (lambda L: L.zeros_like(L.ones(2, 3, dtype=L.complex128))),
        (lambda L: L.ones_like(L.zeros(2, dtype=L.complex64))),
        (lambda L: L.complex(L.tensor([1.0, -2.0]), L.tensor([0.5, 3.0]))),
        (lambda L: L.complex(L.tensor([[1.0], [2.0]], dtype=L.float64),
                             L.tensor([0.5, 3.0, -1.0], dtype=L.float64))),
        (lambda L: L.polar(L.tensor([1.0, 2.0, 0.5]), L.tensor([0.0, 1.0, -2.5]))),
        (lambda L: L.polar(L.tensor([2.0], dtype=L.float64),
                           L.tensor([math.pi / 3], dtype=L.float64))),
        (lambda L: L.tensor(np.array([1 + 2j, -3j], dtype=np.complex64))),
        (lambda L: L.from_numpy(np.array([[1 + 2j], [0.25j]]))),
        (lambda L: L.from_numpy(np.arange(6).reshape(2, 3).astype(np.complex64)[:, ::2])),
    ]
    for case in cases:
        same(case(kiln), case(torch), 1e-7, "complex.construction")
    assert kiln.cfloat is kiln.complex64 and kiln.cdouble is kiln.complex128
    assert kiln.tensor([1j]).is_complex() and kiln.is_complex(kiln.tensor([1j]))
    assert not kiln.tensor([1.0]).is_complex() and not kiln.tensor([1j]).is_floating_point()
    assert kiln.tensor([1j]).element_size() == 8
    assert kiln.tensor([1j], dtype=kiln.complex128).element_size() == 16
    assert str(kiln.complex64) == "kiln.complex64" and repr(kiln.cdouble) == "kiln.complex128"
    assert kiln.complex64.is_complex and not kiln.complex64.is_floating_point
    # the default dtype decides a Python complex's dtype
    try:
        kiln.set_default_dtype(kiln.float64)
        assert kiln.tensor([1j]).dtype == kiln.complex128
        assert kiln.full((1,), 1j).dtype == kiln.complex128
    finally:
        kiln.set_default_dtype(kiln.float32)
    assert kiln.tensor([1j]).dtype == kiln.complex64
    # complex() refuses mixed or integer parts, as torch
    raises_like_torch(lambda: torch.complex(torch.ones(2), torch.ones(2, dtype=torch.float64)),
                      lambda: kiln.complex(kiln.ones(2), kiln.ones(2, dtype=kiln.float64)))
    raises_like_torch(
        lambda: torch.complex(torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64)),
        lambda: kiln.complex(kiln.ones(2, dtype=kiln.int64), kiln.ones(2, dtype=kiln.int64)))


def test_complex_value_into_real_dtype_is_refused():
    raises_like_torch(lambda: torch.tensor([1j], dtype=torch.float32),
                      lambda: kiln.tensor([1j], dtype=kiln.float32))


@pytest.mark.parametrize("values,dtype", [([1j, 0.5], None), ([0j, 1j, 0.5], None),
                                          ([1 + 1j, 2.0], None), ([[1j], [0.5]], None),
                                          ([1j, 0.5], "complex128")],
                         ids=["1j,0.5", "0j,1j,0.5", "1+1j,2.0", "nested", "dtype"])
def test_tensor_from_list_complex_then_float(values, dtype):
    want = torch.tensor(values, dtype=None if dtype is None else tdt(dtype))
    got = kiln.tensor(values, dtype=None if dtype is None else kdt(dtype))
    same(got, want, 0, "complex.construction")


# --- type promotion ------------------------------------------------------------------------

def _small(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    t = torch.from_numpy(rng.integers(0, 3, shape)).to(tdt(dtype))
    if dtype in C_DTYPES:
        t = t + 1j * torch.from_numpy(rng.integers(0, 2, shape)).to(tdt(dtype))
    return t


PROMO_DTYPES = ["complex64", "complex128", "float16", "float32", "float64", "int64", "int32",
                "uint8", "bool"]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "eq", "ne"])
def test_binary_promotion_table(op):
    import operator
    f = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "eq": operator.eq,
         "ne": operator.ne}[op]
    n = 0
    for a in PROMO_DTYPES:
        for b in PROMO_DTYPES:
            if a not in C_DTYPES and b not in C_DTYPES:
                continue
            if op in ("eq", "ne"):  # small whole values, so that some compare equal
                x, y = _small((3, 4), a, 1), _small((4,), b, 2)
            else:
                x, y = data((3, 4), a, seed=1), data((4,), b, seed=2)
            if op == "sub" and torch.bool in (x.dtype, y.dtype):
                raises_like_torch(lambda: f(x, y), lambda: f(K(x), K(y)))
                continue
            want = f(x, y)
            got = f(K(x), K(y))
            same(got, want, 2e-3 if "float16" in (a, b) else 1e-6, "complex." + op)
            # the reflected order
            same(f(K(y), K(x)), f(y, x), 2e-3 if "float16" in (a, b) else 1e-6, "complex." + op)
            n += 1
    assert n >= 28


def test_scalar_promotion():
    cases = [
        ("complex64 * float64 tensor", lambda L, d: d("complex64") * d("float64"), "complex128"),
        ("float32 tensor * 1j", lambda L, d: d("float32") * 1j, "complex64"),
        ("1j * float32 tensor", lambda L, d: 1j * d("float32"), "complex64"),
        ("float64 tensor + 1j", lambda L, d: d("float64") + 1j, "complex128"),
        ("int64 tensor + complex", lambda L, d: d("int64") + (1 - 2j), "complex64"),
        ("complex - int tensor", lambda L, d: (2 + 3j) - d("int32"), "complex64"),
        ("uint8 tensor * 1j", lambda L, d: d("uint8") * 1j, "complex64"),
        ("complex64 * bool tensor", lambda L, d: d("complex64") * d("bool"), "complex64"),
        ("bool tensor * complex", lambda L, d: d("bool") * (0.5 + 1j), "complex64"),
        ("complex128 * bool scalar", lambda L, d: d("complex128") * True, "complex128"),
        ("complex64 * 2.5", lambda L, d: d("complex64") * 2.5, "complex64"),
        ("complex64 + 3", lambda L, d: d("complex64") + 3, "complex64"),
        ("3 - complex128", lambda L, d: 3 - d("complex128"), "complex128"),
        ("complex64 * complex scalar", lambda L, d: d("complex64") * (1 + 1j), "complex64"),
        ("complex64 == complex scalar",
         lambda L, d: d("complex64") == complex(d("complex64")[0, 0].item()), "bool"),
        ("complex64 != 2", lambda L, d: d("complex64") != 2, "bool"),
        ("complex64 + float16 tensor", lambda L, d: d("complex64") + d("float16"), "complex64"),
        ("add alpha", lambda L, d: L.add(d("complex64"), d("float32"), alpha=2), "complex64"),
        ("sub alpha complex",
         lambda L, d: L.sub(d("complex128"), d("complex128"), alpha=1j), "complex128"),
        ("0-d complex128 * float32 tensor",
         lambda L, d: d("float32") * L.tensor(1 + 1j, dtype=L.complex128), "complex64"),
        ("0-d float64 * complex64 tensor",
         lambda L, d: d("complex64") * L.tensor(2.0, dtype=L.float64), "complex64"),
    ]
    for label, fn, dt in cases:
        tdata = {}

        def d_torch(name):
            return tdata.setdefault(name, data((2, 3), name, seed=len(name)))

        want = fn(torch, d_torch)
        got = fn(kiln, lambda name: K(d_torch(name)))
        assert dname(want.dtype) == dt, (label, want.dtype)
        same(got, want, 2e-3 if "float16" in label else 1e-6, "complex.promotion")


def test_inplace_arithmetic():
    x = data((3, 4), "complex64")
    for fn in (lambda L, t: t.mul_(L.full((4,), 2.0)), lambda L, t: t.mul_(1j),
               lambda L, t: t.add_(L.ones(3, 4, dtype=L.complex128)),
               lambda L, t: t.sub_(2 - 1j), lambda L, t: t.exp_()):
        kt, tt = K(x), x.clone()
        r = fn(kiln, kt)
        fn(torch, tt)
        assert r is kt
        same(kt, tt, 1e-6, "complex.inplace")
    # a complex result cannot be written into a real tensor
    raises_like_torch(lambda: torch.zeros(2).add_(torch.ones(2, dtype=torch.complex64)),
                      lambda: kiln.zeros(2).add_(kiln.ones(2, dtype=kiln.complex64)))



@pytest.mark.parametrize("case", ["c/c", "c/real tensor", "real tensor/c", "c/int tensor",
                                  "c/scalar", "scalar/c", "c/complex scalar", "div()"])
def test_complex_true_division(case):
    a, b = data((3, 4), "complex64", 1), data((3, 4), "complex128", 2)
    r, i = data((4,), "float32", 3) + 3, data((4,), "int64", 4).abs() + 1
    fns = {"c/c": lambda L, t: t(a) / t(b), "c/real tensor": lambda L, t: t(a) / t(r),
           "real tensor/c": lambda L, t: t(r) / t(a), "c/int tensor": lambda L, t: t(b) / t(i),
           "c/scalar": lambda L, t: t(a) / 2.5, "scalar/c": lambda L, t: 2 / t(b),
           "c/complex scalar": lambda L, t: t(a) / (1 - 2j),
           "div()": lambda L, t: L.div(t(a), t(r))}
    want = fns[case](torch, lambda v: v)
    got = fns[case](kiln, K)
    same(got, want, 1e-6, "complex.div")


# --- elementwise functions ---------------------------------------------------------------

SPECIAL = [0j, complex(0.0, -0.0), complex(-0.0, 0.0), complex(-0.0, -0.0), 1 + 0j, -1 + 0j,
           complex(-1, -0.0), complex(-4, 0.0), complex(-4, -0.0), 1j, -1j, 2 + 3j,
           -2.5 + 1e-3j, 1e-300 + 1e-300j, 1e300 + 1e300j, complex(INF, 0), complex(-INF, 0),
           complex(0, INF), complex(INF, INF), complex(-INF, INF), complex(NAN, 0),
           complex(0, NAN), complex(NAN, NAN), complex(INF, NAN), complex(NAN, INF),
           complex(-INF, NAN), complex(1, INF), complex(1, -INF), complex(INF, 1),
           complex(-INF, 1), complex(-INF, -1), complex(NAN, 1), complex(1, NAN), 30 + 40j,
           -30 - 400j, 800 + 1j]


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "sin", "cos", "tanh", "abs", "angle",
                                "isnan", "isinf", "isfinite", "conj_physical"])
def test_unary_special_values_bitwise(op, dtype):
    """Branch cuts (signed zeros), infinities and NaNs exactly as torch (where torch and C99's
    cexp / clog / csqrt agree, which is every value here)."""
    x = torch.tensor(SPECIAL, dtype=tdt(dtype))
    want = getattr(torch, op)(x)
    got = getattr(kiln, op)(K(x))
    bitwise_same(got, want)
    oracle.record("complex." + op)


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_branch_cuts(dtype):
    x = kiln.tensor([complex(-4, 0.0), complex(-4, -0.0), complex(-1, 0.0), complex(-1, -0.0)],
                    dtype=kdt(dtype))
    tol = 1e-6
    s = kiln.sqrt(x).tolist()
    assert s[0] == 2j and s[1] == -2j and s[1].real == 0
    lg = kiln.log(x).tolist()
    assert abs(lg[0].imag - math.pi) < tol and abs(lg[1].imag + math.pi) < tol
    assert abs(lg[0].real - math.log(4)) < tol
    assert kiln.angle(x).tolist()[1] < 0 < kiln.angle(x).tolist()[0]


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "reciprocal", "sin", "cos", "tanh", "neg",
                                "abs", "angle", "conj", "conj_physical"])
def test_unary_random_values(op, dtype):
    x = data((5, 7), dtype, seed=11) * 3
    x[0, 0] = 0.5  # a real value, a pure imaginary one
    x[0, 1] = 2j
    xs = {"plain": x, "transposed": x.t(), "stepped": x[::2, 1::3]}
    ks = {"plain": K(x)}
    ks["transposed"], ks["stepped"] = ks["plain"].t(), ks["plain"][::2, 1::3]
    for key in xs:
        want = getattr(torch, op)(xs[key])
        if op == "conj":
            want = want.resolve_conj()
        got = getattr(kiln, op)(ks[key])
        same(got, want, 2e-6 if dtype == "complex64" else 1e-14, "complex." + op)
        # methods too
        got_m = getattr(ks[key], op)()
        same(got_m, want, 2e-6 if dtype == "complex64" else 1e-14, "complex." + op)


def test_abs_angle_dtypes():
    for c, r in (("complex64", "float32"), ("complex128", "float64")):
        x = data((4,), c)
        for op in ("abs", "angle"):
            got = getattr(kiln, op)(K(x))
            assert dname(got.dtype) == r
            same(got, getattr(torch, op)(x), 1e-6, "complex." + op)
        assert dname(K(x).real.dtype) == r and dname(K(x).imag.dtype) == r
    # abs of a huge complex64 overflows to inf only where the true value does
    same(kiln.tensor([3e38 + 3e38j, 2e38 + 1e38j]).abs(),
         torch.tensor([3e38 + 3e38j, 2e38 + 1e38j]).abs(), 1e-6, "complex.abs")
    # in-place abs of a complex tensor is refused (its result is real)
    raises_like_torch(lambda: torch.ones(2, dtype=torch.complex64).abs_(),
                      lambda: kiln.ones(2, dtype=kiln.complex64).abs_())


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_sgn(dtype):
    x = torch.tensor([3 + 4j, 0j, -2j, complex(-1, -0.0), 1e-30 + 0j], dtype=tdt(dtype))
    same(kiln.sgn(K(x)), torch.sgn(x), 1e-6, "complex.sgn")
    same(K(x).sgn(), x.sgn(), 1e-6, "complex.sgn")


def test_neg_values_ignoring_zero_signs():
    # torch's own sign of zero parts varies by position (vectorised 0 - x, scalar -x)
    x = torch.tensor(SPECIAL, dtype=torch.complex128)
    got, want = T(kiln.neg(K(x))), torch.neg(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    m = ~torch.isnan(want)
    assert torch.equal(got[m], want[m])  # == treats -0 and +0 as equal


def test_comparisons():
    a = data((3, 4), "complex64", 5)
    b = a.clone()
    b[1, 2] = 7 + 0j
    b[0] = b[0].conj()
    for L_op in ("eq", "ne"):
        same(getattr(kiln, L_op)(K(a), K(b)), getattr(torch, L_op)(a, b), 0, "complex." + L_op)
    same(K(a) == K(a).real, a == a.real, 0, "complex.eq")
    same(K(b) == 7, b == 7, 0, "complex.eq")
    same(K(b) != 7 + 0j, b != 7 + 0j, 0, "complex.ne")
    n = torch.tensor([complex(NAN, 0), complex(1, NAN), 1j])
    same(K(n) == K(n), n == n, 0, "complex.eq")
    same(K(n) != K(n), n != n, 0, "complex.ne")


# --- reductions and matrix products ---------------------------------------------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_sum_mean(dtype):
    x = data((3, 4, 5), dtype, seed=6)
    tol = 2e-6 if dtype == "complex64" else 1e-14
    kx = K(x)
    for op in ("sum", "mean"):
        for dim, keepdim in ((None, False), (0, False), (1, True), (-1, False), ((0, 2), False),
                             ((0, 2), True), ((-1, -2, 0), False), ([1], True)):
            kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
            same(getattr(kiln, op)(kx, **kw), getattr(torch, op)(x, **kw), tol, "complex." + op)
            same(getattr(kx.transpose(0, 2), op)(**kw), getattr(x.transpose(0, 2), op)(**kw), tol,
                 "complex." + op)
    same(kx.sum(dtype=kiln.complex128), x.sum(dtype=torch.complex128), 1e-6, "complex.sum")
    same(kiln.ones(3).sum(dtype=kiln.complex128), torch.ones(3).sum(dtype=torch.complex128), 0,
         "complex.sum")
    same(kiln.ones(3, dtype=kiln.int64).mean(dtype=kiln.complex64),
         torch.ones(3, dtype=torch.int64).mean(dtype=torch.complex64), 0, "complex.mean")
    e = torch.zeros(0, 3, dtype=tdt(dtype))
    same(K(e).sum(), e.sum(), 0, "complex.sum")
    same(K(e).sum(0), e.sum(0), 0, "complex.sum")
    same(K(e).mean(), e.mean(), 0, "complex.mean")  # nan+nanj


@pytest.mark.parametrize("dtype", C_DTYPES)
def test_mm_bmm(dtype):
    tol = 1e-5 if dtype == "complex64" else 1e-13
    a, b = data((4, 6), dtype, 1), data((6, 3), dtype, 2)
    same(kiln.mm(K(a), K(b)), torch.mm(a, b), tol, "complex.mm")
    same(K(a).mm(K(b)), a.mm(b), tol, "complex.mm")
    same(kiln.mm(K(b).t(), K(a).t()), torch.mm(b.t(), a.t()), tol, "complex.mm")
    same(kiln.mm(K(a)[::2], K(b)[:, 1:]), torch.mm(a[::2], b[:, 1:]), tol, "complex.mm")
    big_a, big_b = data((33, 70), dtype, 3), data((70, 17), dtype, 4)
    same(kiln.mm(K(big_a), K(big_b)), torch.mm(big_a, big_b), tol, "complex.mm")
    z1, z2 = data((0, 3), dtype), data((3, 2), dtype)
    same(kiln.mm(K(z1), K(z2)), torch.mm(z1, z2), 0, "complex.mm")
    z3, z4 = data((2, 0), dtype), data((0, 3), dtype)
    same(kiln.mm(K(z3), K(z4)), torch.mm(z3, z4), 0, "complex.mm")
    a3, b3 = data((2, 4, 6), dtype, 5), data((2, 6, 3), dtype, 6)
    same(kiln.bmm(K(a3), K(b3)), torch.bmm(a3, b3), tol, "complex.bmm")
    same(K(a3).bmm(K(b3)), a3.bmm(b3), tol, "complex.bmm")
    same(kiln.bmm(K(b3).transpose(1, 2), K(a3).transpose(1, 2)),
         torch.bmm(b3.transpose(1, 2), a3.transpose(1, 2)), tol, "complex.bmm")
    # mixed dtypes are refused as torch does
    raises_like_torch(lambda: torch.mm(a, torch.ones(6, 3)), lambda: kiln.mm(K(a), kiln.ones(6, 3)))


# --- shape ops, views and aliasing ---------------------------------------------------------

@pytest.mark.parametrize("dtype", C_DTYPES)
def test_shape_ops(dtype):
    x = data((3, 4, 5), dtype, seed=8)
    kx = K(x)
    cases = [
        lambda L, t: L.cat([t, t[:1]]), lambda L, t: L.cat([t, t[:, :2]], 1),
        lambda L, t: L.cat([t, t.real.to(t.dtype)], -1), lambda L, t: L.flip(t, (0, 2)),
        lambda L, t: t.flip(-1), lambda L, t: L.roll(t, (1, -2), (0, 2)), lambda L, t: L.roll(t, 3),
        lambda L, t: t.repeat(2, 1, 3), lambda L, t: t.repeat(2, 1, 1, 2),
        lambda L, t: t.transpose(0, 2).clone(), lambda L, t: t.transpose(0, 2).contiguous(),
        lambda L, t: t.permute(2, 0, 1).reshape(5, 12), lambda L, t: t.reshape(-1),
        lambda L, t: t.transpose(1, 2), lambda L, t: t.narrow(2, 1, 3), lambda L, t: t.select(1, 2),
        lambda L, t: t[1, ::2, 1:4:2], lambda L, t: t[-1], lambda L, t: t[..., 2:],
        lambda L, t: t.unsqueeze(1).squeeze(1), lambda L, t: t[:1].expand(4, 4, 5),
        lambda L, t: L.stack([t[0], t[1]]), lambda L, t: t.view(12, 5),
        lambda L, t: L.flip(t.transpose(0, 1)[::2], (1,)),
    ]
    for case in cases:
        same(case(kiln, kx), case(torch, x), 0, "complex.shape")
    assert torch.equal(T(kx), x)  # inputs untouched


def test_views_alias_their_base():
    x = data((4, 6), "complex64")
    kx = K(x)
    for view in (lambda t: t.transpose(0, 1), lambda t: t.narrow(1, 2, 3), lambda t: t.select(0, 1),
                 lambda t: t[1:3, ::2], lambda t: t.reshape(2, 12), lambda t: t.permute(1, 0),
                 lambda t: t.view(24)):
        kb, tb = K(x), x.clone()
        kv, tv = view(kb), view(tb)
        kv.fill_(5 - 5j)
        tv.fill_(5 - 5j)
        same(kb, tb, 0, "complex.view")
    # the source of kx is not touched by any of it
    assert torch.equal(T(kx), x)


def test_view_as_real_view_as_complex_alias():
    x = data((3, 4), "complex128")
    kx, tx = K(x), x.clone()
    r = kiln.view_as_real(kx)
    same(r, torch.view_as_real(tx), 0, "complex.view_as_real")
    r[0, 1, 1] = 9.0
    torch.view_as_real(tx)[0, 1, 1] = 9.0
    same(kx, tx, 0, "complex.view_as_real")
    c = kiln.view_as_complex(r)
    c[2, 3] = 7 + 7j
    assert r[2, 3].tolist() == [7.0, 7.0] and kx[2, 3].item() == 7 + 7j
    torch.view_as_complex(torch.view_as_real(tx))[2, 3] = 7 + 7j
    same(kx, tx, 0, "complex.view_as_complex")
    # of views: a transposed complex tensor, a stepped slice
    same(kiln.view_as_real(kx.t()), torch.view_as_real(tx.t()), 0, "complex.view_as_real")
    same(kiln.view_as_real(kx[:, ::2]), torch.view_as_real(tx[:, ::2]), 0, "complex.view_as_real")
    f = data((5, 2), "float32")
    same(kiln.view_as_complex(K(f)), torch.view_as_complex(f), 0, "complex.view_as_complex")
    same(kiln.view_as_complex(K(data((2, 3, 2), "float64"))),
         torch.view_as_complex(data((2, 3, 2), "float64")), 0, "complex.view_as_complex")
    # refusals: a real input, a last dim other than 2, an integer tensor, a non-unit stride
    for fn in (lambda L: L.view_as_real(L.zeros(4)), lambda L: L.view_as_complex(L.zeros(4, 3)),
               lambda L: L.view_as_complex(L.zeros(4, 2, dtype=L.int32)),
               lambda L: L.view_as_complex(L.zeros(2, 4).t())):
        raises_like_torch(lambda: fn(torch), lambda: fn(kiln))


def test_real_imag_views_and_writes():
    x = data((3, 4), "complex64")
    kx, tx = K(x), x.clone()
    same(kx.real, tx.real, 0, "complex.real")
    same(kx.imag, tx.imag, 0, "complex.imag")
    same(kx.t().real, tx.t().real, 0, "complex.real")
    same(kx[:, ::2].imag, tx[:, ::2].imag, 0, "complex.imag")
    assert kx.real.stride() == tx.real.stride() and kx.imag.stride() == tx.imag.stride()
    kx.real[1] = 5
    tx.real[1] = 5
    kx.imag[:, 2].fill_(-2)
    tx.imag[:, 2].fill_(-2)
    kx.imag.copy_(kx.imag * 2)
    tx.imag.copy_(tx.imag * 2)
    kx.real.mul_(3)
    tx.real.mul_(3)
    same(kx, tx, 0, "complex.real")
    # .real of a real tensor is the tensor; .imag of one is refused
    same(kiln.ones(3).real, torch.ones(3).real, 0, "complex.real")
    raises_like_torch(lambda: torch.zeros(4).imag, lambda: kiln.zeros(4).imag)


def test_real_imag_setters():
    tx = data((3,), "complex64")
    kx = K(tx)
    tx.imag += 1
    kx.imag += 1
    tx.real = torch.tensor([3.0, 4.0, 5.0])
    kx.real = kiln.tensor([3.0, 4.0, 5.0])
    same(kx, tx, 0, "complex.imag")


# --- conversions, numpy, item / tolist ------------------------------------------------------

def test_conversions():
    x = data((4, 5), "complex128", seed=12) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "Casting complex values to real discards..."
        for to in ("float32", "float64", "float16", "int64", "int32", "int8", "uint8",
                   "complex64", "complex128"):
            for src, ks in ((x, K(x)), (x.to(torch.complex64), K(x.to(torch.complex64))),
                            (x.t(), K(x).t())):
                same(ks.to(kdt(to)), src.to(tdt(to)), 1e-3 if to == "float16" else 0, "complex.to")
    for src in ("float32", "float64", "float16", "int64", "int32", "uint8", "bool"):
        r = data((3, 4), src, seed=13)
        for to in C_DTYPES:
            same(K(r).to(kdt(to)), r.to(tdt(to)), 0, "complex.to")
            same(K(r).t().to(kdt(to)), r.t().to(tdt(to)), 0, "complex.to")
    # overflow to inf on narrowing, and zeros / -0.0 parts survive
    big = torch.tensor([1e300 + 1e-300j, complex(-0.0, 0.0)], dtype=torch.complex128)
    bitwise_same(K(big).to(kiln.complex64), big.to(torch.complex64))
    # complex -> real keeps the real part (no error)
    assert kiln.tensor([1.7 - 2j, -2.5 + 1j]).to(kiln.int32).tolist() == [1, -2]


def test_complex_to_bool():
    t = torch.tensor([0j, 1j, 0.5, complex(0, -0.0), complex(NAN, 0)])
    same(K(t).to(kiln.bool), t.to(torch.bool), 0, "complex.to")


def test_numpy_round_trip():
    for npdt in (np.complex64, np.complex128):
        a = (np.arange(12).reshape(3, 4) + 1j * np.arange(12, 0, -1).reshape(3, 4)).astype(npdt)
        k = kiln.from_numpy(a)
        assert k.dtype == (kiln.complex64 if npdt == np.complex64 else kiln.complex128)
        b = k.numpy()
        assert b.dtype == npdt and np.array_equal(a, b)
        k[0, 0] = 5j  # from_numpy shares memory both ways
        assert a[0, 0] == 5j
        b[1, 1] = -1 - 1j
        assert k[1, 1].item() == -1 - 1j
        # non-contiguous numpy views and kiln views
        assert np.array_equal(kiln.from_numpy(a[:, 1::2]).numpy(), a[:, 1::2])
        assert np.array_equal(k.t().numpy(), a.T)
        assert np.array_equal(np.asarray(k), a)
        # via torch
        same(k, torch.from_numpy(a), 0, "complex.numpy")
        assert np.array_equal(K(torch.from_numpy(a)).numpy(), a)


def test_tolist_item():
    cases = [lambda L: L.tensor([[1 + 1j, 2], [3, 4j]]), lambda L: L.tensor(2 - 3j),
             lambda L: L.tensor([2 - 3j], dtype=L.complex128),
             lambda L: L.zeros(0, 2, dtype=L.complex64),
             lambda L: L.tensor([complex(-0.0, 1.5), complex(INF, NAN)])]
    for case in cases:
        a, b = case(kiln).tolist(), case(torch).tolist()
        assert repr(a) == repr(b), (a, b)
    for case in (lambda L: L.tensor(2 - 3j), lambda L: L.tensor([[0.1 + 0.2j]], dtype=L.complex128),
                 lambda L: L.tensor([0.1 + 0.2j])):
        a, b = case(kiln).item(), case(torch).item()
        assert type(a) is complex and a == b, (a, b)
    assert bool(kiln.tensor(1j)) and not bool(kiln.tensor(0j))


def test_python_complex_of_a_tensor():
    assert complex(kiln.tensor(1 + 1j)) == complex(torch.tensor(1 + 1j)) == 1 + 1j


# --- printing ----------------------------------------------------------------------------

def _repr_cases():
    g = torch.Generator().manual_seed(0)
    return [
        torch.tensor([1 + 2j, 3 - 1j]), torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128),
        torch.tensor(3 - 4j), torch.tensor(3 - 4j, dtype=torch.complex128),
        torch.zeros(0, dtype=torch.complex64), torch.zeros(0, 3, dtype=torch.complex128),
        torch.zeros(2, 0, dtype=torch.complex64), torch.tensor([1e10 + 1j, 1e-5j]),
        torch.tensor([1e-10 + 1j, 2]), torch.tensor([123456.789 + 0.001j]),
        torch.tensor([[1 + 1j, 2], [3, 4j]]), torch.tensor([1j], dtype=torch.complex128),
        torch.tensor([100 + 1j, 1e-3j]), torch.tensor([1e20 + 1e-20j], dtype=torch.complex128),
        torch.tensor([1 + 0j, 2 + 0j]), torch.tensor([[[1j]]]), torch.tensor([1e8 + 1j, 1 + 1j]),
        torch.tensor([-1j]), torch.tensor(complex(NAN, 0)), torch.tensor([12345678 + 1j]),
        torch.tensor([0.1 + 0.2j, 0.3j], dtype=torch.complex128),
        torch.arange(24.).reshape(2, 3, 4).to(torch.complex64) * (1 - 0.5j),
        torch.randn(3, 4, dtype=torch.complex64, generator=g) * 1e5,
        torch.randn(5, dtype=torch.complex128, generator=g) * 1e-6,
        torch.randn(2, 50, dtype=torch.complex64, generator=g),
        torch.tensor([1 + 2j, 3 - 4j, 5.5j]), torch.tensor([2.0 ** 40 + 1j]),
        torch.tensor([INF + 1j, NAN - 2j, complex(2.5, -INF), complex(NAN, NAN)]),
    ]


def test_repr_matches_torch():
    for t in _repr_cases():
        want = repr(t).replace("torch.", "kiln.")
        assert repr(K(t)) == want, f"\n{repr(K(t))}\n{want}"
        assert str(K(t)) == str(t).replace("torch.", "kiln.")
        oracle.record("complex.repr")


def test_repr_print_options():
    g = torch.Generator().manual_seed(1)
    for options in (dict(precision=2), dict(sci_mode=True), dict(linewidth=30),
                    dict(precision=6, sci_mode=False)):
        try:
            torch.set_printoptions(**options)
            kiln.set_printoptions(**options)
            t = torch.randn(2, 6, dtype=torch.complex64, generator=g)
            assert repr(K(t)) == repr(t).replace("torch.", "kiln."), options
        finally:
            torch.set_printoptions(profile="default")
            kiln.set_printoptions(profile="default")


@pytest.mark.parametrize("values", [[1.5 + 2.25j, -1.125j],
                                    [INF + 1j, NAN - 2j, complex(2, -INF), complex(NAN, NAN)],
                                    [0j, complex(-0.0, -0.0)]],
                         ids=["neg_zero", "inf_nan", "zeros"])
def test_repr_width_ignores_zeros_and_nonfinite(values):
    t = torch.tensor(values)
    assert repr(K(t)) == repr(t).replace("torch.", "kiln.")


def test_repr_summarised():
    t = torch.ones(1200, dtype=torch.complex64) * (1 - 2j)
    assert repr(K(t)) == repr(t).replace("torch.", "kiln.")


# --- stft / istft ------------------------------------------------------------------------

STFT_CASES = [
    # n_fft, hop, win_length, window, center, pad_mode, normalized, onesided, return_complex
    (8, None, None, None, True, "reflect", False, None, True),
    (16, 4, None, "hann", True, "reflect", False, None, True),
    (16, 5, 11, "hann", True, "constant", True, None, True),
    (9, 2, 5, "hann64", False, "reflect", False, False, True),
    (12, 3, 12, "hamming", True, "replicate", False, True, False),
    (7, 3, 6, "rand", True, "circular", True, False, False),
    (8, 8, None, None, False, "reflect", False, None, False),
    (10, 1, 3, "complex", True, "reflect", False, None, True),
    (32, 8, 32, "hann", True, "reflect", True, None, True),
    (5, 2, 4, None, True, "constant", False, None, False),
]


def _window(kind, n, L):
    if kind is None:
        return None
    if kind == "hann":
        return L.hann_window(n) if L is torch else K(torch.hann_window(n))
    if kind == "hann64":
        return K(torch.hann_window(n, dtype=torch.float64)) if L is kiln else \
            torch.hann_window(n, dtype=torch.float64)
    if kind == "hann+":  # non-zero at both ends: the uncentred (center=False) envelope's edges
        w = torch.hann_window(n, dtype=torch.float64) + 0.1
    elif kind == "hamming":
        w = torch.hamming_window(n)
    elif kind == "rand":
        w = data((n,), "float32", seed=n) + 2
    else:
        w = data((n,), "complex64", seed=n)
    return K(w) if L is kiln else w


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("case", STFT_CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_stft_matches_torch(case, dtype):
    n_fft, hop, win, wkind, center, pad_mode, normalized, onesided, rc = case
    for shape in ((57,), (3, 40)):
        x = data(shape, dtype, seed=n_fft)
        kw = dict(n_fft=n_fft, hop_length=hop, win_length=win, center=center, pad_mode=pad_mode,
                  normalized=normalized, onesided=onesided, return_complex=rc)
        wt, wk = _window(wkind, win or n_fft, torch), _window(wkind, win or n_fft, kiln)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = torch.stft(x, window=wt, **kw)
        except RuntimeError:
            # e.g. onesided output of a complex input: kiln refuses it too
            with pytest.raises(RuntimeError):
                kiln.stft(K(x), window=wk, **kw)
            continue
        got = kiln.stft(K(x), window=wk, **kw)
        # single precision when the input or the window is
        single = not is_double(x.dtype) or wkind in ("hann", "hamming", "rand", "complex")
        tol = fft_tol(torch.float32 if single else torch.float64, n_fft)
        same(got, want, tol, "stft")
        assert got.stride() == want.stride()  # torch's transposed (B?, N, T) layout
        same(K(x).stft(window=wk, **kw), want, tol, "stft")  # the method form


def test_stft_align_to_window():
    x = data((2, 41), "float64", seed=1)
    for n_fft, win, hop in ((8, 4, 10), (9, 4, 2), (16, 8, 3), (8, 3, 3), (12, 12, 4)):
        w = torch.hann_window(win, dtype=torch.float64)
        for align in (False, True):
            try:
                want = torch.stft(x, n_fft, hop, win, w, center=False, return_complex=True,
                                  align_to_window=align)
            except RuntimeError:
                continue  # torch 2.13 reads past the signal for some sizes (out of bounds)
            got = kiln.stft(K(x), n_fft, hop, win, K(w), center=False, return_complex=True,
                            align_to_window=align)
            same(got, want, 1e-12, "stft")
    raises_like_torch(lambda: torch.stft(x, 8, return_complex=True, align_to_window=True),
                      lambda: kiln.stft(K(x), 8, return_complex=True, align_to_window=True))


ISTFT_CASES = [
    # n_fft, hop, win_length, window, center, normalized, onesided, length, return_complex
    (8, None, None, "hann", True, False, None, None, False),
    (16, 4, None, "hann", True, False, None, 60, False),
    (16, 4, 12, "hann64", True, True, None, 57, False),
    (9, 2, 5, None, True, False, False, None, False),
    (9, 3, 9, "hann+", False, False, None, None, False),
    (8, 2, 8, "hann+", False, True, None, 70, False),
    (12, 3, 12, "hamming", False, True, True, 30, False),
    (10, 2, 10, "hann", True, False, False, None, True),
    (8, 2, 7, "complex", True, False, False, 50, True),
    (7, 3, 6, "rand", True, True, None, 45, False),
]


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("case", ISTFT_CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_istft_matches_torch(case, dtype):
    n_fft, hop, win, wkind, center, normalized, onesided, length, rc = case
    for batch in (None, 2):
        sig = data((57,) if batch is None else (batch, 57), "float64", seed=n_fft)
        analysis = torch.hann_window(win or n_fft, dtype=torch.float64)
        spec = torch.stft(sig, n_fft, hop, win, window=analysis, center=center,
                          return_complex=True, onesided=onesided is not False)
        spec = spec.to(tdt(dtype))
        spec_kiln = K(spec)
        kw = dict(n_fft=n_fft, hop_length=hop, win_length=win, center=center,
                  normalized=normalized, onesided=onesided, length=length, return_complex=rc)
        wt, wk = _window(wkind, win or n_fft, torch), _window(wkind, win or n_fft, kiln)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.istft(spec, window=wt, **kw)
        got = kiln.istft(spec_kiln, window=wk, **kw)
        single = dtype == "complex64" or wkind in ("hann", "hamming", "rand", "complex")
        same(got, want, 2e-5 if single else 1e-11, "istft")
        same(spec_kiln.istft(window=wk, **kw), want, 2e-5 if single else 1e-11, "istft")


@pytest.mark.parametrize("center", [True, False])
def test_stft_istft_round_trip(center):
    x = data((3, 200), "float64", seed=21)
    for n_fft, hop in ((16, 4), (15, 5), (64, 16)):
        w = kiln.hann_window(n_fft, dtype=kiln.float64)
        if not center:
            w = w + 0.1  # hann's zero first sample would leave the first output sample unknown
        s = kiln.stft(K(x), n_fft, hop, window=w, center=center, return_complex=True)
        if center:
            y = kiln.istft(s, n_fft, hop, window=w, center=True, length=200)
            same(y, x, 1e-12, "istft")
            y1 = kiln.istft(s[0], n_fft, hop, window=w, center=True, length=200)
            same(y1, x[0], 1e-12, "istft")
        else:
            y = kiln.istft(s, n_fft, hop, window=w, center=False)
            m = y.shape[-1]
            same(y, x[:, :m], 1e-12, "istft")  # the tail past the last frame is dropped
        # longer than the signal: zero padded at the end, as torch
        want = torch.istft(T(s), n_fft, hop, window=T(w), center=center, length=230)
        same(kiln.istft(s, n_fft, hop, window=w, center=center, length=230), want, 1e-12, "istft")
    # complex signal, two-sided spectrum, return_complex=True
    c = data((120,), "complex128", seed=3)
    w = kiln.hann_window(16, dtype=kiln.float64)
    s = kiln.stft(K(c), 16, 4, window=w, return_complex=True)
    assert s.shape[0] == 16
    same(kiln.istft(s, 16, 4, window=w, length=120, return_complex=True), c, 1e-12, "istft")


def test_stft_istft_errors():
    x = data((40,), "float32")
    kx = K(x)
    s = torch.stft(torch.randn(40), 8, return_complex=True)
    ks = K(s)
    cases = [
        lambda L, a, b: L.stft(a, 8),  # real input without return_complex
        lambda L, a, b: L.stft(a, 8, window=L.ones(8)),
        lambda L, a, b: L.stft(a, 64, center=False, return_complex=True),  # n_fft > length
        lambda L, a, b: L.stft(a, 8, 0, return_complex=True),
        lambda L, a, b: L.stft(a, 8, 2, 9, return_complex=True),
        lambda L, a, b: L.stft(a, 8, 2, 6, window=L.ones(8), return_complex=True),
        lambda L, a, b: L.stft(a.reshape(2, 2, 10), 4, return_complex=True),
        lambda L, a, b: L.stft((a * 10).to(L.int64), 4, center=False, return_complex=True),
        lambda L, a, b: L.stft(a.to(L.complex64), 8, onesided=True, return_complex=True),
        lambda L, a, b: L.stft(a, 8, pad_mode="zeros", return_complex=True),
        lambda L, a, b: L.stft(a, 8, return_complex=True, align_to_window=True),
        lambda L, a, b: L.stft(a.to(L.float16), 8, return_complex=True),
        lambda L, a, b: L.istft(L.view_as_real(b), 8),  # real input
        lambda L, a, b: L.istft(b, 8, window=L.zeros(8)),  # NOLA
        lambda L, a, b: L.istft(b, 8, hop_length=4, win_length=2, window=L.ones(2)),
        lambda L, a, b: L.istft(b, 10),
        lambda L, a, b: L.istft(b, 8, onesided=False),
        lambda L, a, b: L.istft(b[:, :0], 8),
        lambda L, a, b: L.istft(b[0], 8),
        lambda L, a, b: L.istft(b, 8, return_complex=True),
        lambda L, a, b: L.istft(b, 8, window=L.ones(8, dtype=L.complex64), onesided=True),
        lambda L, a, b: L.istft(b, 8, window=L.ones(7)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            raises_like_torch(lambda: case(torch, x, s), lambda: case(kiln, kx, ks))
    with pytest.raises(RuntimeError, match="return_complex"):
        kiln.stft(kx, 8)
    with pytest.raises(RuntimeError, match="NOLA|overlap"):
        kiln.istft(ks, 8, window=kiln.zeros(8))
    # a window that is zero on a whole stretch between frames
    w = kiln.tensor([0.0, 0, 0, 1, 1, 0, 0, 0])
    with pytest.raises(RuntimeError, match="NOLA|overlap"):
        kiln.istft(ks, 8, hop_length=5, window=w)
    raises_like_torch(lambda: torch.istft(s, 8, hop_length=5, window=T(w)),
                      lambda: kiln.istft(ks, 8, hop_length=5, window=w))


def test_stft_reflect_padding_too_large_is_a_runtime_error():
    x = data((6,), "float32")
    raises_like_torch(lambda: torch.stft(x, 16, return_complex=True),
                      lambda: kiln.stft(K(x), 16, return_complex=True))


# --- unsupported complex operations fail cleanly --------------------------------------------

UNSUPPORTED = [
    ("softmax", lambda c: kiln.softmax(c, 0)),
    ("sort", lambda c: kiln.sort(c)), ("max", lambda c: kiln.max(c)), ("lt", lambda c: c < c),
    ("relu", lambda c: kiln.relu(c)), ("floor", lambda c: kiln.floor(c)),
    ("clamp", lambda c: c.clamp(0, 1)), ("argmax", lambda c: c.argmax()),
]  # torch refuses these for complex too (sigmoid, cumsum, prod: test_complex_more.py)


@pytest.mark.parametrize("name,fn", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_complex_ops_raise(name, fn):
    c = kiln.tensor([1 + 1j, 2 - 1j, 0.5j])
    with pytest.raises((NotImplementedError, RuntimeError, TypeError)):
        fn(c)
    # the tensor is still usable afterwards
    assert c.tolist() == [1 + 1j, 2 - 1j, 0.5j]


def test_complex_on_xpu_fails_cleanly():
    """The xpu device has no complex kernels: moving a complex tensor there may work (a copy
    of the bytes) or be refused, but computing with one raises."""
    c = kiln.tensor([1 + 1j, 2 - 1j, 0.5j])
    try:
        x = c.to("xpu")
    except (NotImplementedError, RuntimeError, TypeError):
        return  # no xpu device here, or complex refused at the copy
    assert x.cpu().tolist() == c.tolist()
    for fn in (lambda: x + x, lambda: x * 2, lambda: kiln.exp(x), lambda: x.abs(), lambda: x.sum(),
               lambda: kiln.fft.fft(x), lambda: kiln.zeros(3, dtype=kiln.complex64, device="xpu"),
               lambda: kiln.ones(3, device="xpu").to(kiln.complex64)):
        with pytest.raises((NotImplementedError, RuntimeError, TypeError)):
            fn()


@pytest.mark.parametrize("fn", [lambda x: kiln.fft.fft(x), lambda x: kiln.fft.rfft(x),
                                lambda x: kiln.fft.irfft(x), lambda x: x.to(kiln.complex64)],
                         ids=["fft", "rfft", "irfft", "to_complex"])
def test_complex_autograd_is_not_silently_dropped(fn):
    x = kiln.ones(4, requires_grad=True)
    try:
        r = fn(x)
    except (NotImplementedError, RuntimeError):
        return
    assert r.requires_grad


# --- autograd through complex ops and the FFTs ------------------------------------------------
# torch's convention: the gradient with respect to a complex tensor is the conjugate Wirtinger
# derivative; a real input promoted to complex receives the real part.

def _real_loss_cases(L):
    fft, win = L.fft, L.hann_window(16, dtype=L.float64)
    return {
        "rfft abs": lambda x: fft.rfft(x).abs().sum(),
        "fft abs^2 mean": lambda x: (fft.fft(x).abs() * fft.fft(x).abs()).mean(),
        "irfft(rfft^2)": lambda x: fft.irfft(fft.rfft(x) * fft.rfft(x)).sum(),
        "irfft odd n": lambda x: (fft.irfft(fft.rfft(x), n=7) * fft.irfft(fft.rfft(x), n=7)).sum(),
        "irfft longer input": lambda x: fft.irfft(fft.rfft(x, n=16), n=9).abs().sum(),
        "rfft2 real/imag": lambda x: (fft.rfft2(x).real * 2 + fft.rfft2(x).imag.sin()).sum(),
        "fftn ortho": lambda x: fft.fftn(x, norm="ortho").abs().sum(),
        "ifft forward norm": lambda x: fft.ifft(x, n=13, norm="forward").abs().sum(),
        "hfft": lambda x: fft.hfft(fft.fft(x)).sin().sum(),
        "ihfft": lambda x: fft.ihfft(x).abs().sum(),
        "exp log sqrt": lambda x: fft.fft(x).exp().log().sqrt().abs().sum(),
        "sin cos tanh": lambda x: (fft.fft(x) / 8).sin().cos().tanh().abs().sum(),
        "mul div reciprocal": lambda x: (fft.fft(x) * fft.fft(x, n=10).exp() / (fft.fft(x) + 2)).reciprocal().abs().sum(),
        "angle": lambda x: (fft.fft(x) / (fft.fft(x) + 1)).angle().cos().sum(),
        "view_as_real / complex": lambda x: L.view_as_complex(L.view_as_real(fft.fft(x)) * 3).abs().sum(),
        "complex(re, im) conj": lambda x: L.complex(x, x * x).conj().imag.sum()
        + L.complex(x, x * x).abs().sum(),
        "stft": lambda x: L.stft(x, 16, 4, window=win, return_complex=True).abs().sum(),
    }


@pytest.mark.parametrize("case", list(_real_loss_cases(torch)))
def test_gradients_through_complex_ops_match_torch(case):
    rng = np.random.default_rng(7)
    shape = (2, 100) if case == "stft" else (4, 10)
    a = rng.standard_normal(shape)
    t = torch.tensor(a, requires_grad=True)
    k = kiln.from_numpy(a.copy()).requires_grad_()
    _real_loss_cases(torch)[case](t).backward()
    _real_loss_cases(kiln)[case](k).backward()
    assert k.grad is not None and k.grad.dtype == kiln.float64
    want = t.grad.numpy()
    err = np.abs(k.grad.numpy() - want).max() / max(np.abs(want).max(), 1e-300)
    assert err < 1e-11, (case, err)


def test_complex_leaf_gradient_is_the_conjugate_wirtinger_derivative():
    """|z|^2 summed: torch's gradient is 2 z (for a complex leaf)."""
    z0 = np.array([1 + 2j, -0.5 + 0.25j, 3j])
    t = torch.tensor(z0, requires_grad=True)
    k = kiln.from_numpy(z0.copy()).requires_grad_()
    (t * t.conj()).real.sum().backward()
    (k * k.conj()).real.sum().backward()
    assert k.grad.dtype == kiln.complex128
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-14, atol=0)


MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 3)), ((2, 3, 4), (4,)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((7, 4), (2, 4, 3)), ((1, 3), (3, 1))]


@pytest.mark.parametrize("dtype", C_DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_complex_matmul_matches_torch(sa, sb, dtype):
    rng = np.random.default_rng(3)
    np_dtype = np.complex64 if dtype == "complex64" else np.complex128
    a = (rng.standard_normal(sa) + 1j * rng.standard_normal(sa)).astype(np_dtype)
    b = (rng.standard_normal(sb) + 1j * rng.standard_normal(sb)).astype(np_dtype)
    want = torch.from_numpy(a) @ torch.from_numpy(b)
    got = kiln.from_numpy(a) @ kiln.from_numpy(b)
    assert got.dtype == getattr(kiln, dtype) and tuple(got.shape) == tuple(want.shape)
    tol = 2e-6 if dtype == "complex64" else 1e-14
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=tol * max(1, np.abs(want.numpy()).max()))


@pytest.mark.parametrize("op", ["mm", "bmm", "matmul"])
def test_complex_product_gradients_match_torch(op):
    rng = np.random.default_rng(5)
    sa, sb = {"mm": ((3, 4), (4, 2)), "bmm": ((2, 3, 4), (2, 4, 2)),
              "matmul": ((2, 3, 4), (4,))}[op]
    a = rng.standard_normal(sa) + 1j * rng.standard_normal(sa)
    b = rng.standard_normal(sb) + 1j * rng.standard_normal(sb)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ka, kb = kiln.from_numpy(a.copy()).requires_grad_(), kiln.from_numpy(b.copy()).requires_grad_()
    getattr(torch, op)(ta, tb).abs().sum().backward()
    getattr(kiln, op)(ka, kb).abs().sum().backward()
    np.testing.assert_allclose(ka.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(kb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-13)
