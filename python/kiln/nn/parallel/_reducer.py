"""The gradient reducer of DistributedDataParallel: averages .grad of every parameter
across the ranks of a process group during backward.

Parameters are grouped into buckets (in reverse registration order, roughly the order
backward produces their gradients; one dtype per bucket, up to bucket_cap_mb). A hook after
each parameter's gradient accumulation marks it ready; a bucket whose parameters are all
ready is flattened, divided by the world size and all-reduced (SUM) asynchronously, so
communication overlaps the rest of backward. Buckets are launched strictly in index order,
which makes the n-th all_reduce the same bucket on every rank. When the last bucket has been
launched the reducer waits for all of them and writes the averages back into .grad, before
backward returns (so optimizer.step() right after sees the averaged gradients)."""
import kiln
import kiln.distributed as dist


def _grad_nodes_reached(outputs):
    """data_ptr()s of the leaf tensors the autograd graph of `outputs` accumulates into."""
    stack, seen, leaves = [], set(), set()
    for t in outputs:
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.name() == "AccumulateGrad":
            leaves.add(node.variable.data_ptr())
            continue
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return leaves


class GradReducer:
    def __init__(self, params, process_group, bucket_cap_bytes, find_unused_parameters):
        self.params = params
        self.pg = process_group
        self.find_unused = find_unused_parameters
        self.buckets = self._make_buckets(bucket_cap_bytes)
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self.hooks = [p.register_post_accumulate_grad_hook(self._hook_for(i))
                      for i, p in enumerate(params)]
        self.armed = False  # a forward prepared a reduction that backward should run
        self.started = False  # some hook of the armed iteration fired
        self._reset()

    def _make_buckets(self, cap):
        buckets, current, size, dtype = [], [], 0, None
        for i in reversed(range(len(self.params))):
            p = self.params[i]
            nbytes = p.numel() * p.element_size()
            if current and (p.dtype != dtype or size + nbytes > cap):
                buckets.append(current)
                current, size = [], 0
            current.append(i)
            size += nbytes
            dtype = p.dtype
        if current:
            buckets.append(current)
        return buckets

    def _reset(self):
        self.ready = set()
        self.used = set(range(len(self.params)))
        self.launched = []  # (bucket index, flat tensor, Work)

    def prepare(self, outputs):
        """Called by forward (when gradients will be synchronised): expects every parameter's
        hook, or with find_unused_parameters only those of parameters the outputs reach."""
        if self.armed and self.started:
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting "
                "a new one. This error indicates that your module has parameters that were "
                "not used in producing loss. You can enable unused parameter detection by "
                "passing the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`, and by making sure all "
                "`forward` function outputs participate in calculating loss.")
        self._reset()
        self.armed, self.started = True, False
        if self.find_unused:
            reached = _grad_nodes_reached(outputs)
            self.used = {i for i, p in enumerate(self.params) if p.data_ptr() in reached}
            for i in range(len(self.params)):
                if i not in self.used:
                    self._mark_ready(i)

    def _hook_for(self, index):
        def hook(param):
            if self.armed:
                self.started = True
                self._mark_ready(index)
        return hook

    def _mark_ready(self, index):
        self.ready.add(index)
        while len(self.launched) < len(self.buckets):
            bucket = self.buckets[len(self.launched)]
            if not all(i in self.ready for i in bucket):
                return
            self._launch(len(self.launched))
        self._finish()

    def _grad_or_zeros(self, i):
        p = self.params[i]
        if i in self.used and p.grad is not None:
            return p.grad.detach().reshape(-1)
        return kiln.zeros(p.numel(), dtype=p.dtype)

    def _launch(self, b):
        flat = kiln.cat([self._grad_or_zeros(i) for i in self.buckets[b]])
        flat.div_(self.pg.size())  # average = sum of grad / n (torch divides first, too)
        self.launched.append((b, flat, dist.all_reduce(flat, group=self.pg, async_op=True)))

    def _finish(self):
        globally_used = None
        if self.find_unused:  # a parameter no rank used keeps its .grad untouched
            flags = kiln.tensor([1 if i in self.used else 0 for i in range(len(self.params))],
                                dtype=kiln.int32)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.pg)
            globally_used = flags.tolist()
        for b, flat, work in self.launched:
            work.wait()
            offset = 0
            for i in self.buckets[b]:
                p = self.params[i]
                n = p.numel()
                if globally_used is None or globally_used[i]:
                    averaged = flat[offset:offset + n].view(p.shape)
                    if p.grad is None:
                        p.grad = averaged.clone()
                    else:
                        p.grad.detach().copy_(averaged)
                offset += n
        self.armed = False
        self._reset()

    def remove_hooks(self):
        for h in self.hooks:
            h.remove()
