"""``anvil demo``: an agent-style session against ``anvil serve`` through the official MCP client.

It starts the server as a subprocess over stdio (``python -m server serve``), then does what an
agent would: look at the device, compile a vector add, launch it against a torch reference,
submit a broken kernel and read the located diagnostic, write a row softmax and check it, and
benchmark the vector add against torch. Each step prints its tool call and the one-line result.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

VECTOR_ADD = """\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
"""

BROKEN = """\
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)
"""

SOFTMAX = """\
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride + offs, num / den, mask=mask)
"""

# A kernel that never ends (n = 1 << 60): what a time-out looks like (tests, benchmarks/mcp_latency.py).
NEVER_ENDS = """\
import triton
import triton.language as tl


@triton.jit
def spin_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(out_ptr + offs)
    for i in range(0, n):
        acc = acc * 1.0001 + 1.0
    tl.store(out_ptr + offs, acc)
"""

N = 98_432
ADD_ARGS = {
    "x_ptr": {"shape": [N], "dtype": "float32", "init": "randn"},
    "y_ptr": {"shape": [N], "dtype": "float32", "init": "randn"},
    "out_ptr": {"shape": [N], "dtype": "float32", "init": "empty"},
    "n": N,
}


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


class _Session:
    def __init__(self, session: ClientSession, verbose: bool) -> None:
        self.session = session
        self.verbose = verbose
        self.step = 0
        self.failures = 0

    async def call(self, title: str, tool: str, args: dict[str, Any], *, expect_error: bool = False) -> dict[str, Any]:
        self.step += 1
        print(f"\n[{self.step}] {title}")
        shown = {k: (v if k != "source" else f"<{len(v.splitlines())} lines>") for k, v in args.items()}
        print(f"    -> {tool}({json.dumps(shown)[:300]})")

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if self.verbose and message:
                print(f"       .. {message}")

        start = time.perf_counter()
        result = await self.session.call_tool(tool, args, progress_callback=progress)
        ms = (time.perf_counter() - start) * 1e3
        data = result.structuredContent or {}
        if result.isError:
            print(f"    <- error ({ms:.0f} ms):")
            for line in _text(result).splitlines():
                print(f"       {line}")
            if not expect_error:
                self.failures += 1
        else:
            print(f"    <- {data.get('summary') or _text(result)[:200]} ({ms:.0f} ms)")
            if expect_error:
                self.failures += 1
        return data


async def _session(verbose: bool) -> int:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server", "serve", "--prestart"], env=env)
    print(f"anvil demo: starting `{sys.executable} -m server serve` and connecting with the MCP Python SDK")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        print(f"connected to {init.serverInfo.name}; tools: {', '.join(t.name for t in tools.tools)}")
        s = _Session(session, verbose)
        info = await s.call("What hardware is here?", "device_info", {})
        target = info.get("default_target", "cpu")
        add = await s.call(
            "Compile a vector add", "compile_kernel",
            {"source": VECTOR_ADD, "constexprs": {"BLOCK": 1024}, "signature": {
                "x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, "artifacts": ["tir"]},
        )  # fmt: skip
        if "artifacts" in add and "tir" in add["artifacts"]:
            page = add["artifacts"]["tir"]
            print(f"       tir: {page['total_lines']} lines; first: {page['text'].splitlines()[0][:100]!r}")
        await s.call(
            "Launch it and check against torch", "launch_kernel",
            {"kernel_id": add.get("kernel_id", ""), "grid": ["cdiv(n, BLOCK)"], "args": ADD_ARGS,
             "reference": {"out_ptr": "x_ptr + y_ptr"}},
        )  # fmt: skip
        await s.call(
            "Submit a kernel with a mistake (an undefined name)", "compile_kernel",
            {"source": BROKEN, "constexprs": {"BLOCK": 1024}}, expect_error=True,
        )  # fmt: skip
        rows, cols = 128, 781
        await s.call(
            "Write a row softmax, compile and check it", "launch_kernel",
            {"source": SOFTMAX, "constexprs": {"BLOCK": 1024}, "grid": [rows],
             "args": {"x_ptr": {"shape": [rows, cols], "init": "randn"},
                      "y_ptr": {"shape": [rows, cols], "init": "empty"}, "n_cols": cols, "stride": cols},
             "reference": {"y_ptr": "torch.softmax(x_ptr, dim=-1)"}},
        )  # fmt: skip
        await s.call(
            "Benchmark the vector add (two block sizes) against torch", "benchmark",
            {"kernel_id": add.get("kernel_id", ""), "grid": ["cdiv(n, BLOCK)"], "args": ADD_ARGS,
             "reference": {"out_ptr": "x_ptr + y_ptr"}, "baseline": "x_ptr + y_ptr",
             "configs": [{"constexprs": {"BLOCK": 1024}}, {"constexprs": {"BLOCK": 4096}}], "rep_ms": 100},
        )  # fmt: skip
        print(f"\nanvil demo: {s.step} steps on target {target}; {s.failures} unexpected result(s).")
        return 1 if s.failures else 0


def run_demo(verbose: bool = True) -> int:
    """Run the demo session; return the process exit status."""
    return anyio.run(_session, verbose)
