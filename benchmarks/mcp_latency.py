"""Latency of Anvil's MCP tools as a client sees them, printed as tables.

    python benchmarks/mcp_latency.py             # stdio: one client, sequential calls
    python benchmarks/mcp_latency.py --load      # also 8 concurrent HTTP clients x 50 calls

stdio: starts ``python -m server serve`` and measures, with the official MCP Python SDK client,
p50/p99 of compile_kernel (a cache hit), launch_kernel (1k float32 elements, checked against a
reference) and a trivial tool (read_artifact of one line). Goal on the CPU backend: compile_kernel
cache hit and launch_kernel p50 <= 10 ms.

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
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from server.demo import VECTOR_ADD  # noqa: E402

N = 1024
COMPILE = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 256}}
LAUNCH_ARGS: dict[str, Any] = {
    "grid": ["cdiv(n, BLOCK)"],
    "args": {
        "x_ptr": {"shape": [N]},
        "y_ptr": {"shape": [N]},
        "out_ptr": {"shape": [N], "init": "empty"},
        "n": N,
    },
    "reference": {"out_ptr": "x_ptr + y_ptr"},
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _table(title: str, rows: dict[str, list[float]], errors: int | None = None) -> None:
    print(f"\n{title}")
    print(f"{'tool':<34}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for name, values in rows.items():
        print(f"{name:<34}{len(values):>6}{_pct(values, 0.5):>10.2f}{_pct(values, 0.99):>10.2f}"
              f"{statistics.fmean(values):>10.2f}")  # fmt: skip
    if errors is not None:
        print(f"errors: {errors}")


async def _timed(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[float, bool]:
    start = time.perf_counter()
    result = await session.call_tool(tool, args)
    return (time.perf_counter() - start) * 1e3, bool(result.isError)


async def _prepare(session: ClientSession) -> dict[str, Any]:
    await session.initialize()
    compiled = await session.call_tool("compile_kernel", COMPILE)
    assert not compiled.isError and compiled.structuredContent, compiled.content
    kernel_id = compiled.structuredContent["kernel_id"]
    launch = {"kernel_id": kernel_id, **LAUNCH_ARGS}
    first = await session.call_tool("launch_kernel", launch)  # compiles the launch specialization
    assert not first.isError, first.content
    return launch


async def stdio_latency(reps: int) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve", "--prestart"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        launch = await _prepare(session)
        artifact = {"kernel_id": launch["kernel_id"], "artifact": "tir", "max_lines": 1}
        rows: dict[str, list[float]] = {"compile_kernel (cache hit)": [], f"launch_kernel ({N} elements)": [],
                                        "read_artifact (trivial)": []}  # fmt: skip
        for _ in range(5):  # warm-up
            await _timed(session, "compile_kernel", COMPILE)
            await _timed(session, "launch_kernel", launch)
        for _ in range(reps):
            rows["compile_kernel (cache hit)"].append((await _timed(session, "compile_kernel", COMPILE))[0])
            rows[f"launch_kernel ({N} elements)"].append((await _timed(session, "launch_kernel", launch))[0])
            rows["read_artifact (trivial)"].append((await _timed(session, "read_artifact", artifact))[0])
    _table(f"stdio, one client, {reps} sequential calls per tool", rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def http_load(clients: int, calls: int) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "serve", "--http", "--port", str(port), "--prestart"],
        stdout=subprocess.DEVNULL,
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
                launch = await _prepare(session)
                for i in range(calls):
                    tool, args = ("compile_kernel", COMPILE) if i % 2 == 0 else ("launch_kernel", launch)
                    ms, failed = await _timed(session, tool, args)
                    errors += failed
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
    await stdio_latency(args.reps)
    if args.load:
        await http_load(args.clients, args.calls)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=100, help="calls per tool over stdio")
    parser.add_argument("--load", action="store_true", help="also run the concurrent HTTP load test")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    anyio.run(main, parser.parse_args())
