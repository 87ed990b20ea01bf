"""The texts of a failed comparison, worded as torch.testing's so that logs read alike:

    Tensor-likes are not close!

    Mismatched elements: 3 / 10 (30.0%)
    Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-05 allowed)
    Greatest relative difference: 0.25 at index (1, 2) (up to 1.3e-06 allowed)

With zero tolerances the header says "equal" and the "(up to ...)" parts are left out."""
import kiln


def _identifier(default, identifier):
    if identifier is None:
        return default
    return identifier(default) if callable(identifier) else identifier


def _diff_line(kind, diff, idx, tol, equality):
    if idx is None:
        line = f"{kind.title()} difference: {diff}"
    else:
        line = f"Greatest {kind} difference: {diff} at index {idx}"
    if not equality:
        line += f" (up to {tol} allowed)"
    return line + "\n"


def mismatch_msg(*, default_identifier, identifier=None, extra=None, abs_diff,
                 abs_diff_idx=None, atol, rel_diff, rel_diff_idx=None, rtol):
    """Header, optional extra line(s), then the absolute and the relative difference."""
    equality = rtol == 0 and atol == 0
    name = _identifier(default_identifier, identifier)
    msg = f"{name} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += _diff_line("absolute", abs_diff, abs_diff_idx, atol, equality)
    msg += _diff_line("relative", rel_diff, rel_diff_idx, rtol, equality)
    return msg.strip()


def scalar_mismatch_msg(actual, expected, *, rtol, atol, identifier=None):
    """For two numbers (or two 0-d tensors' items)."""
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return mismatch_msg(default_identifier="Scalars", identifier=identifier,
                        extra=f"Expected {expected} but got {actual}.", abs_diff=abs_diff,
                        atol=atol, rel_diff=rel_diff, rtol=rtol)


def _unravel(flat_index, shape):
    """The multi-index of element `flat_index` of a row-major tensor of `shape`."""
    index = []
    for size in reversed(tuple(shape)):
        flat_index, rest = divmod(flat_index, size)
        index.append(rest)
    return tuple(reversed(index))


def tensor_mismatch_msg(actual, expected, matches, *, rtol, atol, identifier=None):
    """For two same-shape tensors; `matches` is the boolean closeness mask. The greatest
    differences are taken over the mismatching elements only (matches count as 0)."""
    total = matches.numel()
    mismatches = total - int(kiln.sum(matches).item())
    extra = f"Mismatched elements: {mismatches} / {total} ({mismatches / total:.1%})"
    a, e, m = actual.flatten(), expected.flatten(), matches.flatten()
    if not a.dtype.is_floating_point and not a.dtype.is_complex:
        # Integers and bools: subtract in int64 so that int8 - int8 cannot wrap.
        a, e = a.to(kiln.int64), e.to(kiln.int64)
    abs_diff = kiln.abs(a - e)
    abs_diff[m] = 0
    max_abs, abs_idx = kiln.max(abs_diff, 0)
    rel_diff = abs_diff / kiln.abs(e)
    rel_diff[m] = 0
    max_rel, rel_idx = kiln.max(rel_diff, 0)
    return mismatch_msg(default_identifier="Tensor-likes", identifier=identifier,
                        extra=extra, abs_diff=max_abs.item(),
                        abs_diff_idx=_unravel(int(abs_idx.item()), matches.shape),
                        atol=atol, rel_diff=max_rel.item(),
                        rel_diff_idx=_unravel(int(rel_idx.item()), matches.shape),
                        rtol=rtol)
