"""Kernels whose programs wait for each other, sent as text through the tools: a wait no program can
end is stopped with a located error (the worker neither hangs nor dies), and the next call works."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Client
from test_sec_tools import assert_clear_error, call, next_call_works

pytestmark = pytest.mark.anyio

NEVER_RELEASED = """\
import triton
import triton.language as tl


@triton.jit
def hog_kernel(lock_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(out_ptr + pid, pid + 1)
"""
WAIT_LINE = 8

FLAG_NEVER_SET = """\
import triton
import triton.language as tl


@triton.jit
def stall_kernel(flag_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.load(flag_ptr + 1000000, volatile=True) == 0:
        pass
    tl.store(out_ptr + pid, pid + 1)
"""

CHAIN = """\
import triton
import triton.language as tl


@triton.jit
def chain_kernel(x_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.sum(tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)))
    if pid + 1 < tl.num_programs(0):
        while tl.atomic_cas(flag_ptr + pid + 1, 1, 1) != 1:
            pass
        s += tl.load(out_ptr + pid + 1)
    tl.store(out_ptr + pid, s)
    tl.atomic_xchg(flag_ptr + pid, 1)
"""


async def test_a_lock_never_released_is_stopped_and_located(client: Client) -> None:
    result, text = await call(client, "launch_kernel", {
        "source": NEVER_RELEASED, "grid": [16],
        "args": {"lock_ptr": {"shape": [1], "dtype": "int32", "init": "zeros"},
                 "out_ptr": {"shape": [16], "dtype": "int32", "init": "zeros"}}})  # fmt: skip
    # stopped by the wait timeout (the worker lives on), not by the launch timeout (the worker killed)
    assert_clear_error(result, text, "hog_kernel", "waits in the loop", f":{WAIT_LINE}:", "lock taken is released")
    await next_call_works(client)


async def test_a_flag_never_set_is_stopped_in_debug_mode_too(client: Client) -> None:
    args: dict[str, Any] = {"flag_ptr": {"shape": [4], "dtype": "int32", "init": "zeros"},
                            "out_ptr": {"shape": [4], "dtype": "int32", "init": "zeros"}}
    result, text = await call(client, "launch_kernel", {"source": FLAG_NEVER_SET, "grid": [4], "args": args,
                                                        "debug": True})
    assert result.is_error, text[:400]
    # debug mode bounds-checks the polled address first: an out-of-bounds read never returns process data
    assert "stall_kernel" in text and ("bounds" in text.lower() or "waits in the loop" in text), text[:600]
    result, text = await call(client, "launch_kernel", {"source": FLAG_NEVER_SET, "grid": [4], "args": {
        "flag_ptr": {"shape": [1000001], "dtype": "int32", "init": "zeros"}, "out_ptr": args["out_ptr"]}})
    assert_clear_error(result, text, "stall_kernel", "waits in the loop")
    await next_call_works(client)


async def test_programs_waiting_for_later_ones_finish(client: Client) -> None:
    n, block = 24, 16
    result, text = await call(client, "launch_kernel", {
        "source": CHAIN, "constexprs": {"BLOCK": block}, "grid": [n],
        "args": {"x_ptr": {"shape": [n * block]}, "flag_ptr": {"shape": [n], "dtype": "int32", "init": "zeros"},
                 "out_ptr": {"shape": [n], "init": "empty"}},
        "reference": {"out_ptr": f"x_ptr.view({n}, {block}).sum(1).flip(0).cumsum(0).flip(0)"}})  # fmt: skip
    assert not result.is_error, text[:600]
    assert result.structured_content["passed"] is True, text[:600]
