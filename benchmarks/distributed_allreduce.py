"""all_reduce of float32 tensors between 2 processes on this host: kiln.distributed (its
own TCP transport, ring above 256 KiB) vs torch.distributed with gloo, both in the same two
processes, timed alternately. Prints the median time per all_reduce and kiln / torch (below
1: kiln is faster).

    .venv/bin/python benchmarks/distributed_allreduce.py [--sizes 1M,16M] [--repeats 7]
"""
import argparse
import datetime
import multiprocessing
import socket
import statistics
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn, barrier):
    barrier()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rank_main(rank, world, ports, sizes, repeats, results):
    import torch
    import torch.distributed as tdist

    import kiln
    import kiln.distributed as kdist
    kiln.set_num_threads(1)
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=120)
    kdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ports[0]}", rank=rank,
                             world_size=world, timeout=timeout)
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ports[1]}", rank=rank,
                             world_size=world, timeout=timeout)
    out = {}
    for n in sizes:
        k = kiln.ones(n)
        t = torch.ones(n)
        kiln_s, torch_s = [], []
        for i in range(repeats + 1):  # the first round warms up both
            a = timed(lambda: kdist.all_reduce(k), kdist.barrier)
            b = timed(lambda: tdist.all_reduce(t), tdist.barrier)
            if i:
                kiln_s.append(a)
                torch_s.append(b)
        assert k[0].item() == world ** (repeats + 1) and t[0].item() == world ** (repeats + 1)
        out[n] = (statistics.median(kiln_s), statistics.median(torch_s))
    kdist.destroy_process_group()
    tdist.destroy_process_group()
    results.put((rank, out))


def parse_size(s):
    return int(float(s[:-1]) * 2 ** 20) if s.upper().endswith("M") else int(s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1M,16M")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    ports = (free_port(), free_port())
    procs = [ctx.Process(target=rank_main, args=(r, 2, ports, sizes, args.repeats, results))
             for r in range(2)]
    for p in procs:
        p.start()
    by_rank = dict(results.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
    print(f"all_reduce, 2 ranks on one host, float32, median of {args.repeats} "
          "(the slower rank's time)")
    print(f"{'floats':>10} {'MB':>7} {'kiln ms':>9} {'torch ms':>9} {'kiln/torch':>10}")
    for n in sizes:
        kiln_s = max(by_rank[r][n][0] for r in by_rank)
        torch_s = max(by_rank[r][n][1] for r in by_rank)
        print(f"{n:>10} {n * 4 / 2 ** 20:>7.1f} {kiln_s * 1e3:>9.2f} {torch_s * 1e3:>9.2f} "
              f"{kiln_s / torch_s:>10.2f}")


if __name__ == "__main__":
    main()
