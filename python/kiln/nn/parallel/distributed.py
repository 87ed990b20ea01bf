"""DistributedDataParallel (torch.nn.parallel.DistributedDataParallel) over kiln.distributed:
one replica of the module per process, the same parameters everywhere (rank 0's are
broadcast at construction), gradients averaged across the ranks during backward (see
_reducer.py), buffers re-broadcast from rank 0 before a forward that follows a
synchronised one (forward_sync_buffers / broadcast_buffers)."""
import contextlib

import kiln
import kiln.distributed as dist

from ..modules.module import Module
from ._reducer import GradReducer

__all__ = ["DistributedDataParallel"]

_DEFAULT_BUCKET_CAP_MB = 25


def _broadcast_coalesced(tensors, pg):
    """Overwrites `tensors` with group rank 0's values: one broadcast per dtype."""
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    src = pg.global_ranks[0]
    for group in by_dtype.values():
        flat = kiln.cat([t.detach().reshape(-1) for t in group])
        dist.broadcast(flat, src=src, group=pg)
        offset = 0
        for t in group:
            n = t.numel()
            t.detach().copy_(flat[offset:offset + n].view(t.shape))
            offset += n


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=None, init_sync=True, process_group=None,
                 bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False,
                 bucket_cap_mb_list=None, batched_grad_copy=False, forward_sync_buffers=None):
        super().__init__()
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        devices = {p.device.type for p in module.parameters()}
        if devices != {"cpu"}:
            raise ValueError(f"kiln's DistributedDataParallel works on CPU modules; the "
                             f"module's parameters are on {sorted(devices)}")
        if device_ids is not None or output_device is not None:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work "
                "with single-device/multiple-device GPU modules or CPU modules, but got "
                f"device_ids {device_ids}, output_device {output_device}, and module "
                "parameters {device(type='cpu')}.")
        if device_mesh is not None:
            raise NotImplementedError("kiln's DistributedDataParallel takes process_group, "
                                      "not device_mesh")
        self.module = module
        self.process_group = process_group if process_group is not None else \
            dist.GroupMember.WORLD
        if self.process_group is None:
            raise ValueError("Default process group has not been initialized, please make "
                             "sure to call init_process_group.")
        self.dim = dim
        self.device_ids = None
        self.output_device = None
        # torch 2.13: forward_sync_buffers (default: broadcast_buffers, default True) turns the
        # per-forward buffer sync on or off; the deprecated broadcast_buffers=False also leaves
        # the buffers out of the sync at construction (rank-local buffers), while
        # forward_sync_buffers=False still syncs them there.
        if forward_sync_buffers is not None:
            self.forward_sync_buffers = bool(forward_sync_buffers)
            init_sync_buffers = True
        else:
            self.forward_sync_buffers = True if broadcast_buffers is None else \
                bool(broadcast_buffers)
            init_sync_buffers = self.forward_sync_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((bucket_cap_mb or _DEFAULT_BUCKET_CAP_MB) * 1024 * 1024)
        if init_sync and self.process_group.size() > 1:
            _broadcast_coalesced(list(module.parameters()) +
                                 (list(module.buffers()) if init_sync_buffers else []),
                                 self.process_group)
        self.reducer = GradReducer(params, self.process_group, self.bucket_bytes_cap,
                                   find_unused_parameters)

    @property
    def broadcast_buffers(self):  # torch 2.13's deprecated name for forward_sync_buffers
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value):
        self.forward_sync_buffers = value

    def forward(self, *inputs, **kwargs):
        # As torch: the buffers are synced when the previous forward (or the construction)
        # was one whose backward synchronises gradients (grad enabled, outside no_sync),
        # whatever the train / eval mode. Every rank follows the same rule, so the number of
        # broadcasts matches across ranks that run the same forwards.
        if self.require_forward_param_sync and self.forward_sync_buffers and \
                self.process_group.size() > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _broadcast_coalesced(buffers, self.process_group)
        output = self.module(*inputs, **kwargs)
        if kiln.is_grad_enabled() and self.require_backward_grad_sync:
            self.require_forward_param_sync = True
            self.reducer.prepare(_tensors_in(output))
        else:
            self.require_forward_param_sync = False
            self.reducer.armed = False
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside this context only accumulate local
        gradients; the first synchronised backward after it averages the accumulated ones."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


def _tensors_in(output):
    if isinstance(output, kiln.Tensor):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in _tensors_in(item)]
    return []
