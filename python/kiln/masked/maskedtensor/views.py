"""Shape operations of MaskedTensor: applied to the data and to the mask alike (indexing,
transpose, view, reshape, expand, unsqueeze, split, unfold)."""


class ViewOps:
    """Mixin of MaskedTensor: operations that move elements without computing on them."""

    def _both(self, name, *args, **kwargs):
        data = getattr(self._masked_data, name)(*args, **kwargs)
        mask = getattr(self._masked_mask, name)(*args, **kwargs)
        if isinstance(data, (tuple, list)):
            return type(data)(self._wrap(d, m) for d, m in zip(data, mask))
        return self._wrap(data, mask)

    def __getitem__(self, index):
        return self._both("__getitem__", index)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def transpose(self, dim0, dim1):
        return self._both("transpose", dim0, dim1)

    def t(self):
        return self._both("t")

    def view(self, *shape):
        return self._both("view", *shape)

    def reshape(self, *shape):
        return self._both("reshape", *shape)

    def expand(self, *sizes):
        return self._both("expand", *sizes)

    def unsqueeze(self, dim):
        return self._both("unsqueeze", dim)

    def split(self, split_size, dim=0):
        return self._both("split", split_size, dim)

    def unfold(self, dimension, size, step):
        return self._both("unfold", dimension, size, step)
