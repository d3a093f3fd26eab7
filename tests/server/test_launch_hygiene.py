"""Tool launches are bounds-checked: an out-of-bounds access is this call's located error, never
a corrupted worker for the next caller, and a read past a tensor never returns other data."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fastmcp import Client

from tests.server.test_faults import _next_launch_works, text
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio

STORE_PAST = """\
import triton
import triton.language as tl


@triton.jit
def past_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + 7.0)
"""

READ_PAST = """\
import triton
import triton.language as tl


@triton.jit
def peek_kernel(x_ptr, y_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs + shift))
"""

FILL = """\
import triton
import triton.language as tl


@triton.jit
def fill_kernel(out_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + value, mask=offs < n)
"""

SWAPPED = """\
import triton
import triton.language as tl


@triton.jit
def swap_kernel(a_ptr, b_ptr, out_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = a_ptr
    for i in range(2):
        tl.store(out_ptr + offs, tl.load(p + offs + shift))
        p = b_ptr
"""


async def test_unmasked_store_past_a_small_tensor_is_that_calls_error(client: Client) -> None:
    n = random.randint(1, 16)
    result = await client.call_tool(
        "launch_kernel",
        {"source": STORE_PAST, "constexprs": {"BLOCK": 32}, "grid": [1],
         "args": {"out_ptr": {"shape": [n], "init": "zeros"}}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    data = result.structured_content
    assert data["error"] == "out_of_bounds" and data["kernel_name"] == "past_kernel"
    assert (data["tensor"], data["offset"], data["numel"]) == ("out_ptr", n, n)
    assert data["line"] == 8 and data["program_id"] == [0, 0, 0] and "tl.store" in data["source_line"]
    for _ in range(3):  # the same worker: nothing was written past the tensor
        await _next_launch_works(client)


async def _fill(client: Client, n: int, value: float) -> None:
    result = await client.call_tool(
        "launch_kernel",
        {"source": FILL, "constexprs": {"BLOCK": 1024}, "grid": ["cdiv(n, BLOCK)"],
         "args": {"out_ptr": {"shape": [n], "init": "empty"}, "n": n, "value": value}, "outputs": ["out_ptr"]},
        raise_on_error=False,
    )  # fmt: skip
    assert not result.is_error, text(result)
    assert result.structured_content["outputs"]["out_ptr"]["min"] == value


async def test_read_past_a_small_tensor_returns_no_other_data(client: Client) -> None:
    sentinel = float(random.randint(1000, 9999)) + 0.25
    await _fill(client, 1 << 20, sentinel)  # a big sentinel in the worker's heap, then freed
    for shift in (16, 64, random.randint(1 << 10, 1 << 16), -random.randint(1, 1 << 16)):
        result = await client.call_tool(
            "launch_kernel",
            {"source": READ_PAST, "constexprs": {"BLOCK": 16}, "grid": [1],
             "args": {"x_ptr": {"shape": [16], "init": "zeros"}, "y_ptr": {"shape": [16], "init": "empty"},
                      "shift": shift}, "outputs": ["y_ptr"]},
            raise_on_error=False,
        )  # fmt: skip
        assert result.is_error, f"shift {shift}: {text(result)}"
        assert str(sentinel) not in text(result)
        data = result.structured_content
        assert data["error"] == "out_of_bounds" and data["tensor"] == "x_ptr" and data["line"] == 8
    await _next_launch_works(client)


async def test_pointer_of_no_single_tensor_stays_inside_the_tensors(client: Client) -> None:
    call: dict[str, Any] = {
        "source": SWAPPED, "constexprs": {"BLOCK": 16}, "grid": [1],
        "args": {"a_ptr": {"shape": [16]}, "b_ptr": {"shape": [16]}, "out_ptr": {"shape": [16], "init": "empty"},
                 "shift": 0},
        "reference": {"out_ptr": "b_ptr"},
    }  # fmt: skip
    ok = await client.call_tool("launch_kernel", call, raise_on_error=False)
    assert not ok.is_error and ok.structured_content["passed"] is True, text(ok)
    call["args"]["shift"] = 1 << 20
    result = await client.call_tool("launch_kernel", call, raise_on_error=False)
    assert result.is_error and result.structured_content["error"] == "out_of_bounds", text(result)
    assert "no single tensor" in text(result)  # it names the nearest tensor, and says that it does


async def test_benchmark_checks_before_timing(client: Client) -> None:
    n = random.randint(1, 16)
    result = await client.call_tool(
        "benchmark",
        {"source": STORE_PAST, "constexprs": {"BLOCK": 32}, "grid": [1], "warmup_ms": 1, "rep_ms": 1,
         "cache": "warm", "args": {"out_ptr": {"shape": [n], "init": "zeros"}}},
        raise_on_error=False,
    )  # fmt: skip
    assert result.is_error
    data = result.structured_content
    assert data["error"] == "out_of_bounds" and (data["tensor"], data["offset"]) == ("out_ptr", n)
    await _next_launch_works(client)


TURNS = """\
import triton
import triton.language as tl


@triton.jit
def turns_kernel(x_ptr, c_ptr, out_ptr, OFF, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    cnt = tl.atomic_add(c_ptr, 1)
    o = tl.where(cnt > 0, OFF, 0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + o))
"""


async def test_a_kernel_that_turns_after_its_checked_runs_leaks_nothing(client: Client, runtime: Runtime) -> None:
    """An atomic counter in an input lets a kernel behave in the benchmark's timed (unchecked) runs as it
    did not in the checked ones: nothing it read is reported, and its worker is replaced after the call."""
    call: dict[str, Any] = {
        "source": TURNS, "constexprs": {"BLOCK": 16}, "grid": [1], "warmup_ms": 1, "rep_ms": 5,
        "args": {"x_ptr": {"shape": [16], "init": "randn", "seed": random.randint(0, 1 << 30)},
                 "c_ptr": {"shape": [1], "dtype": "int32", "init": "zeros"},
                 "out_ptr": {"shape": [16], "init": "empty"}, "OFF": random.choice([1 << 12, -(1 << 12)])},
        "reference": {"out_ptr": "x_ptr"},
    }  # fmt: skip
    await _next_launch_works(client)
    before = runtime.executor.devices["cpu"].process.pid  # type: ignore[attr-defined]
    result = await client.call_tool("benchmark", call, raise_on_error=False)
    assert runtime.executor.devices["cpu"].process.pid != before  # type: ignore[attr-defined]
    if result.is_error:  # the unchecked read hit unmapped memory: the worker died, the call says why
        assert result.structured_content["error"] == "crash" and "unchecked" in text(result)
    else:
        config = result.structured_content["results"][0]
        assert config["passed"] is False and "differ from the checked run" in config["error"]
        check = config["checks"]["out_ptr"]  # from the checked run: x itself, nothing from past it
        assert check["passed"] is True and check["first_mismatch"] is None and check["max_abs_error"] == 0
        assert result.structured_content["best"] is None
    await _next_launch_works(client)
