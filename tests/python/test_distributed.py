"""kiln.distributed: stores, rendezvous, every collective against numpy float64 references,
point-to-point, async Work, object collectives, subgroups, errors, dead / hung peers, and
DistributedDataParallel against single-process training and torch's DDP.

Ranks are forked processes (kiln gives forked children one thread); the torch comparison
spawns fresh ones, since torch is loaded in this process. Each test runs its ranks with a
hard deadline, so a hang fails the test instead of stalling the suite."""
import datetime
import multiprocessing
import os
import queue
import socket
import tempfile
import threading
import time
import traceback

import numpy as np
import pytest

import kiln
import kiln.distributed as dist

SECONDS = datetime.timedelta(seconds=1)


# -- running ranks ---------------------------------------------------------------------------

def _entry(fn, rank, world, port, args, results):
    try:
        results.put((rank, True, fn(rank, world, port, *args)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def run_ranks(fn, world, *args, deadline_s=40, method="fork", host_store=True):
    """fn(rank, world, port, *args) in `world` processes; their return values by rank. With
    host_store this process serves a TCPStore on `port` that the ranks join as clients;
    otherwise `port` is a free port for the ranks' own rendezvous."""
    ctx = multiprocessing.get_context(method)
    store = None
    if host_store:
        store = dist.TCPStore("127.0.0.1", 0, None, True, 40 * SECONDS)
        port = store.port
    else:
        port = free_port()
    results = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, args, results), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    out, errors = {}, []
    end = time.monotonic() + deadline_s
    reported = set()
    try:
        while len(reported) < world:
            try:
                rank, ok, value = results.get(timeout=0.1)
            except queue.Empty:
                # a rank that exited without reporting (on purpose: os._exit) counts as None
                gone = [r for r, p in enumerate(procs) if not p.is_alive() and r not in reported]
                if gone and results.empty():
                    time.sleep(0.2)  # its feeder may still be flushing a result
                    if results.empty():
                        out.update({r: None for r in gone})
                        reported.update(gone)
                if time.monotonic() > end:
                    raise TimeoutError(f"ranks {sorted(set(range(world)) - reported)} did "
                                       f"not finish within {deadline_s} s") from None
                continue
            reported.add(rank)
            if ok:
                out[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
    finally:
        for p in procs:
            p.join(timeout=max(end - time.monotonic(), 1))
            if p.is_alive():
                p.kill()
                p.join()
        del store
    assert not errors, "\n".join(errors)
    return [out[r] for r in range(world)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join(rank, world, port, timeout_s=30):
    store = dist.TCPStore("127.0.0.1", port, world, False, timeout_s * SECONDS)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=timeout_s * SECONDS)


def data(rank, shape=(5, 3), dtype=np.float32):
    return np.random.default_rng(100 + rank).standard_normal(shape).astype(dtype)


def ints(rank, shape=(6,)):
    return np.random.default_rng(200 + rank).integers(1, 100, shape).astype(np.int32)


def t(a):
    return kiln.from_numpy(np.array(a))


# -- stores ----------------------------------------------------------------------------------

def check_store_semantics(store):
    store.set("k", "v")
    assert store.get("k") == b"v"
    store.set("b", b"\x00\xff")
    assert store.get("b") == b"\x00\xff"
    assert store.add("n", 3) == 3 and store.add("n", -1) == 2 and store.get("n") == b"2"
    assert store.compare_set("k", "v", "w") == b"w"
    assert store.compare_set("k", "x", "y") == b"w"  # mismatch: the current value
    assert store.compare_set("new", "", "z") == b"z"  # missing + empty expected: created
    assert store.compare_set("absent", "e", "d") == b"e"  # missing: the expected value
    assert store.check(["k", "n"]) and not store.check(["k", "nope"])
    store.wait(["k", "n"])
    before = store.num_keys()
    assert store.delete_key("new") and not store.delete_key("new")
    assert store.num_keys() == before - 1
    store.set_timeout(datetime.timedelta(milliseconds=200))
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="wait timeout after 200ms, keys: .*missing"):
        store.get("missing")
    with pytest.raises(RuntimeError, match="timeout"):
        store.wait(["missing"], datetime.timedelta(milliseconds=100))
    assert time.monotonic() - start < 5


def test_hash_prefix_file_stores():
    check_store_semantics(dist.HashStore())
    base = dist.HashStore()
    prefixed = dist.PrefixStore("job", base)
    check_store_semantics(prefixed)
    assert base.get("job/k") == b"w" and prefixed.underlying_store is base
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "store")
        check_store_semantics(dist.FileStore(path, -1))
        one = dist.FileStore(os.path.join(d, "two"), 2)
        other = dist.FileStore(os.path.join(d, "two"), 2)
        one.set("shared", "yes")
        assert other.get("shared") == b"yes"
        del one, other  # the last of world_size=2 removes the file, as torch
        assert not os.path.exists(os.path.join(d, "two"))


def test_tcp_store_local_and_across_processes():
    master = dist.TCPStore("127.0.0.1", 0, 1, True, 10 * SECONDS)
    assert master.port > 0 and master.num_keys() == 1  # torch counts its init key too
    check_store_semantics(master)
    with pytest.raises(dist.DistNetworkError, match="timed out .* trying to connect"):
        dist.TCPStore("127.0.0.1", free_port(), None, False, datetime.timedelta(seconds=0.3))
    out = run_ranks(_store_worker, 2)
    assert out == [b"from 1", b"from 0"]
    # a master store that goes away stops listening and drops its clients at once (a
    # thread blocked in accept() used to keep the port open and serve one more client)
    port = master.port
    client = dist.TCPStore("127.0.0.1", port, None, False, 10 * SECONDS)
    del master
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(dist.DistNetworkError, match="failed"):
        client.get("k")


def _store_worker(rank, world, port):
    store = dist.TCPStore("127.0.0.1", port, world, False, 10 * SECONDS)
    if rank == 1:
        time.sleep(0.2)  # rank 0's get blocks until this set
    store.set(f"key{rank}", f"from {rank}")
    assert store.add("counter", 1) in (1, 2)
    store.wait(["counter"])
    return store.get(f"key{1 - rank}")


def test_mesh_drops_stray_connections_and_cleans_up_on_failure():
    """connect_mesh, ranks as threads over a HashStore: a connection to a rank's listener
    that closes at once, or that announces an impossible rank, is dropped (it used to fail
    the rendezvous or be taken for a peer); and a rendezvous that times out closes the
    connections it had made (they used to stay open, each with its receiver thread)."""
    from kiln.distributed._mailbox import Mailbox
    from kiln.distributed._mesh import connect_mesh

    def mesh(store, ranks, size, timeout_s, stray=None):
        found = {}

        def rank_main(r):
            try:
                found[r] = connect_mesh(store, r, size, timeout_s, Mailbox())
            except Exception as e:
                found[r] = e
        threads = [threading.Thread(target=rank_main, args=(ranks[0],))]
        threads[0].start()
        if stray is not None:
            host, port = store.get(f"addr/{ranks[0]}").decode().rsplit(":", 1)
            with socket.create_connection((host, int(port))) as s:
                s.sendall(stray)
        threads += [threading.Thread(target=rank_main, args=(r,)) for r in ranks[1:]]
        for th in threads[1:]:
            th.start()
        for th in threads:
            th.join()
        return found

    for stray in (b"", np.int64(5).tobytes(), np.int64(0).tobytes()):
        found = mesh(dist.HashStore(), [0, 1], 2, 10.0, stray)
        assert sorted(found[0]) == [1] and sorted(found[1]) == [0], (stray, found)
        for conns in found.values():
            for c in conns.values():
                c.close()
    found = mesh(dist.HashStore(), [0, 1], 3, 0.5)  # rank 2 never comes
    assert all(isinstance(e, dist.DistNetworkError) for e in found.values())
    deadline = time.monotonic() + 5
    while any(t.name.startswith("kiln-dist-recv") for t in threading.enumerate()) and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("kiln-dist-recv")]


def test_failed_send_ends_the_connection():
    """A send that times out (the peer stopped reading) may have written part of a frame:
    the connection is ended, so the peer sees end-of-file instead of later parsing a frame
    header as payload, and this side's operations on that peer fail at once."""
    from kiln.distributed._connection import PeerConnection
    from kiln.distributed._mailbox import COLLECTIVE, Mailbox
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    mailbox = Mailbox()
    conn = PeerConnection(ours, 1, mailbox, 0.3)
    with theirs:
        with pytest.raises(dist.DistBackendError, match="sending to rank 1 failed"):
            conn.send(COLLECTIVE, 0, np.zeros(64 << 20, np.uint8))  # beyond socket buffers
        theirs.settimeout(5)
        while theirs.recv(1 << 20):  # the partial frame, then end-of-file
            pass
    with pytest.raises(dist.DistBackendError, match="sending to rank 1 failed"):
        mailbox.take((1,), COLLECTIVE, 1, time.monotonic() + 5, "all_reduce")
    conn.close()


# -- rendezvous ------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["env", "tcp", "file"])
def test_init_methods(method, tmp_path):
    out = run_ranks(_rendezvous_worker, 2, method, str(tmp_path / "rdzv"), host_store=False)
    assert out == [(0, 2, 1.0), (1, 2, 1.0)]


def _rendezvous_worker(rank, world, port, method, path):
    if method == "env":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world))
        dist.init_process_group("gloo", timeout=20 * SECONDS)
    elif method == "tcp":
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=20 * SECONDS)
    else:
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank,
                                world_size=world, timeout=20 * SECONDS)
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    x = kiln.ones(2) * rank
    dist.all_reduce(x)
    dist.barrier()
    result = (dist.get_rank(), dist.get_world_size(), x[0].item())
    dist.destroy_process_group()
    assert not dist.is_initialized()
    return result


# -- collectives -----------------------------------------------------------------------------

REDUCE_OPS = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum}
BIT_OPS = {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}


def _collectives_worker(rank, world, port):
    join(rank, world, port)
    out = {}
    for name in REDUCE_OPS:
        x = t(data(rank))
        dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
        out["all_reduce_" + name] = x.numpy()
    x = t(data(rank, dtype=np.float64))
    dist.all_reduce(x, dist.ReduceOp.AVG)
    out["avg"] = x.numpy()
    for name in BIT_OPS:
        x = t(ints(rank))
        dist.all_reduce(x, op=getattr(dist.ReduceOp.RedOpType, name))
        out["bits_" + name] = x.numpy()
    base = t(data(rank, (4, 6)))  # a non-contiguous view is reduced in place
    view = base[:, ::2]
    dist.all_reduce(view)
    out["strided"] = base.numpy()
    x = t(data(rank)).to(kiln.bfloat16)
    dist.all_reduce(x)
    out["bf16"] = x.float().numpy()

    x = t(data(rank))
    dist.broadcast(x, src=2)
    out["broadcast"] = x.numpy()
    x = t(data(rank))
    dist.reduce(x, dst=1, op=dist.ReduceOp.MAX)
    out["reduce"] = x.numpy()
    outs = [kiln.zeros(5, 3) for _ in range(world)]
    dist.all_gather(outs, t(data(rank)))
    out["all_gather"] = np.stack([o.numpy() for o in outs])
    big = kiln.zeros(world * 5, 3)
    dist.all_gather_into_tensor(big, t(data(rank)))
    out["all_gather_into_tensor"] = big.numpy()
    stacked = kiln.zeros(world, 5, 3)
    dist.all_gather_into_tensor(stacked, t(data(rank)))
    out["all_gather_stacked"] = stacked.numpy()
    y = kiln.zeros(5, 3)
    dist.reduce_scatter(y, [t(data(rank * 10 + j)) for j in range(world)])
    out["reduce_scatter"] = y.numpy()
    y = kiln.zeros(2, 3)
    dist.reduce_scatter_tensor(y, t(data(rank, (2 * world, 3))), op=dist.ReduceOp.AVG)
    out["reduce_scatter_tensor"] = y.numpy()
    y = kiln.zeros(5, 3)
    gl = [kiln.zeros(5, 3) for _ in range(world)] if rank == 0 else None
    dist.gather(t(data(rank)), gl, dst=0)
    out["gather"] = np.stack([g.numpy() for g in gl]) if rank == 0 else None
    sl = [t(data(50 + j)) for j in range(world)] if rank == 1 else None
    dist.scatter(y, sl, src=1)
    out["scatter"] = y.numpy()
    ins = [t(data(rank * 10 + j, (j + 1, 2))) for j in range(world)]
    outs = [kiln.zeros(rank + 1, 2) for _ in range(world)]
    dist.all_to_all(outs, ins)
    out["all_to_all"] = [o.numpy() for o in outs]
    inp = t(np.arange(world * 2, dtype=np.float32) + 100 * rank)
    res = kiln.zeros(world * 2)
    dist.all_to_all_single(res, inp)
    out["a2a_single"] = res.numpy()
    # uneven splits: rank r sends j + 1 rows to rank j and gets r + 1 rows from everyone
    inp = t(np.full((sum(range(1, world + 1)), 2), rank, np.float32))
    res = kiln.zeros(world * (rank + 1), 2)
    dist.all_to_all_single(res, inp, [rank + 1] * world, list(range(1, world + 1)))
    out["a2a_uneven"] = res.numpy()
    dist.destroy_process_group()
    return out


def test_collectives_match_numpy():
    world = 3
    out = run_ranks(_collectives_worker, world)
    d64 = [data(r).astype(np.float64) for r in range(world)]
    for name, fn in REDUCE_OPS.items():
        expected = d64[0]
        for r in range(1, world):
            expected = fn(expected, d64[r])
        for r in range(world):
            np.testing.assert_allclose(out[r]["all_reduce_" + name], expected, rtol=1e-5,
                                       atol=1e-6, err_msg=name)
    # bit-identical on every rank (DDP relies on it)
    assert all((o["all_reduce_SUM"] == out[0]["all_reduce_SUM"]).all() for o in out)
    avg = sum(data(r, dtype=np.float64) for r in range(world)) / world
    for name, fn in BIT_OPS.items():
        expected = fn.reduce([ints(r) for r in range(world)])
        for r in range(world):
            np.testing.assert_array_equal(out[r]["bits_" + name], expected)
    for r in range(world):
        o = out[r]
        np.testing.assert_allclose(o["avg"], avg, rtol=1e-12)
        strided = data(r, (4, 6)).astype(np.float64)
        strided[:, ::2] = sum(data(q, (4, 6)).astype(np.float64)[:, ::2] for q in range(world))
        np.testing.assert_allclose(o["strided"], strided, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(o["bf16"], sum(d64), rtol=2e-2, atol=5e-2)
        np.testing.assert_array_equal(o["broadcast"], data(2))
        if r == 1:
            np.testing.assert_array_equal(o["reduce"], np.max([data(q) for q in range(world)], 0))
        np.testing.assert_array_equal(o["all_gather"], np.stack([data(q) for q in range(world)]))
        np.testing.assert_array_equal(o["all_gather_into_tensor"],
                                      np.concatenate([data(q) for q in range(world)]))
        np.testing.assert_array_equal(o["all_gather_stacked"],
                                      np.stack([data(q) for q in range(world)]))
        np.testing.assert_allclose(
            o["reduce_scatter"], sum(data(q * 10 + r).astype(np.float64) for q in range(world)),
            rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            o["reduce_scatter_tensor"],
            sum(data(q, (2 * world, 3)).astype(np.float64)[2 * r:2 * r + 2]
                for q in range(world)) / world, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(o["scatter"], data(50 + r))
        for q in range(world):
            np.testing.assert_array_equal(o["all_to_all"][q], data(q * 10 + r, (r + 1, 2)))
        np.testing.assert_array_equal(
            o["a2a_single"], np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * q
                                             for q in range(world)]))
        np.testing.assert_array_equal(o["a2a_uneven"],
                                      np.repeat(np.arange(world), r + 1)[:, None] * [1, 1])
    np.testing.assert_array_equal(out[0]["gather"], np.stack([data(q) for q in range(world)]))


def _ring_worker(rank, world, port):
    join(rank, world, port)
    n = 4 * 1024 * 1024
    parts = [np.random.default_rng(r).standard_normal(n).astype(np.float32)
             for r in range(world)]
    x = t(parts[rank])
    start = time.perf_counter()
    dist.all_reduce(x)
    elapsed = time.perf_counter() - start
    expected = sum(p.astype(np.float64) for p in parts)
    got = x.numpy()
    dist.destroy_process_group()
    return float(np.abs(got - expected).max()), got[::4096].copy(), elapsed


def test_large_all_reduce_uses_ring():
    out = run_ranks(_ring_worker, 3)
    for err, _, _ in out:
        assert err < 1e-4
    for _, sample, _ in out[1:]:  # every rank holds the same bits
        np.testing.assert_array_equal(sample, out[0][1])


# -- point-to-point, async, objects, groups --------------------------------------------------

def _p2p_worker(rank, world, port):
    join(rank, world, port)
    peer = 1 - rank
    out = {}
    # both ranks send first: sends never wait for the matching recv
    dist.send(t(data(rank)), dst=peer)
    dist.send(t(data(rank + 10)), dst=peer, tag=7)
    late = kiln.zeros(5, 3)
    tagged = dist.irecv(late, src=peer, tag=7)
    y = kiln.zeros(5, 3)
    assert dist.recv(y) == peer  # any source
    out["recv"] = y.numpy()
    assert tagged.wait() is True and tagged.is_completed()
    out["tagged"] = late.numpy()
    req = dist.isend(t(np.arange(4, dtype=np.int64) * (rank + 1)), dst=peer)
    z = kiln.zeros(4, dtype=kiln.int64)
    rreq = dist.irecv(z, src=peer)
    req.wait()
    rreq.wait()
    out["isend"] = z.numpy()
    # async collectives: several in flight, results via wait() and futures
    a, b = t(data(rank)), t(ints(rank))
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, op=dist.ReduceOp.MAX, async_op=True)
    fut = wb.get_future()
    assert wa.wait() is True
    assert fut.wait()[0] is b
    assert wa.is_completed() and wa.is_success()
    out["async_sum"], out["async_max"] = a.numpy(), b.numpy()
    assert dist.barrier(async_op=True).wait()
    from kiln.utils.data.distributed import DistributedSampler
    sampler = DistributedSampler(list(range(10)), shuffle=False)
    out["sampler"] = (sampler.num_replicas, sampler.rank, list(sampler))
    # destroy_process_group while an operation still waits (rank 1 never joins this
    # all_reduce, and keeps its connection open until rank 0 is done): the operation fails
    # at once instead of holding the group's worker thread, and with it the process's exit,
    # for the group's timeout (30 s here)
    store = dist.TCPStore("127.0.0.1", port, None, False, 20 * SECONDS)
    if rank == 0:
        pending = dist.all_reduce(kiln.ones(2), async_op=True)
        future = pending.get_future()
    dist.destroy_process_group()
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="was destroyed"):
            pending.wait()
        with pytest.raises(dist.DistBackendError):
            future.wait()
        out["wait_after_destroy_s"] = time.monotonic() - start
        while any(t.name.startswith("kiln-dist") for t in threading.enumerate()) and \
                time.monotonic() - start < 5:
            time.sleep(0.01)
        out["threads_left"] = [t.name for t in threading.enumerate()
                               if t.name.startswith("kiln-dist")]
        store.set("rank 0 done", "1")
    else:
        store.wait(["rank 0 done"])
    return out


def test_send_recv_async_and_sampler():
    out = run_ranks(_p2p_worker, 2)
    for r, o in enumerate(out):
        p = 1 - r
        np.testing.assert_array_equal(o["recv"], data(p))
        np.testing.assert_array_equal(o["tagged"], data(p + 10))
        np.testing.assert_array_equal(o["isend"], np.arange(4) * (p + 1))
        np.testing.assert_allclose(o["async_sum"], data(0) + data(1), rtol=1e-6)
        np.testing.assert_array_equal(o["async_max"], np.maximum(ints(0), ints(1)))
        assert o["sampler"] == (2, r, list(range(r, 10, 2)))
    assert out[0]["wait_after_destroy_s"] < 5 and out[0]["threads_left"] == []


def _objects_worker(rank, world, port):
    join(rank, world, port)
    out = {}
    objs = [{"rank": rank}, "x" * (rank * 1000), None] if rank == 1 else [0, 0, 0]
    dist.broadcast_object_list(objs, src=1)
    out["broadcast"] = objs
    gathered = [None] * world
    dist.all_gather_object(gathered, ("r", rank, list(range(rank))))
    out["all_gather"] = gathered
    glist = [None] * world if rank == 2 else None
    dist.gather_object({"from": rank}, glist, dst=2)
    out["gather"] = glist
    received = [None]
    dist.scatter_object_list(received, [f"to {j}" for j in range(world)] if rank == 0
                             else None, src=0)
    out["scatter"] = received[0]
    dist.destroy_process_group()
    return out


def test_object_collectives():
    world = 3
    out = run_ranks(_objects_worker, world)
    for r, o in enumerate(out):
        assert o["broadcast"] == [{"rank": 1}, "x" * 1000, None]
        assert o["all_gather"] == [("r", q, list(range(q))) for q in range(world)]
        assert o["scatter"] == f"to {r}"
    assert out[2]["gather"] == [{"from": q} for q in range(world)]
    assert out[0]["gather"] is None


def _group_worker(rank, world, port):
    join(rank, world, port)
    pair = dist.new_group([0, 2])
    everyone = dist.new_group()
    x = kiln.ones(3) * (rank + 1)
    if rank == 1:
        assert pair is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(pair) == -1 and dist.get_world_size(pair) == -1
        with pytest.warns(UserWarning, match="does not belong"):
            assert dist.all_reduce(x, group=pair) is None
    else:
        assert dist.get_world_size(pair) == 2 and dist.get_rank(pair) == rank // 2
        assert dist.get_process_group_ranks(pair) == [0, 2]
        dist.all_reduce(x, group=pair)
        y = kiln.full((1,), 9.0) if rank == 2 else kiln.zeros(1)
        dist.broadcast(y, src=2, group=pair)  # src is a global rank
        assert y.item() == 9.0
    z = kiln.ones(1)
    dist.all_reduce(z, group=everyone)
    result = (x[0].item(), z.item())
    dist.destroy_process_group()
    return result


def test_new_group():
    assert run_ranks(_group_worker, 3) == [(4.0, 3.0), (2.0, 3.0), (4.0, 3.0)]


# -- errors ----------------------------------------------------------------------------------

def test_errors_without_process_group():
    assert dist.is_available() and not dist.is_initialized()
    msg = "Default process group has not been initialized"
    for call in (lambda: dist.all_reduce(kiln.ones(2)), dist.get_rank, dist.barrier,
                 lambda: dist.new_group([0])):
        with pytest.raises(ValueError, match=msg):
            call()
    with pytest.raises(RuntimeError, match="NCCL"):
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.raises(AssertionError, match="world_size must be positive"):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0)
    with pytest.raises(RuntimeError, match="No rendezvous handler for foo://"):
        dist.init_process_group("gloo", init_method="foo://x", rank=0, world_size=1)


def test_argument_errors_single_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        x = kiln.ones(3)
        with pytest.raises(RuntimeError, match="expected length 1, got 2"):
            dist.all_gather([x, x], x)
        with pytest.raises(RuntimeError, match="invalid tensor size"):
            dist.all_gather([kiln.ones(2)], x)
        with pytest.raises(RuntimeError, match="must be world size"):
            dist.reduce_scatter(x, [x, x])
        with pytest.raises(ValueError, match="must be specified on destination rank"):
            dist.gather(x, None, dst=0)
        with pytest.raises(RuntimeError, match="Incorrect input list size 2"):
            dist.scatter(x, [x, x], src=0)
        with pytest.raises(RuntimeError, match="invalid root rank: 3"):
            dist.broadcast(x, src=3)
        with pytest.raises(ValueError, match="should not be the same"):
            dist.send(x, dst=0)
        with pytest.raises(RuntimeError, match="non-integral"):
            dist.all_reduce(x, op=dist.ReduceOp.BAND)
        with pytest.raises(RuntimeError, match="can't be cast"):
            dist.all_reduce(kiln.ones(2, dtype=kiln.int32), op=dist.ReduceOp.AVG)
        with pytest.raises(RuntimeError, match="No backend type associated with device type "
                                               "testing"):
            dist.all_reduce(kiln.ones(2, device="testing:0"))
        with pytest.raises(ValueError, match="size at least 1"):
            dist.scatter_object_list([], [1])
        with pytest.raises(IndexError):
            dist.all_gather_object([], 1)
    finally:
        dist.destroy_process_group()
    with pytest.raises(AssertionError, match="Process group cannot be None"):
        dist.destroy_process_group()


def _mismatch_worker(rank, world, port):
    join(rank, world, port, timeout_s=10)
    errors = []
    shapes = [kiln.ones(4), kiln.ones(8)][rank]
    dtypes = [kiln.ones(4), kiln.ones(4, dtype=kiln.int32)][rank]
    for x in (shapes, dtypes):
        try:
            dist.all_reduce(x)
        except RuntimeError as e:
            errors.append(str(e))
    dist.destroy_process_group()
    return errors


def test_mismatched_tensors_across_ranks_raise():
    for errors in run_ranks(_mismatch_worker, 2):
        assert len(errors) == 2
        assert all("same shape and dtype on every rank" in e for e in errors)


def _dead_peer_worker(rank, world, port, mode):
    # 3 s: room for a loaded 2-core CI machine to start both processes
    join(rank, world, port, timeout_s=3)
    dist.all_reduce(kiln.ones(2))  # everyone is up
    if rank == 1:
        if mode == "dies":
            os._exit(3)
        time.sleep(7)  # alive but absent, well past rank 0's timeout
        return None
    start = time.monotonic()
    try:
        if mode == "monitored":
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=1))
        else:
            dist.all_reduce(kiln.ones(1000))
        error = None
    except RuntimeError as e:
        error = f"{type(e).__name__}: {e}"
    return error, time.monotonic() - start


@pytest.mark.parametrize("mode", ["dies", "hangs", "monitored"])
def test_dead_or_hung_peer_raises_instead_of_hanging(mode):
    (error, elapsed), _ = run_ranks(_dead_peer_worker, 2, mode, deadline_s=20)
    assert error is not None
    if mode == "dies":  # the closed connection is noticed at once
        assert "Connection closed by peer (rank 1)" in error and elapsed < 2
    elif mode == "hangs":  # the group's 3 s timeout
        assert "DistBackendError" in error and "timed out" in error and 2.5 < elapsed < 6.5
    else:
        assert "Rank 1 failed to pass monitoredBarrier in 1000 ms" in error


# -- DistributedDataParallel -----------------------------------------------------------------

STEPS, LR, BATCH = 3, 0.1, 8


def _mlp_weights():
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype(np.float32) * 0.5
            for s in [(16, 4), (16,), (3, 16), (3,)]]


def _batch():
    rng = np.random.default_rng(8)
    return rng.standard_normal((BATCH, 4)).astype(np.float32), \
        rng.standard_normal((BATCH, 3)).astype(np.float32)


def _kiln_mlp(rank):
    nn = kiln.nn
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    weights = _mlp_weights()
    with kiln.no_grad():
        for p, w in zip(model.parameters(), weights):
            # ranks other than 0 start different: DDP must broadcast rank 0's
            p.copy_(t(w if rank == 0 else w + 1))
    return model


def _train_kiln(model, x, y):
    opt = kiln.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((model(t(x)) - t(y)) ** 2).mean()
        loss.backward()
        opt.step()
    inner = getattr(model, "module", model)
    return [p.detach().numpy().copy() for p in inner.parameters()]


def _train_torch_ddp(rank, world, port, x, y):
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                             world_size=world)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 3))
    with torch.no_grad():
        for p, w in zip(model.parameters(), _mlp_weights()):
            p.copy_(torch.from_numpy(w if rank == 0 else w + 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        ((ddp(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean().backward()
        opt.step()
    tdist.destroy_process_group()
    return [p.detach().numpy().copy() for p in model.parameters()]


def _ddp_worker(rank, world, port, with_torch, torch_port):
    join(rank, world, port)
    x, y = _batch()
    half = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    ddp = kiln.nn.parallel.DistributedDataParallel(_kiln_mlp(rank))
    out = {"kiln": _train_kiln(ddp, x[half], y[half])}
    # no_sync: two half-batches accumulated locally, then one synchronised backward
    acc = kiln.nn.parallel.DistributedDataParallel(_kiln_mlp(rank), bucket_cap_mb=0.0001)
    quarter = BATCH // world // 2
    xs, ys = t(x[half]), t(y[half])
    with acc.no_sync():
        ((acc(xs[:quarter]) - ys[:quarter]) ** 2).mean().backward()
    local = [p.grad.numpy().copy() for p in acc.module.parameters()]
    ((acc(xs[quarter:]) - ys[quarter:]) ** 2).mean().backward()
    out["no_sync_local"] = local
    out["no_sync_synced"] = [p.grad.numpy().copy() for p in acc.module.parameters()]
    # find_unused_parameters: a branch only rank 0 uses
    unused = kiln.nn.parallel.DistributedDataParallel(_TwoHeads(), find_unused_parameters=True)
    unused(t(x[half]), rank == 0).sum().backward()
    out["unused_grads"] = [None if p.grad is None else p.grad.numpy().copy()
                           for p in unused.module.parameters()]
    out["buffers"] = _ddp_buffer_syncs(rank)
    dist.destroy_process_group()
    if with_torch:
        out["torch"] = _train_torch_ddp(rank, world, torch_port, x[half], y[half])
    return out


class _WithBuffer(kiln.nn.Module):
    def __init__(self, rank):
        super().__init__()
        self.lin = kiln.nn.Linear(2, 2)
        self.register_buffer("b", kiln.full((1,), float(rank)))

    def forward(self, x):
        return self.lin(x) + self.b


def _ddp_buffer_syncs(rank):
    """The buffer values a rank sees under torch 2.13's rules for syncing buffers (the
    expected values in test_ddp_matches_single_process_and_torch were read off torch)."""
    DDP = kiln.nn.parallel.DistributedDataParallel
    seen = {}
    m = DDP(_WithBuffer(rank), broadcast_buffers=False)  # rank-local buffers, also at init
    seen["broadcast_buffers=False"] = m.module.b.item()
    m(kiln.ones(1, 2)).sum().backward()
    seen["broadcast_buffers=False, forward"] = m.module.b.item()
    seen["forward_sync_buffers=False"] = DDP(_WithBuffer(rank),
                                             forward_sync_buffers=False).module.b.item()
    m = DDP(_WithBuffer(rank))
    seen["default"] = m.module.b.item()
    # a forward syncs when the previous one was synchronised (grad on, outside no_sync),
    # in train and in eval mode alike
    steps = []
    for step, (train, grad) in enumerate([(True, True), (True, False), (True, False),
                                          (False, True), (False, True)]):
        m.module.b.fill_(rank + 10 * step + 10)
        m.train(train)
        with kiln.set_grad_enabled(grad):
            y = m(kiln.ones(1, 2))
        if grad:
            y.sum().backward()
        steps.append(m.module.b.item())
    seen["steps"] = steps
    m.train()
    with m.no_sync():
        for value in (100, 200):
            m.module.b.fill_(rank + value)
            m(kiln.ones(1, 2)).sum().backward()
            seen[f"no_sync {value}"] = m.module.b.item()
    m.module.b.fill_(rank + 300)
    m(kiln.ones(1, 2)).sum().backward()
    seen["after no_sync"] = m.module.b.item()
    return seen


class _TwoHeads(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = kiln.nn.Linear(4, 2)
        self.b = kiln.nn.Linear(4, 2)
        with kiln.no_grad():
            for p in self.parameters():
                p.fill_(0.5)

    def forward(self, x, use_b):
        return self.a(x) + (self.b(x) if use_b else 0)


def test_ddp_matches_single_process_and_torch():
    try:
        import torch  # noqa: F401
        with_torch = True
    except ImportError:
        with_torch = False
    x, y = _batch()
    single = _train_kiln(_kiln_mlp(0), x, y)
    # spawn: fresh processes for torch's gloo (torch is loaded in this one)
    out = run_ranks(_ddp_worker, 2, with_torch, free_port(), method="spawn", deadline_s=50)
    for r in range(2):
        for got, want in zip(out[r]["kiln"], single):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        if with_torch:
            for got, want in zip(out[r]["kiln"], out[r]["torch"]):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the replicas are bit-identical
    for a, b in zip(out[0]["kiln"], out[1]["kiln"]):
        np.testing.assert_array_equal(a, b)
    # no_sync: local gradients differ, the synchronised ones are the mean of the two ranks'
    # accumulated (first quarter under no_sync + second quarter) gradients
    assert any((a != b).any() for a, b in zip(out[0]["no_sync_local"], out[1]["no_sync_local"]))
    for a, b in zip(out[0]["no_sync_synced"], out[1]["no_sync_synced"]):
        np.testing.assert_array_equal(a, b)
    # the head only rank 0 used gets rank 0's gradient / 2 on both ranks
    g0, g1 = out[0]["unused_grads"], out[1]["unused_grads"]
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert np.abs(g0[2]).sum() > 0
    # buffers: what torch 2.13's DDP does in the same sequence (rank r's buffer starts at r)
    for r in range(2):
        assert out[r]["buffers"] == {
            "broadcast_buffers=False": r, "broadcast_buffers=False, forward": r,
            "forward_sync_buffers=False": 0, "default": 0,
            "steps": [10, 20, 30 + r, 40 + r, 50],
            "no_sync 100": 100, "no_sync 200": 200 + r, "after no_sync": 300 + r}
