"""InstanceNorm1d / 2d / 3d: each sample's channels normalised over their own positions,
with optional affine parameters and running statistics (torch's defaults: neither)."""
from .. import functional as F
from .. import init
from .linear import _factory
from .module import Module
from .normalization import _register_norm_state

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(Module):
    _dims = 1  # positions dims after the channel

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _register_norm_state(self, num_features, affine, True, track_running_stats, kw)
        if affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        batched = self._dims + 2
        if input.dim() not in (batched - 1, batched):
            raise ValueError(f"expected {batched - 1}D or {batched}D input (got {input.dim()}D "
                             "input)")
        if input.dim() == batched - 1:  # unbatched [C, *]
            return self.forward(input.unsqueeze(0)).squeeze(0)
        if input.size(1) != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {input.size(1)}.")
        use_input_stats = self.training or not self.track_running_stats
        momentum = self.momentum if self.momentum is not None else 0.0
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, use_input_stats, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    _dims = 2


class InstanceNorm3d(_InstanceNorm):
    _dims = 3
