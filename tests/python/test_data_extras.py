"""kiln.utils.data extras against torch 2.13: DistributedSampler (exact index sequences without
shuffle; with shuffle one permutation shared by the replicas, changing with set_epoch),
WeightedRandomSampler (frequencies within 6 sigma of the weights), StackDataset, ChainDataset,
and get_worker_info with DataLoader workers (kiln runs them in the main process, in torch's
order)."""
import math

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import kiln
import kiln.utils.data as kud


class _Seq:
    """A plain map-style dataset of n items (both libraries accept it)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


# --- DistributedSampler ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 5, 10, 11, 12])
@pytest.mark.parametrize("replicas", [1, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_without_shuffle_matches_torch(n, replicas, drop_last):
    for rank in range(replicas):
        k = kud.DistributedSampler(_Seq(n), replicas, rank, shuffle=False, drop_last=drop_last)
        t = tud.DistributedSampler(_Seq(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(k) == list(t), (rank, list(k), list(t))
        assert len(k) == len(t) == len(list(k))
        assert (k.num_samples, k.total_size) == (t.num_samples, t.total_size)


@pytest.mark.parametrize("n,replicas,drop_last", [(12, 3, False), (11, 4, False),
                                                  (11, 4, True), (3, 4, False)])
def test_distributed_sampler_shuffle_is_one_permutation_per_epoch(n, replicas, drop_last):
    def shares(epoch, seed=0):
        out = []
        for rank in range(replicas):
            s = kud.DistributedSampler(_Seq(n), replicas, rank, shuffle=True, seed=seed,
                                       drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    first = shares(0)
    total = len(first[0]) * replicas
    # interleave the ranks' shares back into the (padded or cut) global order
    order = [first[i % replicas][i // replicas] for i in range(total)]
    head = order[:min(n, total)]
    assert len(set(head)) == len(head) and all(0 <= i < n for i in head)
    if not drop_last:
        assert sorted(head) == list(range(n))  # a permutation of the whole dataset
        # the padding repeats the permutation from its start, as torch's
        perm = head
        padded = (perm * math.ceil(total / n))[:total]
        assert order == padded
    assert shares(0) == first  # the same on every construction (seed + epoch only)
    assert shares(1) != first or n < 3  # another epoch, another order
    assert shares(0, seed=7) != first or n < 3
    # the global RNG is left alone, and does not change the order
    kiln.manual_seed(123)
    assert shares(0) == first


def test_distributed_sampler_arguments():
    s = kud.DistributedSampler(_Seq(5))  # no process group: a single replica
    assert (s.num_replicas, s.rank) == (1, 0) and sorted(s) == list(range(5))
    for rank in (3, -1):
        with pytest.raises(ValueError) as k:
            kud.DistributedSampler(_Seq(5), num_replicas=3, rank=rank)
        with pytest.raises(ValueError) as t:
            tud.DistributedSampler(_Seq(5), num_replicas=3, rank=rank)
        assert str(k.value) == str(t.value)
    assert kud.DistributedSampler is kud.distributed.DistributedSampler


def test_distributed_sampler_in_dataloader():
    x = kiln.arange(10)
    got = [b.tolist() for b, in kud.DataLoader(kud.TensorDataset(x), batch_size=2,
                                              sampler=kud.DistributedSampler(
                                                  _Seq(10), 2, 1, shuffle=False))]
    want = [b.tolist() for b, in tud.DataLoader(tud.TensorDataset(torch.arange(10)),
                                               batch_size=2,
                                               sampler=tud.DistributedSampler(
                                                   _Seq(10), 2, 1, shuffle=False))]
    assert got == want


# --- WeightedRandomSampler ------------------------------------------------------------------

def test_weighted_random_sampler_frequencies():
    weights = [0.1, 0.0, 2.0, 1.0, 0.4, 1.5]
    n = 20000
    s = kud.WeightedRandomSampler(weights, n, generator=kiln.Generator().manual_seed(0))
    draws = list(s)
    assert len(s) == n and len(draws) == n and all(isinstance(i, int) for i in draws)
    counts = np.bincount(draws, minlength=len(weights))
    p = np.array(weights) / sum(weights)
    sigma = np.sqrt(n * p * (1 - p))
    assert counts[1] == 0  # zero weight: never drawn
    assert np.all(np.abs(counts - n * p) <= 6 * sigma + 1e-9), (counts, n * p)
    # the same generator state, the same draws; a new iteration, new draws
    again = list(kud.WeightedRandomSampler(weights, n,
                                           generator=kiln.Generator().manual_seed(0)))
    assert again == draws and list(s) != draws


def test_weighted_random_sampler_without_replacement():
    weights = torch.tensor([5.0, 1.0, 1.0, 0.0, 3.0]).tolist()
    g = kiln.Generator().manual_seed(1)
    s = kud.WeightedRandomSampler(weights, 4, replacement=False, generator=g)
    first = []
    for _ in range(3000):
        got = list(s)
        assert len(got) == len(set(got)) == 4 and 3 not in got
        first.append(got[0])
    # the first draw follows the weights: P(0) = 0.5, P(4) = 0.3, P(1) = P(2) = 0.1
    counts = np.bincount(first, minlength=5)
    p = np.array([0.5, 0.1, 0.1, 0.0, 0.3])
    sigma = np.sqrt(3000 * p * (1 - p))
    assert np.all(np.abs(counts - 3000 * p) <= 6 * sigma + 1e-9), counts
    # more samples than positive weights: the zero-weight index comes last (torch's CPU
    # multinomial does not raise there either); more samples than weights raise
    for mod in (kud, tud):
        got = list(mod.WeightedRandomSampler(weights, 5, replacement=False))
        assert sorted(got) == list(range(5)) and got[-1] == 3, (mod, got)
        with pytest.raises(RuntimeError):
            list(mod.WeightedRandomSampler(weights, 6, replacement=False))


@pytest.mark.parametrize("args", [([1.0, 2.0], 0), ([1.0, 2.0], 2.5), ([1.0, 2.0], True),
                                  ([[1.0, 2.0]], 2)])
def test_weighted_random_sampler_argument_errors_match_torch(args):
    with pytest.raises(ValueError) as k:
        kud.WeightedRandomSampler(*args)
    with pytest.raises(ValueError) as t:
        tud.WeightedRandomSampler(*args)
    assert str(k.value) == str(t.value)
    with pytest.raises(ValueError) as k:
        kud.WeightedRandomSampler([1.0], 1, replacement=1)
    with pytest.raises(ValueError) as t:
        tud.WeightedRandomSampler([1.0], 1, replacement=1)
    assert str(k.value) == str(t.value)


# --- StackDataset / ChainDataset ------------------------------------------------------------

def test_stack_dataset_matches_torch():
    a, b = np.arange(6.0).reshape(3, 2), np.arange(3)
    kt = kud.StackDataset(kud.TensorDataset(kiln.from_numpy(a)), list(b))
    tt = tud.StackDataset(tud.TensorDataset(torch.from_numpy(a)), list(b))
    assert len(kt) == len(tt) == 3
    for i in range(3):
        (kx,), ky = kt[i]
        (tx,), ty = tt[i]
        assert kx.tolist() == tx.tolist() and ky == ty
    kd = kud.StackDataset(x=list(b), y=_Seq(3))
    td = tud.StackDataset(x=list(b), y=_Seq(3))
    assert [kd[i] for i in range(3)] == [td[i] for i in range(3)]
    assert kd.__getitems__([2, 0]) == td.__getitems__([2, 0])
    assert kud.StackDataset(list(b), _Seq(3)).__getitems__([1, 2]) == \
        tud.StackDataset(list(b), _Seq(3)).__getitems__([1, 2])
    # batches through the DataLoader
    got = [{k: v.tolist() for k, v in d.items()} for d in kud.DataLoader(kd, batch_size=2)]
    want = [{k: v.tolist() for k, v in d.items()} for d in tud.DataLoader(td, batch_size=2)]
    assert got == want
    for bad in (((list(b), [1]), {}), ((list(b),), {"y": list(b)}), ((), {})):
        with pytest.raises(ValueError) as k:
            kud.StackDataset(*bad[0], **bad[1])
        with pytest.raises(ValueError) as t:
            tud.StackDataset(*bad[0], **bad[1])
        assert str(k.value).split(":")[0] == str(t.value).split(":")[0], (k.value, t.value)


def test_stack_dataset_uses_nested_getitems():
    class Batched(_Seq):
        calls = 0

        def __getitems__(self, indices):
            Batched.calls += 1
            return [10 * i for i in indices]
    ds = kud.StackDataset(Batched(4), _Seq(4))
    assert ds.__getitems__([3, 1]) == [(30, 3), (10, 1)]
    assert [b[0].tolist() for b in kud.DataLoader(ds, batch_size=2)] == [[0, 10], [20, 30]]
    assert Batched.calls == 3


class _KRange(kud.IterableDataset):
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __iter__(self):
        info = kud.get_worker_info()
        start, end = self.a, self.b
        if info is not None:  # torch's docs' sharding example
            per = int(math.ceil((self.b - self.a) / float(info.num_workers)))
            start = self.a + info.id * per
            end = min(start + per, self.b)
        return iter(range(start, end))

    def __len__(self):
        return self.b - self.a


class _TRange(tud.IterableDataset):
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __iter__(self):
        info = tud.get_worker_info()
        start, end = self.a, self.b
        if info is not None:
            per = int(math.ceil((self.b - self.a) / float(info.num_workers)))
            start = self.a + info.id * per
            end = min(start + per, self.b)
        return iter(range(start, end))

    def __len__(self):
        return self.b - self.a


def test_chain_dataset_matches_torch():
    k = kud.ChainDataset([_KRange(0, 3), _KRange(10, 12)])
    t = tud.ChainDataset([_TRange(0, 3), _TRange(10, 12)])
    assert list(k) == list(t) == [0, 1, 2, 10, 11]
    assert len(k) == len(t) == 5
    added = _KRange(0, 2) + _KRange(5, 6)
    assert isinstance(added, kud.ChainDataset) and list(added) == [0, 1, 5]
    assert [b.tolist() for b in kud.DataLoader(k, batch_size=2)] == \
        [b.tolist() for b in tud.DataLoader(t, batch_size=2)]
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(kud.ChainDataset([_Seq(2)]))


# --- get_worker_info / DataLoader workers ---------------------------------------------------

def test_get_worker_info_is_none_in_main_process():
    assert kud.get_worker_info() is None
    assert list(_KRange(2, 5)) == [2, 3, 4]


def _values(batches):
    return [b.tolist() if hasattr(b, "tolist") else b for b in batches]


@pytest.mark.parametrize("num_workers,batch_size", [(2, None), (3, 2)])
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_iterable_dataset_shards_itself_in_workers_as_torch(num_workers, batch_size):
    got = _values(kud.DataLoader(_KRange(3, 10), num_workers=num_workers,
                                 batch_size=batch_size))
    want = _values(tud.DataLoader(_TRange(3, 10), num_workers=num_workers,
                                  batch_size=batch_size))
    assert got == want
    assert kud.get_worker_info() is None  # restored after the iteration


def test_map_dataset_workers_see_their_info():
    seen = []

    class Probe(_Seq):
        def __getitem__(self, i):
            info = kud.get_worker_info()
            if info is None:
                seen.append((i, None, 0, None, False))
            else:
                seen.append((i, info.id, info.num_workers, info.seed, info.dataset is self))
            return i
    inits = []

    def init(wid):
        info = kud.get_worker_info()
        inits.append((wid, info.id))
    loader = kud.DataLoader(Probe(7), batch_size=2, num_workers=3, worker_init_fn=init,
                            generator=kiln.Generator().manual_seed(0))
    assert _values(loader) == _values(kud.DataLoader(Probe(7), batch_size=2)) == \
        [[0, 1], [2, 3], [4, 5], [6]]
    assert inits == [(0, 0), (1, 1), (2, 2)]
    loaded = [s for s in seen if s[2] == 3]
    # batch k is read by worker k % 3; the seeds are base_seed + id
    assert [(i, w) for i, w, *_ in loaded] == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2),
                                               (6, 0)]
    # each worker reads its own copy of the dataset (info.dataset is the object read)
    assert all(own for *_, own in loaded)
    # the num_workers=0 loader read in the main process: no worker info
    assert [w for _, w, nw, *_ in seen if nw == 0] == [None] * 7
    seeds = {w: s for _, w, _, s, _ in loaded}
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0] + 2
    info = kud._worker.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None)
    with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo objects"):
        info.id = 1


def test_dataloader_worker_argument_checks():
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        kud.DataLoader(_Seq(3), prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        kud.DataLoader(_Seq(3), persistent_workers=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        kud.DataLoader(_Seq(3), num_workers=-1)
