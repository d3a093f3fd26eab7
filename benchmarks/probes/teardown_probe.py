"""Does a GPU process's exit stall another process's launches? (the launch right after a benchmark)

A "server" process keeps launching a tiny kernel and timing each launch + sync. A "victim" process
allocates like a benchmark worker (a flush buffer and input sets), runs a few kernels, then exits
in one of several ways; the table gives how long its exit took (as the parent sees it) and the
slowest and median launch of the server while it died.

    python benchmarks/probes/teardown_probe.py [--gib 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import time


def victim(gib: float, how: str, ready: mp.synchronize.Event, go: mp.synchronize.Event) -> None:
    import torch

    bufs = [torch.empty(int(gib * (1 << 30)) // 4, device="cuda") for _ in range(2)]
    for b in bufs:
        b.fill_(1.0)
    torch.cuda.synchronize()
    ready.set()
    go.wait()
    if how == "free-then-exit":
        del bufs
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)


def server(stop: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import torch

    x = torch.zeros(1024, device="cuda")
    for _ in range(50):
        x.add_(1)
    torch.cuda.synchronize()
    out.put("ready")
    times = []
    while not stop.is_set():
        t = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        times.append((time.perf_counter(), (time.perf_counter() - t) * 1e3))
        time.sleep(0.002)
    out.put(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=2.0, help="GiB per buffer (two buffers)")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    print(f"{'exit':16} {'GiB':>5} {'exit ms':>8} {'launch p50 ms':>14} {'launch max ms':>14} {'spawn->ready s':>15}")
    for how in ("exit", "sigkill", "free-then-exit"):
        stop, q = ctx.Event(), ctx.Queue()
        s = ctx.Process(target=server, args=(stop, q))
        s.start()
        assert q.get() == "ready"
        ready, go = ctx.Event(), ctx.Event()
        t0 = time.perf_counter()
        v = ctx.Process(target=victim, args=(args.gib, how, ready, go))
        v.start()
        ready.wait()
        t_ready = time.perf_counter() - t0
        time.sleep(0.3)
        began = time.perf_counter()
        go.set()
        v.join()
        ended = time.perf_counter()
        time.sleep(0.5)
        stop.set()
        times = q.get()
        s.join()
        during = [ms for t, ms in times if began <= t <= ended + 0.5] or [0.0]
        print(f"{how:16} {2 * args.gib:5.1f} {(ended - began) * 1e3:8.1f} {statistics.median(during):14.3f} "
              f"{max(during):14.3f} {t_ready:15.2f}")


if __name__ == "__main__":
    main()
