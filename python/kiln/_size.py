"""kiln.Size: the shape of a tensor, a tuple of ints (as torch.Size)."""


class Size(tuple):
    __slots__ = ()

    def __repr__(self):
        return "kiln.Size([" + ", ".join(str(int(d)) for d in self) + "])"

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))
