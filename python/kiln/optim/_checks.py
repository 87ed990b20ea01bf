"""Argument checks shared by the optimizers: torch.optim's ValueError messages (same text
first, so a message matched against torch's still matches), followed by what was expected."""

__all__ = ["check_non_negative", "check_betas", "check_in_range"]


def check_non_negative(value, what):
    """what: torch's wording, e.g. "learning rate" or "epsilon value"."""
    if not 0.0 <= value:
        raise ValueError(f"Invalid {what}: {value} (expected a value >= 0)")


def check_betas(betas):
    for i, beta in enumerate(betas[:2]):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta} "
                             "(expected 0 <= beta < 1)")


def check_in_range(value, what, low, high):
    """low <= value <= high (both ends included)."""
    if not low <= value <= high:
        raise ValueError(f"Invalid {what}: {value} (expected {low} <= value <= {high})")
