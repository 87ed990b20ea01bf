"""kiln.backends.mps, as torch.backends.mps off macOS: kiln has no Metal backend."""


def is_available():
    return False


def is_built():
    return False
