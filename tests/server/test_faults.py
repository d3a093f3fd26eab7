"""A kernel that writes far out of bounds, and one that never ends: clear errors, the server survives."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastmcp import Client

from server.demo import NEVER_ENDS, VECTOR_ADD
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio

OUT_OF_BOUNDS = """\
import triton
import triton.language as tl


@triton.jit
def scribble_kernel(out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + far + offs, tl.zeros([BLOCK], dtype=tl.float32) + 1.0)
"""


GOOD: dict[str, Any] = {
    "source": VECTOR_ADD,
    "constexprs": {"BLOCK": 256},
    "grid": ["cdiv(n, BLOCK)"],
    "args": {
        "x_ptr": {"shape": [500]},
        "y_ptr": {"shape": [500]},
        "out_ptr": {"shape": [500], "init": "empty"},
        "n": 500,
    },
    "reference": {"out_ptr": "x_ptr + y_ptr"},
}


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _next_launch_works(client: Client) -> None:
    result = await client.call_tool("launch_kernel", GOOD, raise_on_error=False)
    assert not result.is_error, text(result)
    assert result.structured_content["passed"] is True


async def test_far_out_of_bounds_write_is_refused_and_located(client: Client) -> None:
    await _next_launch_works(client)
    result = await client.call_tool(
        "launch_kernel",
        {"source": OUT_OF_BOUNDS, "constexprs": {"BLOCK": 16}, "grid": [1],
         "args": {"out_ptr": {"shape": [16], "init": "zeros"}, "far": 1 << 40}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    message = text(result)
    assert "scribble_kernel" in message and "crashed" not in message
    assert f"offset {1 << 40} of 'out_ptr'" in message and "was not performed" in message
    data = result.structured_content
    assert data["error"] == "out_of_bounds" and data["kernel_id"] and data["line"] == 8
    await _next_launch_works(client)


async def test_kernel_that_never_ends_times_out(client: Client, runtime: Runtime) -> None:
    timeout = runtime.limits.launch_timeout_s
    start = time.monotonic()
    result = await client.call_tool(
        "launch_kernel",
        {"source": NEVER_ENDS, "constexprs": {"BLOCK": 16}, "grid": [1],
         "args": {"out_ptr": {"shape": [16], "init": "zeros"}, "n": 1 << 60}},
        raise_on_error=False,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert result.is_error
    message = text(result)
    assert "spin_kernel" in message and f"did not finish within {timeout:g} s" in message
    assert "loop" in message and result.structured_content["error"] == "timeout"
    assert elapsed < timeout + 20
    await _next_launch_works(client)
