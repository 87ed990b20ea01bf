"""AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs"), as
torch.nn's: same constructor, parameter names (head, tail.i.0, tail.i.1), forward returning
the named tuple (output, loss), log_prob and predict; composed of Linear, log_softmax,
gather and where."""
from collections import namedtuple

from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Classes [0, cutoffs[0]) are scored by the head directly; each further cluster
    [cutoffs[i], cutoffs[i + 1]) gets one head logit and a two-layer tail (in_features ->
    in_features // div_value ** (i + 1) -> cluster size, no biases)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs)
                or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(self.in_features, self.head_size, bias=self.head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(self.in_features // (self.div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(self.in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input, target):
        import kiln
        targ_dim = target.dim()
        if targ_dim == 1:
            if input.size(0) != target.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input.dim() != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {tuple(input.shape)}")
        elif targ_dim == 0:
            if input.dim() != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {tuple(input.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        x = input if batched else input.unsqueeze(0)
        t = target if batched else target.unsqueeze(0)
        n = t.size(0)
        if n > 0:
            lo, hi = int(t.min().item()), int(t.max().item())
            if lo < 0 or hi >= self.n_classes:
                raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], "
                                   f"but values in range [{lo}, {hi}] were found. ")
        # head column of each row: its class (shortlist) or its cluster's logit
        gather_inds = t
        output = None
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            mask = (t >= low) & (t < high)
            rows = mask.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            gather_inds = kiln.where(mask, self.shortlist_size + i, gather_inds)
            cluster_logprob = F.log_softmax(self.tail[i](x.index_select(0, rows)), dim=1)
            rel = (t.index_select(0, rows) - low).unsqueeze(1)
            local = cluster_logprob.gather(1, rel).squeeze(1)
            contrib = x.new_zeros(n).index_add(0, rows, local)
            output = contrib if output is None else output + contrib
        head_logprob = F.log_softmax(self.head(x), dim=1)
        head_part = head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        output = head_part if output is None else output + head_part
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _full_log_prob(self, input, head_output):
        import kiln
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob +
                         head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return kiln.cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of all n_classes classes: input [B, in_features] -> [B, n]."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row (argmax of log_prob), computing the tails only
        where the head's best entry is a cluster."""
        import kiln
        head_output = self.head(input)
        best = kiln.argmax(head_output, dim=1)
        in_tail = best >= self.shortlist_size
        if not bool(in_tail.any().item()):
            return best
        rows = in_tail.nonzero().reshape(-1)
        full = kiln.argmax(self._full_log_prob(input.index_select(0, rows),
                                               head_output.index_select(0, rows)), dim=1)
        return best.index_copy(0, rows, full)
