"""nn.LinearCrossEntropyLoss: a classifier head (a Linear's weight and optional bias) and its
cross-entropy loss in one module, as torch 2.13's (see nn/_linear_cross_entropy.py)."""
from .linear import Linear
from .module import Module

__all__ = ["LinearCrossEntropyLoss"]


class LinearCrossEntropyLoss(Module):
    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None,
                 dtype=None, reduction="mean", weight=None, ignore_index=None,
                 label_smoothing=0.0, options=None):
        super().__init__()
        self.in_features = in_features
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.reduction = reduction
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.options = options
        total = num_classes
        for d in self.out_features:
            total *= d
        self.linear = Linear(in_features, total, bias=bias, device=device, dtype=dtype)
        if weight is not None:
            self.register_buffer("weight", weight)
        else:
            self.weight = None

    def forward(self, input, target):
        from .. import functional as F
        w = self.linear.weight.reshape(self.num_classes, *self.out_features, self.in_features)
        b = self.linear.bias
        if b is not None:
            b = b.reshape(self.num_classes, *self.out_features)
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
