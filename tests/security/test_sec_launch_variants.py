"""launch_kernel's `variants` (more argument sets in one call) and grid entries that read tensor shapes
come from a client: each abuse ends in a clear tool error, within the limits, and the next call works."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastmcp import Client
from test_sec_tools import GOOD, assert_clear_error, call, next_call_works

pytestmark = pytest.mark.anyio


def _sized(n: int) -> dict[str, Any]:
    return {"x_ptr": {"shape": [n]}, "y_ptr": {"shape": [n]}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n}


@pytest.mark.parametrize(("variants", "message"), [
    ([_sized(8)] * 9, "at most 8"),  # more sets than allowed
    ([{"__class__": 1}], "names '__class__', which args does not"),  # a name the kernel does not have
    ([_sized(1 << 31)], "limit"),  # a tensor past the per-call limits, in a variant
    ([{"n": 1 << 40}], "variants[0]"),  # a grid past the program limit, through a variant's scalar
    ([{"x_ptr": {"shape": [4], "init": "randn", "dtype": "not_a_dtype"}}], "dtype"),
    ("not a list", "list"),
])
async def test_hostile_variants_are_refused(client: Client, variants: Any, message: str) -> None:
    start = time.monotonic()
    result, text = await call(client, "launch_kernel", GOOD | {"variants": variants})
    assert_clear_error(result, text, message)
    assert time.monotonic() - start < 30
    await next_call_works(client)


@pytest.mark.parametrize(("grid", "message"), [
    ("x_ptr.shape[10 ** 100]", "unsupported syntax"),  # no ** in grids
    ("x_ptr.shape[1 << 70]", "unsupported syntax"),
    ("x_ptr.shape[99999999999]", "out of range"),
    ("x_ptr.shape.__class__", "unsupported syntax"),
    ("x_ptr.__class__.shape[0]", "unsupported syntax"),
    ("x_ptr.storage().shape[0]", "unsupported syntax"),
    ("n.shape[0]", "'n' is not a tensor argument"),
    ("x_ptr.shape[0] * x_ptr.shape[0] * x_ptr.shape[0] * x_ptr.shape[0]", "limit"),  # past the program limit
])
async def test_grid_shape_reads_are_bounded(client: Client, grid: str, message: str) -> None:
    result, text = await call(client, "launch_kernel", GOOD | {"grid": [grid]})
    assert_clear_error(result, text, message)
    await next_call_works(client)


SPIN = """\
import triton
import triton.language as tl


@triton.jit
def spin_kernel(out_ptr, n):
    acc = n * 0
    for i in range(n):
        acc = acc * 1103515245 + i
    tl.store(out_ptr, acc)
"""


async def test_variants_share_the_calls_launch_time(client: Client) -> None:
    """launch_timeout_s (8 s here) holds for a call: variants cannot each take it again."""
    out = {"out_ptr": {"shape": [1], "dtype": "int64", "init": "empty"}}
    probe = 1 << 32  # an i64 trip count: calibrate one launch's time
    result, text = await call(client, "launch_kernel", {"source": SPIN, "grid": [1], "args": {**out, "n": probe}})
    assert not result.is_error, text
    per_iteration_ms = result.structured_content["elapsed_ms"] / probe
    n = max(probe, int(3000 / per_iteration_ms))  # about 3 s a launch: 5 launches would take 15 s
    start = time.monotonic()
    result, text = await call(client, "launch_kernel", {"source": SPIN, "grid": [1], "args": {**out, "n": n},
                                                         "variants": [{"n": n + k} for k in range(1, 5)]})
    took = time.monotonic() - start
    assert result.is_error and ("launch_timeout_s" in text or "did not finish within" in text), text[:600]
    assert took < 8 + 5, f"the call ran {took:.1f} s, past its launch time"
    await next_call_works(client)
