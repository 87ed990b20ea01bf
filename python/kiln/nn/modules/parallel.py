"""SyncBatchNorm and DataParallel for kiln's single-process, single-device runtime, as
torch.nn's. kiln has no process groups and one device per process, so both reduce to their
local computation: SyncBatchNorm is batch norm over the input's own batch, DataParallel
calls the wrapped module directly (what torch does when no GPU is available)."""
from .module import Module
from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm", "DataParallel"]


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm: same constructor (``process_group`` is kept but unused),
    parameters, buffers, repr and state_dict as torch's; input [N, C, *] with at least 2
    dims. kiln runs it as BatchNorm over the local batch in training and eval mode.

    Difference from torch: torch synchronises statistics across a process group when
    ``torch.distributed`` is initialised (and then requires GPU inputs); kiln has no
    distributed runtime, so it never synchronises, on any device. Without an initialised
    process group torch 2.13 does the same local computation on CPU, which kiln matches."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Replace every BatchNorm*d in ``module``'s tree by a SyncBatchNorm sharing its
        parameters and buffers (the same tensors, as torch); returns the converted module
        (a new one when ``module`` itself is a batch norm)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class DataParallel(Module):
    """torch.nn.DataParallel on a single device: ``forward(*inputs, **kwargs)`` returns
    ``self.module(*inputs, **kwargs)``, with no scatter, replication or gather (torch does
    the same when no GPU is available). The wrapped module is ``.module``, so state_dict
    keys carry the ``module.`` prefix, as torch's. ``device_ids`` is [] as torch's
    no-GPU case; ``dim`` and ``output_device`` are recorded but unused."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
