"""Non-reentrant activation checkpointing on saved-tensor hooks (torch's algorithm).

The function runs with autograd on, under hooks whose pack keeps a placeholder (a _Holder)
instead of each tensor the graph saves: the graph is the ordinary one (so gradients reach
every tensor the function used, arguments, parameters and globals alike, for .backward()
and autograd.grad), but it holds no activations. The first unpack in backward reruns the
function (same inputs, the RNG state of the forward, grad mode on) under hooks that collect
what that run saves, in the same order, and hands each value to its placeholder; placeholders
live as long as the graph's saved tensors, so the values are freed with them."""
import weakref

from .._autograd_graph import saved_tensors_hooks


class _Holder:
    __slots__ = ("frame", "index", "value", "__weakref__")

    def __init__(self, frame, index):
        self.frame, self.index, self.value = frame, index, None


class _Frame:
    """One checkpointed call: how to rerun it and what its forward saved."""

    def __init__(self, run, tensors, error_class):
        self.run, self.tensors, self.error_class = run, tensors, error_class
        # The rerun reads the inputs again: an in-place write to one since the forward would
        # silently change the gradients (the placeholders have no version check of their own).
        self.versions = [t._version for t in tensors]
        self.holders = []  # weak references, in save order
        self.metadata = []  # (shape, dtype) of each saved tensor, for determinism_check

    def pack(self, tensor):
        holder = _Holder(self, len(self.holders))
        self.holders.append(weakref.ref(holder))
        self.metadata.append((tuple(tensor.shape), tensor.dtype))
        return holder

    def recompute(self):
        from .. import autograd
        for i, (t, v) in enumerate(zip(self.tensors, self.versions)):
            if t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [{t.dtype} {list(t.shape)}], argument {i} of a "
                    f"checkpointed function, is at version {t._version}; expected version {v} "
                    "instead.")
        saved = []

        def keep(tensor):
            saved.append(tensor.detach())  # the values, not the rerun's graph
            return None

        def never(_):
            raise RuntimeError("kiln.utils.checkpoint: a tensor saved during recomputation was "
                               "unpacked (this is a bug in kiln)")

        args = [t.detach().requires_grad_(t.requires_grad) for t in self.tensors]
        with autograd.enable_grad(), saved_tensors_hooks(keep, never):
            self.run.recompute(args)
        check = self.run.determinism_check != "none"
        if check and len(saved) < len(self.metadata):
            raise self.error_class(
                "torch.utils.checkpoint: Recomputed values have fewer saved tensors than "
                f"during the forward pass ({len(saved)} vs {len(self.metadata)}): the "
                "recomputation must run the same operations")
        if check:
            got = [(tuple(t.shape), t.dtype) for t in saved[:len(self.metadata)]]
            bad = [i for i, (a, b) in enumerate(zip(self.metadata, got)) if a != b]
            if bad:
                raise self.error_class(
                    "torch.utils.checkpoint: Recomputed values for the following tensors have "
                    "different metadata than during the forward pass.\n" + "\n".join(
                        f"tensor at position {i}:\nsaved metadata: {self.metadata[i]}\n"
                        f"recomputed metadata: {got[i]}" for i in bad))
        for ref, value in zip(self.holders, saved):
            holder = ref()
            if holder is not None:
                holder.value = value


def _unpack(holder):
    if holder.value is None:
        holder.frame.recompute()
        if holder.value is None:
            raise holder.frame.error_class(
                "torch.utils.checkpoint: the recomputation did not produce the saved tensor "
                f"at position {holder.index}")
    return holder.value


def run_without_reentrant(run, tensors, error_class):
    """run.forward(tensors) recorded with placeholders instead of saved tensors."""
    frame = _Frame(run, tensors, error_class)
    with saved_tensors_hooks(frame.pack, _unpack):
        return run.forward(tensors)

