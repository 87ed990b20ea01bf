"""Tensors in shared memory across processes: Tensor.share_memory_ / is_shared,
kiln.multiprocessing (tensors through queues as shared memory, as torch.multiprocessing),
spawn, and DataLoader workers that hand over batches in shared memory."""
import multiprocessing as std_mp
import os
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import kiln
import kiln.multiprocessing as kmp

FORK = kmp.get_context("fork")


def test_share_memory_keeps_values_and_views():
    base = kiln.arange(12.0).view(3, 4)
    view = base[1:, ::2]
    assert not base.is_shared()
    assert base.share_memory_() is base
    assert base.is_shared() and view.is_shared()  # the storage moved, views included
    np.testing.assert_array_equal(base.numpy(), np.arange(12.0).reshape(3, 4))
    view.fill_(-1.0)  # the view still writes the base's (now shared) storage
    assert base[1, 0].item() == -1.0 and base[2, 2].item() == -1.0
    base.share_memory_()  # a no-op the second time
    np.testing.assert_array_equal(view.numpy(), -np.ones((2, 2)))
    empty = kiln.zeros(0).share_memory_()
    assert empty.is_shared() and empty.numel() == 0


def _add_one(t, done):
    t.add_(1)
    done.set()


def test_a_forked_child_writes_the_parents_shared_tensor():
    t = kiln.zeros(5).share_memory_()
    private = kiln.zeros(5)
    done = FORK.Event()
    for target in (t, private):
        p = FORK.Process(target=_add_one, args=(target, done))
        p.start()
        p.join(30)
        assert p.exitcode == 0
    np.testing.assert_array_equal(t.numpy(), np.ones(5))
    np.testing.assert_array_equal(private.numpy(), np.zeros(5))  # copy-on-write, as torch


def _echo(inbox, outbox, done):
    x = inbox.get()
    x.mul_(2)  # in place: the sender sees it
    outbox.put(kiln.arange(6.0).view(2, 3).t())
    outbox.put(kiln.tensor([1.5, -2.0], dtype=kiln.bfloat16))
    outbox.put(kiln.tensor([[True, False]]))
    outbox.put(kiln.ones(2, requires_grad=True))
    outbox.put(kiln.get_num_threads())
    done.wait(30)  # the receiver fetches descriptors from this process: stay alive


def test_tensors_cross_queues_in_shared_memory():
    inbox, outbox, done = FORK.Queue(), FORK.Queue(), FORK.Event()
    p = FORK.Process(target=_echo, args=(inbox, outbox, done))
    p.start()
    try:
        x = kiln.ones(3)
        inbox.put(x)
        t = outbox.get(timeout=30)
        b = outbox.get(timeout=30)
        m = outbox.get(timeout=30)
        g = outbox.get(timeout=30)
        child_threads = outbox.get(timeout=30)
    finally:
        done.set()
        p.join(30)
    assert x.is_shared()  # sending moved it into shared memory (as torch)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])
    assert t.is_shared() and t.stride() == (1, 3)  # the view's geometry survives
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3).T)
    assert b.dtype == kiln.bfloat16 and b.float().tolist() == [1.5, -2.0]
    assert m.dtype == kiln.bool and m.tolist() == [[True, False]]
    assert g.requires_grad and g.is_leaf
    assert child_threads == 1  # forked children run one kiln thread (libgomp and fork)


def test_non_leaf_tensors_that_require_grad_are_refused():
    y = kiln.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(y)
    assert pickle.loads(ForkingPickler.dumps(y.detach())).tolist() == [2.0, 2.0]


def test_plain_pickle_still_copies():
    x = kiln.ones(3).share_memory_()
    y = pickle.loads(pickle.dumps(x))
    assert not y.is_shared()
    x.add_(1)
    assert y.tolist() == [1.0, 1.0, 1.0]


def test_a_view_past_the_shared_storage_is_refused():
    x = kiln.ones(4)
    fd, nbytes, offset, strides = kiln._C._shared_memory_handle(x)
    with pytest.raises(ValueError, match="reaches byte 20 of a 16-byte storage"):
        kiln._C._tensor_from_shared_memory(fd, nbytes, 0, [5], [1], kiln.float32)
    with pytest.raises(RuntimeError, match="the memory file holds 16 bytes, expected at least 32"):
        kiln._C._tensor_from_shared_memory(fd, 32, 0, [4], [1], kiln.float32)
    same = kiln._C._tensor_from_shared_memory(fd, nbytes, offset, [2], [2], kiln.float32)
    x.fill_(3.0)
    assert same.tolist() == [3.0, 3.0]


def _fill_row(i, table):
    table[i].fill_(float(i + 1))


def _fail(i):
    if i == 1:
        raise ValueError("worker one fails")


def _exit_three(i):
    raise SystemExit(3)


def test_spawn_runs_every_rank_and_reports_failures():
    table = kiln.zeros(3, 2).share_memory_()
    kmp.spawn(_fill_row, args=(table,), nprocs=3, start_method="fork")
    np.testing.assert_array_equal(table.numpy(), [[1, 1], [2, 2], [3, 3]])
    with pytest.raises(kmp.ProcessRaisedException, match="(?s)Process 1 terminated with the "
                                                         "following error.*worker one fails"):
        kmp.spawn(_fail, nprocs=2, start_method="fork")
    with pytest.raises(kmp.ProcessExitedException, match="terminated with exit code 3"):
        kmp.spawn(_exit_three, nprocs=1, start_method="fork")
    ctx = kmp.spawn(_fill_row, args=(table,), nprocs=1, join=False, start_method="fork")
    while not ctx.join():
        pass
    assert len(ctx.pids()) == 1


def test_sharing_strategies():
    assert kmp.get_sharing_strategy() == "file_descriptor"
    assert kmp.get_all_sharing_strategies() == {"file_descriptor"}
    kmp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError, match="not supported"):
        kmp.set_sharing_strategy("file_system")
    assert kmp.Queue is not None and kmp.cpu_count() == std_mp.cpu_count()


class _Images(kiln.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return kiln.full((3, 4), float(i)), np.full(2, i, dtype=np.int32), i


def test_dataloader_workers_hand_over_batches_in_shared_memory():
    plain = list(kiln.utils.data.DataLoader(_Images(), batch_size=5))
    loaded = list(kiln.utils.data.DataLoader(_Images(), batch_size=5, num_workers=2))
    assert len(plain) == len(loaded) == 5
    for (px, pa, pi), (wx, wa, wi) in zip(plain, loaded):
        assert wx.is_shared() and wa.is_shared() and wi.is_shared()
        assert not px.is_shared()
        np.testing.assert_array_equal(px.numpy(), wx.numpy())
        np.testing.assert_array_equal(pa.numpy(), wa.numpy())
        assert pi.tolist() == wi.tolist() and wa.dtype == kiln.int32


def test_parameters_cross_as_shared_parameters_and_module_share_memory():
    p = kiln.nn.Parameter(kiln.ones(3))
    q = pickle.loads(ForkingPickler.dumps(p))
    assert isinstance(q, kiln.nn.Parameter) and q.requires_grad and q.is_shared()
    with kiln.no_grad():
        p.mul_(4)
    assert q.tolist() == [4.0, 4.0, 4.0]
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 2), kiln.nn.BatchNorm1d(2))
    assert m.share_memory() is m
    assert all(t.is_shared() for t in list(m.parameters()) + list(m.buffers()))


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_received_batches_hold_no_descriptors():
    # torch keeps one descriptor per received storage ("Too many open files" with enough
    # batches alive); kiln's receiver closes it once mapped.
    loader = kiln.utils.data.DataLoader(_Images(), batch_size=1, num_workers=2,
                                        persistent_workers=True)
    list(loader)  # workers and their pipes exist from here on
    before = _open_fds()
    kept = [batch for _ in range(3) for batch in loader]
    assert len(kept) == 72 and all(x.is_shared() for x, _, _ in kept)
    assert _open_fds() - before < 8
    received = kept[0][0]
    sent_on = pickle.loads(ForkingPickler.dumps(received))  # re-shared through a copy
    np.testing.assert_array_equal(sent_on.numpy(), received.numpy())


def test_share_memory_with_a_numpy_view_alive_keeps_it_readable():
    t = kiln.full((100000,), 5.0)
    view = t.numpy()
    t.share_memory_()
    garbage = [kiln.full((100000,), -1.0) for _ in range(8)]  # reuse freed blocks, if any
    assert view[0] == 5.0 and view[-1] == 5.0
    del garbage


def test_byte_sizes_that_overflow_are_errors():
    for make in (lambda: kiln.empty(2 ** 62), lambda: kiln.zeros(2 ** 62 + 1),
                 lambda: kiln.empty(2 ** 61, dtype=kiln.float64)):
        with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
            make()
