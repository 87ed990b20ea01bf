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


class _InfoProbe(kud.Dataset):
    """Returns, for each index, what the reading process knows: (index, worker id, number of
    workers, seed, whether info.dataset is the object read, the worker_init_fn's mark)."""

    def __init__(self, n):
        self.n = n
        self.mark = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = kud.get_worker_info()
        if info is None:
            return (i, -1, 0, -1, False, -1)
        return (i, info.id, info.num_workers, info.seed, info.dataset is self, self.mark)


def _mark_worker(wid):
    kud.get_worker_info().dataset.mark = wid * 10


def test_map_dataset_workers_see_their_info():
    loader = kud.DataLoader(_InfoProbe(7), batch_size=2, num_workers=3,
                            worker_init_fn=_mark_worker, collate_fn=list,
                            generator=kiln.Generator().manual_seed(0))
    rows = [r for batch in loader for r in batch]
    assert [r[0] for r in rows] == list(range(7))
    # batch k is read by worker k % 3, in its own process with its own copy of the dataset,
    # after its worker_init_fn ran there
    assert [r[1] for r in rows] == [0, 0, 1, 1, 2, 2, 0]
    assert all(r[2] == 3 and r[4] and r[5] == r[1] * 10 for r in rows)
    seeds = {r[1]: r[3] for r in rows}
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0] + 2
    # the main process reads without worker info, and its dataset was not marked
    probe = _InfoProbe(3)
    list(kud.DataLoader(probe, batch_size=2, num_workers=2, worker_init_fn=_mark_worker))
    assert probe.mark is None
    assert [r[1] for b in kud.DataLoader(probe, batch_size=2, collate_fn=list) for r in b] == \
        [-1, -1, -1]
    assert kud.get_worker_info() is None
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


# --- worker processes -------------------------------------------------------------------------

class _Squares(kud.Dataset):
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyError(f"no item {i}")
        return kiln.tensor([float(i), float(i * i)]), i


@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_give_the_main_process_batches(num_workers, shuffle):
    gen = kiln.Generator().manual_seed(5)
    got = list(kud.DataLoader(_Squares(11), batch_size=3, shuffle=shuffle, num_workers=num_workers,
                              generator=gen))
    gen = kiln.Generator().manual_seed(5)
    want = list(kud.DataLoader(_Squares(11), batch_size=3, shuffle=shuffle, generator=gen))
    assert len(got) == len(want) == 4
    for (gx, gi), (wx, wi) in zip(got, want):
        assert gx.dtype == wx.dtype and gx.tolist() == wx.tolist() and gi.tolist() == wi.tolist()


def test_worker_exception_is_reraised_with_its_traceback():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 1"):
        list(kud.DataLoader(_Squares(6, fail_at=3), batch_size=2, num_workers=2))


def _failing_init(wid):
    raise ValueError(f"init of {wid} failed")


def test_worker_init_fn_exception_is_reraised():
    with pytest.raises(ValueError, match="in worker_init_fn in DataLoader worker process 0"):
        list(kud.DataLoader(_Squares(4), num_workers=2, worker_init_fn=_failing_init))


class _Seeds(kud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        import random
        return (kud.get_worker_info().id, random.random(), float(kiln.rand(1).item()))


def test_workers_have_distinct_reproducible_seeds():
    def run():
        loader = kud.DataLoader(_Seeds(), batch_size=None, num_workers=2, collate_fn=lambda x: x,
                                generator=kiln.Generator().manual_seed(3))
        return list(loader)
    a, b = run(), run()
    assert a == b  # same loader generator: same base seed, same per-worker streams
    by_worker = {w: (r, k) for w, r, k in a}
    assert by_worker[0] != by_worker[1]  # each worker seeded with base_seed + id


def test_persistent_workers_serve_several_epochs():
    loader = kud.DataLoader(_Squares(7), batch_size=2, num_workers=2, persistent_workers=True,
                            shuffle=True, generator=kiln.Generator().manual_seed(1))
    epochs = [sorted(int(i) for _, idx in loader for i in idx.tolist()) for _ in range(3)]
    assert epochs == [list(range(7))] * 3
    pids = [p.pid for p in loader._pool.procs]
    next(iter(loader))  # an abandoned epoch ...
    assert sorted(int(i) for _, idx in loader for i in idx.tolist()) == list(range(7))
    assert [p.pid for p in loader._pool.procs] == pids  # ... the same processes serve on
    loader._pool.close()


def test_batches_of_every_dtype_cross_the_process_boundary():
    class Mixed(kud.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return {"bf16": kiln.full([2], 1.5 + i, dtype=kiln.bfloat16),
                    "c64": kiln.tensor([1 + 2j * i]), "b": kiln.tensor([True, i == 1]),
                    "i8": kiln.tensor([i], dtype=kiln.int8), "s": f"item{i}"}
    (batch,) = list(kud.DataLoader(Mixed(), batch_size=2, num_workers=1))
    assert batch["bf16"].dtype == kiln.bfloat16 and batch["bf16"].float().tolist() == \
        [[1.5, 1.5], [2.5, 2.5]]
    assert batch["c64"].dtype == kiln.complex64 and batch["c64"].tolist() == [[1 + 0j], [1 + 2j]]
    assert batch["b"].tolist() == [[True, False], [True, True]]
    assert batch["i8"].dtype == kiln.int8 and batch["s"] == ["item0", "item1"]


def test_dead_worker_is_reported(monkeypatch):
    import kiln.utils.data._worker_pool as pool
    monkeypatch.setattr(pool, "_POLL_SECONDS", 0.2)

    class Dies(kud.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            import os
            os._exit(3)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(kud.DataLoader(Dies(), num_workers=1))
