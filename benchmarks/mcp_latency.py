"""Latency of Anvil's MCP tools as a client sees them, printed as tables.

    python benchmarks/mcp_latency.py             # CPU: cold start, recovery, warm calls (stdio)
    python benchmarks/mcp_latency.py --gpu       # the same on the GPU (target 'cuda')
    python benchmarks/mcp_latency.py --load      # also 8 concurrent HTTP clients x 50 calls

Every server is ``python -m server serve`` started over stdio and driven with the official MCP
Python SDK client, with a fresh compile cache and a fresh server state directory (so compiles
are real compiles and device ceilings are measured once, by the first server).

cold start: for two servers started one after the other, the time until ``initialize`` answers,
then the first compile_kernel (a kernel no cache holds), the first launch_kernel and the first
device_info. The first server measures the device's ceilings; the second reads them from disk.
Goals: first compile <= 500 ms on the CPU; device_info <= 100 ms once the ceilings are cached.

recovery: the launch_kernel that follows a call whose worker was replaced: after benchmark (its
timed runs are unchecked, so its worker retires) and after a kernel that never ends (its worker
is killed at the launch time limit), at once and --pause seconds later. The device's spare worker
takes over at once; the spare it starts in turn is ready a second or two later, so only a fault
right after a fault waits for a worker to start.

warm: p50/p99 of compile_kernel (a cache hit), launch_kernel of 1 Ki float32 elements and of
16 Mi elements (an add checked against its reference) and a trivial tool (read_artifact of one
line). Goals: compile_kernel cache hit and the 1 Ki launch p50 <= 10 ms on the CPU; the 16 Mi
launch p50 <= 20 ms on an H200 (statistics and comparisons run on the device).

--load: starts ``python -m server serve --http`` on a free port and runs 8 concurrent client
sessions, each making 50 calls alternating compile_kernel (cache hits) and launch_kernel;
prints p50/p99 per tool and the number of errors (expected: 0).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from server.demo import NEVER_ENDS, VECTOR_ADD  # noqa: E402

N = 1024
BIG = 1 << 24
COMPILE = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 256}}


def add_launch(n: int, target: str, block: int = 256) -> dict[str, Any]:
    return {
        "grid": ["cdiv(n, BLOCK)"],
        "args": {
            "x_ptr": {"shape": [n]},
            "y_ptr": {"shape": [n]},
            "out_ptr": {"shape": [n], "init": "empty"},
            "n": n,
        },
        "reference": {"out_ptr": "x_ptr + y_ptr"},
        "target": target,
        "constexprs": {"BLOCK": block},
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _table(title: str, rows: dict[str, list[float]], errors: int | None = None) -> None:
    print(f"\n{title}")
    print(f"{'call':<44}{'n':>5}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for name, values in rows.items():
        print(f"{name:<44}{len(values):>5}{_pct(values, 0.5):>10.2f}{_pct(values, 0.99):>10.2f}"
              f"{statistics.fmean(values):>10.2f}")  # fmt: skip
    if errors is not None:
        print(f"errors: {errors}")


def _single(title: str, rows: dict[str, float]) -> None:
    print(f"\n{title}")
    print(f"{'call':<56}{'ms':>10}")
    for name, ms in rows.items():
        print(f"{name:<56}{ms:>10.1f}")


async def _timed(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await session.call_tool(tool, args)
    ms = (time.perf_counter() - start) * 1e3
    if result.isError:
        text = " ".join(getattr(b, "text", "") for b in result.content)
        raise RuntimeError(f"{tool} failed: {text[:2000]}")
    return ms, result.structuredContent


class Servers:
    """Starts servers with one fresh compile cache and state directory, shared by all of them."""

    def __init__(self, root: Path, extra_args: list[str]) -> None:
        self.env = dict(os.environ)
        self.env["ANVIL_CACHE_DIR"] = str(root / "compile-cache")
        self.env["ANVIL_SERVER_CACHE_DIR"] = str(root / "server-state")
        self.extra_args = extra_args

    @asynccontextmanager
    async def session(self, *args: str) -> AsyncIterator[tuple[ClientSession, float]]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "server", "serve", *self.extra_args, *args], env=self.env
        )
        start = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session, (time.perf_counter() - start) * 1e3


async def cold_start(servers: Servers, target: str) -> None:
    rows: dict[str, float] = {}
    for run in (1, 2):
        async with servers.session() as (session, start_ms):
            rows[f"server {run}: start (spawn to initialize)"] = start_ms
            source = VECTOR_ADD.replace("add_kernel", f"add_kernel_{run}_{os.getpid()}")
            ms, compiled = await _timed(session, "compile_kernel", {"source": source, "constexprs": {"BLOCK": 256},
                                                                    "target": target})  # fmt: skip
            rows[f"server {run}: first compile_kernel (new kernel)"] = ms
            launch = add_launch(N, target) | {"kernel_id": compiled["kernel_id"]}
            ms, _ = await _timed(session, "launch_kernel", launch)
            rows[f"server {run}: first launch_kernel ({N} elements)"] = ms
            what = "measures the ceilings" if run == 1 else "ceilings from disk"
            rows[f"server {run}: first device_info ({what})"] = (await _timed(session, "device_info", {}))[0]
            rows[f"server {run}: second device_info"] = (await _timed(session, "device_info", {}))[0]
    _single(f"cold start, target {target}", rows)


async def recovery(servers: Servers, target: str, pause_s: float, rounds: int = 3) -> None:
    later = f"{pause_s:g} s later"
    rows: dict[str, list[float]] = {f"launch after benchmark, {when}": [] for when in ("at once", later)}
    rows |= {f"launch after a time-out, {when}": [] for when in ("at once", later)}
    async with servers.session("--launch-timeout", "5") as (session, _):
        ms, compiled = await _timed(session, "compile_kernel", COMPILE | {"target": target})
        launch = add_launch(N, target) | {"kernel_id": compiled["kernel_id"]}
        await _timed(session, "launch_kernel", launch)
        spin = {"source": NEVER_ENDS, "constexprs": {"BLOCK": 16}, "grid": [1], "target": target,
                "args": {"out_ptr": {"shape": [16], "init": "zeros"}, "n": 1 << 60}}  # fmt: skip
        for _ in range(rounds):
            for when, pause in (("at once", 0.0), (later, pause_s)):
                await anyio.sleep(pause_s)  # the spare of the last replacement is ready
                await _timed(session, "benchmark", launch | {"warmup_ms": 1, "rep_ms": 5})
                await anyio.sleep(pause)
                rows[f"launch after benchmark, {when}"].append((await _timed(session, "launch_kernel", launch))[0])
                await anyio.sleep(pause_s)
                result = await session.call_tool("launch_kernel", spin)
                assert result.isError, "the never-ending kernel returned"
                await anyio.sleep(pause)
                rows[f"launch after a time-out, {when}"].append((await _timed(session, "launch_kernel", launch))[0])
    _table(f"recovery, target {target} (the worker is replaced: benchmark retires it, a time-out kills it)", rows)


async def warm(servers: Servers, target: str, reps: int) -> None:
    async with servers.session() as (session, _):
        ms, compiled = await _timed(session, "compile_kernel", COMPILE | {"target": target})
        small = add_launch(N, target) | {"kernel_id": compiled["kernel_id"]}
        big = add_launch(BIG, target, 1024) | {"source": VECTOR_ADD}
        _, first = await _timed(session, "launch_kernel", big)
        big = {k: v for k, v in big.items() if k not in ("constexprs", "source")} | {"kernel_id": first["kernel_id"]}
        artifact = {"kernel_id": compiled["kernel_id"], "artifact": "tir", "max_lines": 1}
        rows: dict[str, list[float]] = {"compile_kernel (cache hit)": [], f"launch_kernel ({N} elements)": [],
                                        f"launch_kernel ({BIG >> 20} Mi elements, checked)": [],
                                        "read_artifact (trivial)": [], "device_info (in memory)": []}  # fmt: skip
        for _ in range(3):  # warm-up
            await _timed(session, "compile_kernel", COMPILE | {"target": target})
            await _timed(session, "launch_kernel", small)
            await _timed(session, "launch_kernel", big)
        for _ in range(reps):
            rows["compile_kernel (cache hit)"].append((await _timed(session, "compile_kernel",
                                                                    COMPILE | {"target": target}))[0])  # fmt: skip
            rows[f"launch_kernel ({N} elements)"].append((await _timed(session, "launch_kernel", small))[0])
            rows["read_artifact (trivial)"].append((await _timed(session, "read_artifact", artifact))[0])
            rows["device_info (in memory)"].append((await _timed(session, "device_info", {}))[0])
        for _ in range(max(5, reps // 5)):
            rows[f"launch_kernel ({BIG >> 20} Mi elements, checked)"].append(
                (await _timed(session, "launch_kernel", big))[0]
            )
    _table(f"warm, target {target}, one client, sequential calls", rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def http_load(servers: Servers, target: str, clients: int, calls: int) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "serve", "--http", "--port", str(port), *servers.extra_args],
        stdout=subprocess.DEVNULL, env=servers.env,
    )
    rows: dict[str, list[float]] = {"compile_kernel (cache hit)": [], f"launch_kernel ({N} elements)": []}
    errors = 0
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)

        async def client(index: int) -> None:
            nonlocal errors
            async with (
                httpx.AsyncClient(timeout=120) as http,
                streamable_http_client(url, http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                _, compiled = await _timed(session, "compile_kernel", COMPILE | {"target": target})
                launch = add_launch(N, target) | {"kernel_id": compiled["kernel_id"]}
                for i in range(calls):
                    tool, args = ("compile_kernel", COMPILE | {"target": target}) if i % 2 == 0 else \
                        ("launch_kernel", launch)  # fmt: skip
                    try:
                        ms, _ = await _timed(session, tool, args)
                    except RuntimeError:
                        errors += 1
                        continue
                    key = "compile_kernel (cache hit)" if tool == "compile_kernel" else f"launch_kernel ({N} elements)"
                    rows[key].append(ms)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index in range(clients):
                tg.start_soon(client, index)
        wall = time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(10)
    _table(f"streamable HTTP, {clients} concurrent clients x {calls} calls ({wall:.1f} s wall)", rows, errors)


async def main(args: argparse.Namespace) -> None:
    target = "cuda" if args.gpu else "cpu"
    with tempfile.TemporaryDirectory(prefix="anvil-latency-") as root:
        servers = Servers(Path(root), args.server_args)
        if "cold" in args.only:
            await cold_start(servers, target)
        if "recovery" in args.only:
            await recovery(servers, target, args.pause, args.rounds)
        if "warm" in args.only:
            await warm(servers, target, args.reps)
        if args.load:
            await http_load(servers, target, args.clients, args.calls)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="measure on the GPU (target 'cuda')")
    parser.add_argument("--reps", type=int, default=50, help="calls per tool in the warm table")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between a fault and the next call")
    parser.add_argument("--rounds", type=int, default=3, help="faults of each kind in the recovery table")
    parser.add_argument("--only", nargs="+", choices=["cold", "recovery", "warm"], default=["cold", "recovery", "warm"],
                        help="the tables to measure (default: all three)")
    parser.add_argument("--load", action="store_true", help="also run the concurrent HTTP load test")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--server-args", nargs="*", default=[], help="extra arguments of `anvil serve`")
    anyio.run(main, parser.parse_args())
