"""debug through the tools: compile_kernel, launch_kernel and benchmark give the located report."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fastmcp import Client

from tests.server.test_faults import _next_launch_works, text

pytestmark = pytest.mark.anyio

BLOCK = 16

UNMASKED_STORE = """\
import triton
import triton.language as tl


@triton.jit
def fill_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)
"""

SHIFTED_LOAD = """\
import triton
import triton.language as tl


@triton.jit
def shift_kernel(x_ptr, y_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + shift)
    tl.store(y_ptr + offs, x)
"""

ASSERTS = """\
import triton
import triton.language as tl


@triton.jit
def positive_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.device_assert(tl.load(x_ptr + offs) > 0, "x must be positive")
"""


def _store_call(n: int, **extra: Any) -> dict[str, Any]:
    return {"source": UNMASKED_STORE, "constexprs": {"BLOCK": BLOCK}, "grid": [3],
            "args": {"out_ptr": {"shape": [n], "init": "zeros"}}, **extra}  # fmt: skip


def _assert_store_report(result: Any, n: int) -> None:
    assert result.is_error
    data = result.structured_content
    message = text(result)
    assert data["error"] == "out_of_bounds" and data["kernel_name"] == "fill_kernel"
    assert (data["line"], data["column"]) == (8, 5) and data["source_line"] == "tl.store(out_ptr + offs, 1.0)"
    assert data["program_id"] == [2, 0, 0]
    assert (data["tensor"], data["offset"], data["numel"]) == ("out_ptr", n, n)
    assert "fill_kernel" in message and ":8:5" in message and "program id (2, 0, 0)" in message
    assert f"offset {n} of 'out_ptr'" in message and "tl.store(out_ptr + offs, 1.0)" in message
    assert "crashed" not in message


async def test_launch_with_debug_locates_the_store(client: Client) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    result = await client.call_tool("launch_kernel", _store_call(n, debug=True), raise_on_error=False)
    _assert_store_report(result, n)
    await _next_launch_works(client)


async def test_kernel_compiled_with_debug_is_launched_with_it(client: Client) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    compiled = await client.call_tool(
        "compile_kernel", {"source": UNMASKED_STORE, "constexprs": {"BLOCK": BLOCK}, "debug": True,
                           "signature": {"out_ptr": "*fp32"}}, raise_on_error=False,
    )  # fmt: skip
    assert not compiled.is_error, text(compiled)
    call = _store_call(n, kernel_id=compiled.structured_content["kernel_id"])
    del call["source"], call["constexprs"]
    result = await client.call_tool("launch_kernel", call, raise_on_error=False)
    _assert_store_report(result, n)
    assert result.structured_content["kernel_id"] == compiled.structured_content["kernel_id"]
    await _next_launch_works(client)


async def test_benchmark_with_debug_locates_the_store(client: Client) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    call = _store_call(n, debug=True, warmup_ms=1, rep_ms=1, input_sets=1, cache="warm")
    result = await client.call_tool("benchmark", call, raise_on_error=False)
    _assert_store_report(result, n)
    await _next_launch_works(client)


async def test_out_of_bounds_load_is_located(client: Client) -> None:
    shift = random.randint(1, 1000)
    result = await client.call_tool(
        "launch_kernel",
        {"source": SHIFTED_LOAD, "constexprs": {"BLOCK": BLOCK}, "grid": [1], "debug": True,
         "args": {"x_ptr": {"shape": [BLOCK]}, "y_ptr": {"shape": [BLOCK], "init": "empty"}, "shift": shift}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    data = result.structured_content
    assert data["error"] == "out_of_bounds" and data["line"] == 8
    assert data["source_line"] == "x = tl.load(x_ptr + offs + shift)"
    assert (data["tensor"], data["offset"]) == ("x_ptr", BLOCK if shift < BLOCK else shift)


async def test_failed_device_assert_is_located(client: Client) -> None:
    result = await client.call_tool(
        "launch_kernel",
        {"source": ASSERTS, "constexprs": {"BLOCK": BLOCK}, "grid": [1], "debug": True,
         "args": {"x_ptr": {"shape": [BLOCK], "init": "zeros"}}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    data = result.structured_content
    assert data["error"] == "device_assert" and data["kernel_name"] == "positive_kernel"
    assert data["line"] == 8 and "tl.device_assert" in data["source_line"] and data["program_id"] == [0, 0, 0]
    await _next_launch_works(client)
