"""assert_close, and the deprecated assert_allclose that torch 2.13 still ships."""
import warnings

import kiln
from ._errors import ErrorMeta
from ._originate import originate_pairs
from ._scalar_pairs import BooleanPair, NonePair, NumberPair
from ._tensor_pair import TensorLikePair
from ._tolerances import default_tolerances

_PAIR_TYPES = (NonePair, BooleanPair, NumberPair, TensorLikePair)


def not_close_error_metas(actual, expected, *, pair_types=_PAIR_TYPES, **options):
    """The ErrorMeta of every mismatching leaf (empty when all are close). A structural
    error (lengths, keys, unsupported types, bad tolerances) raises at once, and ignores
    the user's msg, as torch does."""
    __tracebackhide__ = True
    try:
        pairs = originate_pairs(actual, expected, pair_types=pair_types, **options)
    except ErrorMeta as meta:
        raise meta.to_error() from None
    metas = []
    for pair in pairs:
        try:
            pair.compare()
        except ErrorMeta as meta:
            metas.append(meta)
        except Exception as error:
            raise RuntimeError(f"Comparing\n\n{pair}\n\nresulted in the unexpected exception "
                               f"above (a bug in kiln.testing).") from error
    return metas


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Asserts that `actual` and `expected` are close, as torch.testing.assert_close:
    |actual - expected| <= atol + rtol * |expected| elementwise, with rtol / atol from the
    dtype when both are omitted (float16 1e-3 / 1e-5, bfloat16 1.6e-2 / 1e-5, float32 and
    complex64 1.3e-6 / 1e-5, float64 and complex128 1e-7 / 1e-7, others exact). inf only
    matches an inf of the same sign; nan only matches nan with equal_nan. Tensors must also
    agree in shape and (per the check_* flags) device, dtype, layout and stride. Sequences
    and mappings are compared recursively, numbers and bools as Python scalars, numpy
    arrays through kiln.as_tensor. msg replaces the failure message (str) or edits it
    (callable taking the generated message)."""
    __tracebackhide__ = True
    metas = not_close_error_metas(
        actual, expected, allow_subclasses=allow_subclasses, rtol=rtol, atol=atol,
        equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
        check_layout=check_layout, check_stride=check_stride, msg=msg)
    if metas:
        raise metas[0].to_error(msg)


# Older, looser defaults that assert_allclose kept from before assert_close existed.
_ALLCLOSE_PRECISIONS = {kiln.float16: (1e-3, 1e-3), kiln.float32: (1e-4, 1e-5),
                        kiln.float64: (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated (torch deprecated torch.testing.assert_allclose in 1.12 and 2.13 still has
    it): non-tensors become tensors (expected in actual's dtype), nan equals nan by default,
    dtypes need not match, and the default tolerances are the looser legacy ones."""
    warnings.warn("`kiln.testing.assert_allclose()` is deprecated, as "
                  "`torch.testing.assert_allclose()` is since torch 1.12, and will be removed "
                  "in a future release. Please use `kiln.testing.assert_close()` instead.",
                  FutureWarning, stacklevel=2)
    if not isinstance(actual, kiln.Tensor):
        actual = kiln.tensor(actual)
    if not isinstance(expected, kiln.Tensor):
        expected = kiln.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = default_tolerances(actual, expected,
                                        dtype_precisions=_ALLCLOSE_PRECISIONS)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, check_stride=False, msg=msg or None)
