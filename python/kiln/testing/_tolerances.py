"""Default rtol / atol per dtype (the table of torch.testing.assert_close) and the rule
that rtol and atol are given together or not at all."""
import kiln
from ._errors import ErrorMeta

# {dtype: (rtol, atol)}. Dtypes missing here (integers, bool) compare exactly. kiln has no
# complex32 and no quantized dtypes, whose rows torch's table also has.
DTYPE_PRECISIONS = {
    kiln.float16: (0.001, 1e-5),
    kiln.bfloat16: (0.016, 1e-5),
    kiln.float32: (1.3e-6, 1e-5),
    kiln.float64: (1e-7, 1e-7),
    kiln.complex64: (1.3e-6, 1e-5),
    kiln.complex128: (1e-7, 1e-7),
}


def default_tolerances(*inputs, dtype_precisions=None):
    """The loosest (rtol, atol) over the dtypes of `inputs` (tensors or dtypes)."""
    dtypes = []
    for input in inputs:
        if isinstance(input, kiln.Tensor):
            dtypes.append(input.dtype)
        elif isinstance(input, kiln.dtype):
            dtypes.append(input)
        else:
            raise TypeError(f"Expected a kiln.Tensor or a kiln.dtype, but got {type(input)} "
                            f"instead.")
    table = dtype_precisions or DTYPE_PRECISIONS
    rtols, atols = zip(*[table.get(dtype, (0.0, 0.0)) for dtype in dtypes])
    return max(rtols), max(atols)


def get_tolerances(*inputs, rtol, atol, id=()):
    """(rtol, atol) as given, or the defaults of the inputs' dtypes when both are omitted.
    Giving only one is an error: atol=0 alone would still pass through a default rtol."""
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ErrorMeta(ValueError, f"Both 'rtol' and 'atol' must be either specified or "
                                    f"omitted, but got no {missing}.", id=id)
    if rtol is not None:
        return rtol, atol
    return default_tolerances(*inputs)
