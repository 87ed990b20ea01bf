"""kiln.special's Bessel functions, zeta, incomplete gamma and orthogonal polynomials (kiln
compositions) against torch.special (PyTorch 2.13): grids over every range branch, float32 /
float64, NaN / inf / negative edges, int inputs, and a couple on the xpu device.
Float64 references are torch's float64 results; float32 results are compared with torch's
float64 results on the same (float32-rounded) inputs. torch's own float64 bessel_j0/j1/y0/y1
are only good to ~4e-7 absolute, so those compare with atol 1e-6 and are also checked
against mpmath where it is installed."""
import math

import numpy as np
import pytest
import torch

import kiln

INF, NAN = math.inf, math.nan


def _grid():
    return np.concatenate([np.linspace(-100, 100, 801), -np.logspace(-30, 2.5, 60),
                           np.logspace(-30, 2.5, 90),
                           [0.0, -0.0, 0.999, 1.0, 1.001, 1.999, 2.0, 2.001, 29.99, 30.0,
                            30.01, 700.0, 1e5, INF, -INF, NAN]])


def _cmp(name, xs, dt, rtol, atol, kargs=(), ref_fn=None):
    t = torch.tensor(xs, dtype=dt)
    ref = (ref_fn or getattr(torch.special, name))(t.double(), *kargs)
    ref_same = getattr(torch.special, name)(t, *kargs).double()
    # where float32 over/underflows, torch's float32 result is the reference
    ref = torch.where(torch.isfinite(ref_same) & (ref_same != 0), ref, ref_same)
    got = getattr(kiln.special, name)(kiln.tensor(t.numpy()), *kargs)
    assert str(got.dtype) == "kiln." + str(ref_same.dtype).split(".")[1] or \
        str(got.dtype).endswith(str(t.dtype).split(".")[1])
    torch.testing.assert_close(torch.tensor(got.numpy()).double(), ref, rtol=rtol, atol=atol,
                               equal_nan=True)


# name, (float64 rtol, atol), (float32 rtol, atol)
UNARY = [("i0e", (1e-14, 0), (2e-6, 1e-30)), ("i1", (1e-14, 0), (2e-6, 1e-30)),
         ("i1e", (1e-14, 0), (2e-6, 1e-30)), ("modified_bessel_i0", (1e-14, 0), (2e-6, 1e-30)),
         ("modified_bessel_i1", (1e-14, 0), (2e-6, 1e-30)),
         ("modified_bessel_k0", (1e-14, 0), (2e-6, 1e-30)),
         ("modified_bessel_k1", (1e-14, 0), (2e-6, 1e-30)),
         ("scaled_modified_bessel_k0", (1e-14, 0), (2e-6, 1e-30)),
         ("scaled_modified_bessel_k1", (1e-14, 0), (2e-6, 1e-30)),
         ("bessel_j0", (1e-6, 1e-6), (1e-5, 2e-6)), ("bessel_j1", (1e-6, 1e-6), (1e-5, 2e-6)),
         ("bessel_y0", (1e-6, 1e-6), (1e-5, 2e-6)), ("bessel_y1", (1e-6, 1e-6), (1e-5, 2e-6)),
         ("spherical_bessel_j0", (1e-15, 1e-300), (1e-6, 1e-30))]


@pytest.mark.parametrize("name,tol64,tol32", UNARY)
def test_unary_vs_torch(name, tol64, tol32):
    xs = _grid()
    _cmp(name, xs, torch.float64, *tol64)
    _cmp(name, xs, torch.float32, *tol32)


def test_jy_vs_mpmath():
    mpmath = pytest.importorskip("mpmath")
    xs = np.array([0.1, 1.0, 1.99, 2.0, 2.01, 2.405, 3.0, 5.52, 7.0, 10.0, 20.0, 43.2, 96.6])
    for name, nu, fn in [("bessel_j0", 0, mpmath.besselj), ("bessel_j1", 1, mpmath.besselj),
                         ("bessel_y0", 0, mpmath.bessely), ("bessel_y1", 1, mpmath.bessely)]:
        ref = torch.tensor([float(fn(nu, x)) for x in xs], dtype=torch.float64)
        got = torch.tensor(getattr(kiln.special, name)(kiln.tensor(xs)).numpy())
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-15)


def test_int_inputs():
    for name in ("i0e", "i1", "modified_bessel_k0", "bessel_j0", "spherical_bessel_j0"):
        got = getattr(kiln.special, name)(kiln.tensor([0, 1, 2, 5]))
        ref = getattr(torch.special, name)(torch.tensor([0, 1, 2, 5]))
        assert str(got.dtype) == "kiln.float32"
        torch.testing.assert_close(torch.tensor(got.numpy()), ref, rtol=2e-6, atol=1e-7)


def _cmp2(name, a, b, dt, rtol, atol):
    a, b = torch.tensor(a, dtype=dt), torch.tensor(b, dtype=dt)
    ref = getattr(torch.special, name)(a.double(), b.double())
    ref_same = getattr(torch.special, name)(a, b).double()  # float32 overflow / underflow
    ref = torch.where(torch.isfinite(ref_same) & (ref_same != 0), ref, ref_same)
    got = getattr(kiln.special, name)(kiln.tensor(a.numpy()), kiln.tensor(b.numpy()))
    torch.testing.assert_close(torch.tensor(got.numpy()).double(), ref, rtol=rtol, atol=atol,
                               equal_nan=True)


def test_zeta():
    x = np.linspace(1.01, 40, 60)[:, None]
    q = np.logspace(-3, 3, 50)[None, :]
    x, q = [np.ascontiguousarray(v) for v in np.broadcast_arrays(x, q)]
    _cmp2("zeta", x, q, torch.float64, 1e-14, 0)
    _cmp2("zeta", x, q, torch.float32, 1e-5, 1e-36)
    edges_x = [1., 1., 2., 2., 2., 3., 3., 2.5, 0.5, -1., 2., INF, 2., NAN, 2., INF, INF, 1e3,
               50., 2., 2., 1.5, 4., 2., 7., 1.0001, 30., 2., INF, INF, 2.5]
    edges_q = [1., -1., 0., -1., -1.5, -2.5, -0., -1.5, 2., 2., INF, 2., -INF, 1., NAN, 1.,
               0.5, 1., 0.5, 1e10, -1e10, 1e-300, -30.25, 1e-3, 0.7, 3., 0.1, 50., 1.5, -0.5,
               -INF]
    _cmp2("zeta", edges_x, edges_q, torch.float64, 1e-14, 0)
    got = kiln.special.zeta(2, kiln.tensor([1.0, 2.0]))
    torch.testing.assert_close(torch.tensor(got.numpy()),
                               torch.special.zeta(2, torch.tensor([1.0, 2.0])))


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma(name):
    a = np.logspace(-3, 3, 40)[:, None]
    x = np.concatenate([np.logspace(-3, 3.3, 45), [0.999, 1.0, 1.001]])[None, :]
    a, x = [np.ascontiguousarray(v) for v in np.broadcast_arrays(a, x)]
    # measured: float64 <= 1.7e-9 relative to torch (torch's large-a asymptotic included)
    _cmp2(name, a, x, torch.float64, 5e-9, 1e-300)
    # float32: P or Q computed as 1 - the other loses digits where that is near 1
    _cmp2(name, a, x, torch.float32, 1e-3, 2e-6)
    _cmp2(name, [0., 0., 1., 1., -1., 1., INF, INF, 2., NAN, 0., 3.],
          [0., 1., 0., -1., 1., INF, 1., INF, NAN, 1., INF, 0.], torch.float64, 0, 0)


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYS)
def test_polynomials(name):
    x = torch.cat([torch.linspace(-3, 3, 121, dtype=torch.float64),
                   torch.tensor([-1.0, 0.0, 0.5, 1.0])])
    for dt, rtol, atol in ((torch.float64, 1e-12, 3e-7), (torch.float32, 1e-4, 1e-5)):
        xd = x.to(dt)
        for n in [-2, 0, 1, 2, 3, 7, 9, 12]:
            ref = getattr(torch.special, name)(xd.double(), n)
            got = getattr(kiln.special, name)(kiln.tensor(xd.numpy()), n)
            assert str(got.dtype) == "kiln." + str(dt).split(".")[1]
            # torch's trig form of U_n near x = +-1 (n > 8) is only good to ~2e-8 relative;
            # float32 recurrences lose digits where terms cancel (atol on values up to ~1e8)
            torch.testing.assert_close(torch.tensor(got.numpy()).double(), ref, rtol=rtol,
                                       atol=atol)
    nt = torch.tensor([[-1], [0], [3], [11]])
    ref = getattr(torch.special, name)(x[None, :], nt)
    got = getattr(kiln.special, name)(kiln.tensor(x[None, :].numpy()), kiln.tensor(nt.numpy()))
    assert str(got.dtype) == "kiln.float64"
    torch.testing.assert_close(torch.tensor(got.numpy()), ref, rtol=1e-12, atol=1e-7)


def test_on_xpu():
    xs = [-3.0, -0.5, 0.0, 0.7, 1.5, 2.5, 31.0, 90.0]
    for name in ("i1e", "modified_bessel_k1", "bessel_y0"):
        t = torch.tensor(xs, dtype=torch.float32)
        got = getattr(kiln.special, name)(kiln.tensor(xs).to("xpu"))
        assert got.device.type == "xpu"
        ref = getattr(torch.special, name)(t.double())
        torch.testing.assert_close(torch.tensor(got.to("cpu").numpy()).double(), ref,
                                   rtol=2e-5, atol=2e-6, equal_nan=True)
    q = kiln.tensor([1.0, 2.5]).to("xpu")
    got = kiln.special.zeta(kiln.tensor([2.0, 3.0]).to("xpu"), q)
    torch.testing.assert_close(torch.tensor(got.to("cpu").numpy()),
                               torch.special.zeta(torch.tensor([2.0, 3.0]),
                                                  torch.tensor([1.0, 2.5])), rtol=2e-6, atol=0)
    got = kiln.special.legendre_polynomial_p(kiln.tensor([0.3, -0.7]).to("xpu"), 5)
    torch.testing.assert_close(torch.tensor(got.to("cpu").numpy()),
                               torch.special.legendre_polynomial_p(torch.tensor([0.3, -0.7]), 5),
                               rtol=1e-5, atol=1e-6)


def test_igamma_aliases_match_torch():
    a, x = torch.tensor([0.5, 2.0, 5.0, 12.0]), torch.tensor([1.0, 1.0, 3.0, 11.0])
    ka, kx = kiln.tensor(a.numpy()), kiln.tensor(x.numpy())
    for got, want in ((kiln.igamma(ka, kx), torch.igamma(a, x)), (ka.igammac(kx), a.igammac(x)),
                      (ka.clone().igamma_(kx), a.clone().igamma_(x))):
        torch.testing.assert_close(torch.from_numpy(got.numpy()), want, rtol=1e-5, atol=1e-6)
