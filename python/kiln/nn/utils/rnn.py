"""kiln.nn.utils.rnn: padded and packed batches of variable-length sequences, as torch's.

A PackedSequence stores a batch of sequences sorted by decreasing length, time step by time
step: the rows of step t are the step-t elements of the batch_sizes[t] sequences that are
still running, so ``data`` is [sum(lengths), *] and ``batch_sizes`` (a CPU int64 tensor) is
non-increasing. ``sorted_indices`` maps the sorted batch to the caller's order
(``unsorted_indices`` is its inverse); both are None when the input was already sorted.

Because batch_sizes is non-increasing, the steps between two changes of the batch size hold
the same sequences: such a run of steps is a contiguous block of ``data`` that views as a
dense [steps, batch, *] tensor. Packing, padding and the recurrent layers (nn.RNN / LSTM /
GRU take a PackedSequence) all work block by block (``_runs``), so the Python loops are over
distinct lengths, not over time steps.

Differences from torch 2.13: pack_padded_sequence raises a RuntimeError when a length exceeds
the input's sequence length (torch 2.13 does not check, and returns a PackedSequence whose
batch_sizes count rows that its data does not have); with enforce_sorted=False, equal
lengths keep their input order (a stable sort), where torch's sort orders ties arbitrarily in
batches of more than 16, so sorted_indices may differ there (padded and unpacked results
do not)."""
from collections import namedtuple

from ... import _C

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]

_FIELDS = ("data", "batch_sizes", "sorted_indices", "unsorted_indices")


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(namedtuple("PackedSequence_", _FIELDS)):
    """The data and batch_sizes of a packed batch (see the module docstring). Build it with
    pack_padded_sequence or pack_sequence. ``PackedSequence(data, batch_sizes,
    sorted_indices)`` fills in unsorted_indices; ``PackedSequence((data, batch_sizes))`` is
    accepted too. Conversions (to, cpu, double, ...) convert ``data`` and move the indices to
    its device; batch_sizes stays on the CPU."""
    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # PackedSequence((data, batch_sizes), sorted_indices=...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never "
                "be created manually. They should be instantiated by functions like "
                "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """Tensor.to on ``data``; self when that returns data itself, else a copy whose
        indices follow data's device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: t.to(data.device)  # noqa: E731
        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                          _bind(self.unsorted_indices, move))

    def cuda(self, *args, **kwargs):
        probe = _C.tensor((), dtype=self.data.dtype, device=self.data.device)
        if probe.to(*args, **kwargs).is_cuda:
            return self.to(*args, **kwargs)
        return self.to(*args, **dict(kwargs, device="cuda"))

    def cpu(self, *args, **kwargs):
        probe = _C.tensor((), dtype=self.data.dtype, device=self.data.device)
        if probe.to(*args, **kwargs).device.type == "cpu":
            return self.to(*args, **kwargs)
        return self.to(*args, **dict(kwargs, device="cpu"))

    def pin_memory(self):
        pin = lambda t: t.pin_memory()  # noqa: E731
        return type(self)(self.data.pin_memory(), self.batch_sizes,
                          _bind(self.sorted_indices, pin), _bind(self.unsorted_indices, pin))

    def double(self):
        return self.to(dtype=_C.float64)

    def float(self):
        return self.to(dtype=_C.float32)

    def half(self):
        return self.to(dtype=_C.float16)

    def long(self):
        return self.to(dtype=_C.int64)

    def int(self):
        return self.to(dtype=_C.int32)

    def short(self):
        return self.to(dtype=_C.int16)

    def char(self):
        return self.to(dtype=_C.int8)

    def byte(self):
        return self.to(dtype=_C.uint8)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def invert_permutation(permutation):
    """The inverse of a 1-D permutation tensor (None for None)."""
    if permutation is None:
        return None
    inverse = _C.empty_like(permutation)
    n = permutation.numel()
    return inverse.scatter_(0, permutation, _C.arange(n, device=permutation.device))


def _runs(batch_sizes):
    """The runs of equal batch size in a non-increasing batch_sizes list, in time order:
    (first step, steps, batch, first row in data) per run. Run k's rows are the contiguous
    block data[row : row + steps * batch], which views as [steps, batch, *]."""
    runs, row, t = [], 0, 0
    while t < len(batch_sizes):
        b, start = batch_sizes[t], t
        while t < len(batch_sizes) and batch_sizes[t] == b:
            t += 1
        runs.append((start, t - start, b, row))
        row += (t - start) * b
    return runs


def _batch_sizes(lengths):
    """batch_sizes[t]: how many of the (positive) lengths exceed t."""
    sizes = [0] * max(lengths)
    for n in lengths:  # count the sequences that end at each step ...
        sizes[n - 1] += 1
    for t in range(len(sizes) - 2, -1, -1):  # ... and those that end later
        sizes[t] += sizes[t + 1]
    return sizes


def _lengths_of(batch_sizes):
    """The sorted lengths that batch_sizes counts: sequence i runs while batch_sizes > i."""
    lengths = [0] * batch_sizes[0]
    for start, steps, b, _ in _runs(batch_sizes):
        for i in range(b):
            lengths[i] = start + steps
    return lengths


def _run_block(data, run):
    """Run ``run``'s rows of packed data as a dense [steps, batch, *] tensor."""
    _, steps, b, row = run
    return data.narrow(0, row, steps * b).reshape((steps, b) + tuple(data.shape[1:]))


_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
               "uint8": "Byte", "float32": "Float", "float64": "Double", "float16": "Half",
               "bfloat16": "BFloat16", "bool": "Bool"}


def _lengths_list(lengths):
    """lengths (a list or a 1-D CPU tensor) as a list of Python ints."""
    if not isinstance(lengths, _C.Tensor):
        return [int(n) for n in _C.as_tensor(lengths, dtype=_C.int64, device="cpu").tolist()]
    if lengths.dim() != 1 or lengths.device.type != "cpu":
        dtype = str(lengths.dtype).rsplit(".", 1)[-1]
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.dim()}D {lengths.device.type} "
                           f"{_TYPE_NAMES.get(dtype, dtype)} tensor")
    return [int(n) for n in lengths.to(_C.int64).tolist()]


def _check_lengths(lengths, steps, batch):
    """torch's checks of sorted lengths against a [steps, batch, *] input, plus one of its
    own: no length may exceed steps."""
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
            "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
            "pack_sequence to sidestep this requirement if you do not need ONNX "
            "exportability.")
    if lengths[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a sequence length ({lengths[0]}) is larger "
                           f"than the input's sequence length ({steps})")


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch [T, B, *] ([B, T, *] with batch_first) of sequences of the given
    lengths. With enforce_sorted=False the batch is sorted by decreasing length first (a
    stable sort, so equal lengths keep their order) and the result records the permutation."""
    lengths = _lengths_list(lengths)
    sorted_indices = None
    if not enforce_sorted and input.dim() >= 2:
        order = _C.sort(_C.tensor(lengths, dtype=_C.int64), descending=True, stable=True)
        lengths = [int(n) for n in order.values.tolist()]
        sorted_indices = order.indices.to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if input.dim() < 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                         "got 1)")
    x = input.transpose(0, 1) if batch_first else input  # [T, B, *]
    _check_lengths(lengths, x.size(0), x.size(1))
    batch_sizes = _batch_sizes(lengths)
    rest = tuple(x.shape[2:])
    blocks = [x.narrow(0, start, steps).narrow(1, 0, b).reshape((steps * b,) + rest)
              for start, steps, b, _ in _runs(batch_sizes)]
    data = blocks[0] if len(blocks) == 1 else _C.cat(blocks, 0)
    return PackedSequence(data, _C.tensor(batch_sizes, dtype=_C.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded [T, B, *] or [B, T, *], lengths), in the
    batch order the sequences were packed from; lengths is a CPU int64 tensor. T is the
    longest length, or total_length when given (it may not be shorter)."""
    batch_sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}")
        steps = total_length
    data = sequence.data
    batch, rest = batch_sizes[0], tuple(data.shape[1:])
    fill = lambda shape: _C.full(shape, padding_value, dtype=data.dtype,  # noqa: E731
                                 device=data.device)
    pieces = []
    for run in _runs(batch_sizes):
        block = _run_block(data, run)
        if run[2] < batch:  # pad the finished sequences' columns
            block = _C.cat([block, fill((run[1], batch - run[2]) + rest)], 1)
        pieces.append(block)
    if steps > len(batch_sizes):
        pieces.append(fill((steps - len(batch_sizes), batch) + rest))
    padded = pieces[0] if len(pieces) == 1 else _C.cat(pieces, 0)
    lengths = _C.tensor(_lengths_of(batch_sizes), dtype=_C.int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.cpu())
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences [L_i, *] stacked into [L_max, N, *] ([N, L_max, *] with batch_first), the
    positions past each sequence filled with padding_value (before it with padding_side
    'left')."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.size(0) for s in seqs)
    padded = []
    for s in seqs:
        missing = longest - s.size(0)
        if missing:
            fill = _C.full((missing,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                           device=s.device)
            s = _C.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return _C.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): the sequences of the given lengths."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, _C.Tensor) else list(lengths)
    return [x[i, :int(n)] for i, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences [L_i, *] (pad_sequence then pack_padded_sequence)."""
    lengths = [s.size(0) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences held by a PackedSequence, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
