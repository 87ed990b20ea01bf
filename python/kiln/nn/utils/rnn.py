"""kiln.nn.utils.rnn: pad_sequence and unpad_sequence, as torch's. Packed sequences
(pack_padded_sequence, PackedSequence) are not implemented: the recurrent layers take padded
batches, and their outputs past a sequence's length must be ignored or masked by the caller."""
from ... import _C

__all__ = ["pad_sequence", "unpad_sequence"]


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
