"""kiln.optim.swa_utils: stochastic weight averaging and exponential moving averages of a
model's weights (torch.optim.swa_utils; decision 0082). AveragedModel keeps a copy of the
model whose parameters (and, with use_buffers, buffers) are averaged in place at each
update_parameters; SWALR anneals the learning rate to a constant; update_bn recomputes the
batch-norm statistics for the averaged weights with one pass over the data."""
import copy
import itertools
import math

from .. import _C
from ..autograd import no_grad
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place update of lists of averages: ema <- decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_params, current_params, num_averaged):
        for ema, current in zip(ema_params, current_params):
            if ema.is_floating_point():
                ema.lerp_(current, 1 - decay)
            else:  # lerp needs floats; integer buffers take the rounded-down blend
                ema.copy_(ema * decay + current * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place update of lists of running means: avg <- avg + (current - avg) / (n + 1)."""

    @no_grad()
    def swa_update(averaged_params, current_params, num_averaged):
        weight = 1.0 / (float(num_averaged) + 1)
        for avg, current in zip(averaged_params, current_params):
            if avg.is_floating_point():
                avg.lerp_(current, weight)
            else:
                avg.copy_(avg + (current - avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The new exponential moving average of one tensor (returned, not written)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The new running mean of one tensor (returned, not written)."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _by_device_and_dtype(averaged, current):
    """Pairs grouped as the multi-tensor functions take them: same device and dtype."""
    groups = {}
    for a, c in zip(averaged, current):
        lists = groups.setdefault((str(a.device), a.dtype), ([], []))
        lists[0].append(a)
        lists[1].append(c)
    return groups.values()


class AveragedModel(Module):
    """A deep copy of model holding the average of the weights passed to update_parameters:
    the first call copies them, later calls blend them in with avg_fn (one tensor at a time,
    returning the new value) or multi_avg_fn (lists, in place); by default the equal-weight
    running mean (SWA). Buffers are averaged too with use_buffers, else copied."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        where = {} if device is None else {"device": device}
        self.register_buffer("n_averaged", _C.tensor(0, dtype=_C.int64, **where))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        if self.use_buffers:
            return list(itertools.chain(model.parameters(), model.buffers()))
        return list(model.parameters())

    @no_grad()
    def update_parameters(self, model):
        averaged = [p.detach() for p in self._tensors(self.module)]
        current = [p.detach().to(a.device) for p, a in zip(self._tensors(model), averaged)]
        n = int(self.n_averaged)
        if n == 0:
            for a, c in zip(averaged, current):
                a.copy_(c)
        elif self.avg_fn is not None:
            for a, c in zip(averaged, current):
                a.copy_(self.avg_fn(a, c, self.n_averaged.to(a.device)))
        elif self.multi_avg_fn is not None:
            for group_avg, group_cur in _by_device_and_dtype(averaged, current):
                device = group_avg[0].device
                self.multi_avg_fn(group_avg, group_cur, self.n_averaged.to(device))
        else:
            # torch's CPU path: the single-tensor formula (same rounding as its result)
            average = get_swa_avg_fn()
            for a, c in zip(averaged, current):
                a.copy_(average(a, c, self.n_averaged.to(a.device)))
        if not self.use_buffers:
            # buffers are not averaged: they follow the latest model
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


@no_grad()
def update_bn(loader, model, device=None):
    """Recomputes the running statistics of model's batch norms over one pass of loader: the
    statistics are reset and accumulated as an equal-weight mean (momentum None) in training
    mode; each batch is the loader's item, or its first element for a list / tuple."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its value to swa_lr over anneal_epochs steps
    ("cos" or "linear"), then holds it. The update is recursive, as torch's: the previous
    step's starting rate is recovered from the current rate."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for value, group in zip(_format_param("swa_lr", optimizer, swa_lr),
                                optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = (self._cosine_anneal if anneal_strategy == "cos"
                            else self._linear_anneal)

    def _progress(self, step):
        return max(0, min(1, step / max(1, self.anneal_epochs)))

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(self._progress(step - 1))
        alpha = self.anneal_func(self._progress(step))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
