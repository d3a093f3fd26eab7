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


TURNS_FAR = """\
import triton
import triton.language as tl


@triton.jit
def late_kernel(x_ptr, c_ptr, out_ptr, FAR, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    far = tl.where(tl.atomic_add(c_ptr, 1) > 0, FAR, 0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + far))
"""


async def test_a_crash_names_the_unmasked_accesses_and_the_launch_that_locates_them(client: Client) -> None:
    """The checked run of each input set is in bounds; the timed runs (unchecked) read 4 TiB away and crash
    the worker. The error lists the accesses whose address depends on the program id and have no mask, with
    their lines, and says which call reports the faulting one."""
    result = await client.call_tool(
        "benchmark",
        {"source": TURNS_FAR, "constexprs": {"BLOCK": 16}, "grid": [1], "warmup_ms": 1, "rep_ms": 5,
         "args": {"x_ptr": {"shape": [16]}, "c_ptr": {"shape": [1], "dtype": "int32", "init": "zeros"},
                  "out_ptr": {"shape": [16], "init": "empty"}, "FAR": 1 << 40}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    data, message = result.structured_content, text(result)
    assert data["error"] == "crash" and data["job"] == "benchmark"
    assert [(a["kind"], a["line"], a["pointer"]) for a in data["unmasked_accesses"]] == [
        ("load", 9, "x_ptr"), ("store", 9, "out_ptr")]
    assert "line 9:" in message and "tl.store(out_ptr + offs, tl.load(x_ptr + offs + far))" in message
    assert "without a mask whose address depends on the program id" in message
    assert data["debug_relaunch"]["kernel_id"] == data["kernel_id"] and data["debug_relaunch"]["debug"] is True
    assert "launch_kernel with the same kernel_id, grid and args" in message
    await _next_launch_works(client)


def test_a_launch_crash_offers_the_debug_relaunch() -> None:
    from server.worker import WorkerDied, _fault

    kernel = {"kernel_name": "k", "kernel_id": "kabc", "unmasked_accesses": []}
    fault = _fault("crash", "launch", {"kernel": kernel}, WorkerDied(-11, "launch"))
    assert "(SIGSEGV)" in fault.message and "the same launch_kernel call with debug=true" in fault.message
    assert "No load or store without a mask has an address that depends on the program id" in fault.message
    assert fault.data["debug_relaunch"] == {"tool": "launch_kernel", "kernel_id": "kabc", "debug": True,
                                            "note": "the same grid and args as this call"}
    timeout = _fault("timeout", "launch", {"kernel": kernel}, TimeoutError(), 3.0)
    assert "debug_relaunch" not in timeout.data
