"""References and baselines of launch_kernel and benchmark may be assignments then a value
(`m = x.amax(-1, keepdim=True); torch.exp(x - m)`): the same attacks as on generate_kernel's
expression, through those fields. Each ends in a clear tool error with no side effect, and the next
call works."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from test_sec_generate import CODE, STATEMENTS
from test_sec_tools import GOOD, assert_clear_error, call, next_call_works

pytestmark = pytest.mark.anyio


def _with_reference(text: str) -> dict[str, Any]:
    return GOOD | {"reference": {"out_ptr": text}}


@pytest.mark.parametrize("name", sorted(CODE))
async def test_no_code_runs_from_a_statement(client: Client, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    attack = CODE[name].format(marker=marker).replace("x", "x_ptr").replace("w", "y_ptr")
    for text in (f"h = {attack}; h + x_ptr", f"h = x_ptr + y_ptr\nz = {attack}\nh"):
        result, answer = await call(client, "launch_kernel", _with_reference(text))
        assert_clear_error(result, answer)
        assert "reference['out_ptr']" in answer  # the field is named
        assert not marker.exists()
    await next_call_works(client)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_only_assignments_then_a_value(client: Client, name: str) -> None:
    text, message = STATEMENTS[name]
    text = text.replace("x", "x_ptr").replace("w", "y_ptr") + "; x_ptr + y_ptr"
    result, answer = await call(client, "launch_kernel", _with_reference(text))
    assert_clear_error(result, answer)
    await next_call_works(client)


async def test_a_doubling_chain_is_refused_before_it_is_built(client: Client) -> None:
    """Each assignment uses the last one twice: written out, the value would have 2**16 nodes."""
    chain = "; ".join(["a0 = x_ptr + y_ptr"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 15)]) + "; a14"
    start = time.monotonic()
    for tool, args in (("launch_kernel", _with_reference(chain)), ("benchmark", GOOD | {"baseline": chain})):
        result, answer = await call(client, tool, args)
        assert_clear_error(result, answer, "syntax nodes")
    assert time.monotonic() - start < 15
    await next_call_works(client)


async def test_statements_check_a_launch_and_time_a_baseline(client: Client) -> None:
    text = "s = x_ptr + y_ptr\nd = s - y_ptr; d + y_ptr"
    result, answer = await call(client, "launch_kernel", _with_reference(text))
    assert not result.is_error and result.structured_content["passed"] is True, answer
    wrong = "s = x_ptr + y_ptr; s + 1"
    result, answer = await call(client, "launch_kernel", _with_reference(wrong))
    assert not result.is_error and result.structured_content["passed"] is False, answer
    bench = GOOD | {"baseline": "s = x_ptr * 1; s + y_ptr", "warmup_ms": 1, "rep_ms": 2}
    result, answer = await call(client, "benchmark", bench)
    assert not result.is_error and result.structured_content["baseline"]["n"] >= 1, answer


@pytest.mark.parametrize("name", ["import_call", "dunder_walk", "open", "torch_load", "inplace", "out_keyword"])
async def test_no_code_runs_from_a_baseline_setup(client: Client, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    attack = CODE[name].format(marker=marker).replace("x", "x_ptr").replace("w", "y_ptr")
    args = GOOD | {"baseline": "x_ptr + h", "baseline_setup": f"h = {attack}", "warmup_ms": 1, "rep_ms": 2}
    result, answer = await call(client, "benchmark", args)
    assert_clear_error(result, answer)
    assert "baseline_setup" in answer and not marker.exists()
    await next_call_works(client)


async def test_a_baseline_setup_is_held_to_the_size_limits(client: Client) -> None:
    args = GOOD | {"baseline": "x_ptr + h.sum()", "baseline_setup": "h = x_ptr.expand(2 ** 30, 1000)",
                   "warmup_ms": 1, "rep_ms": 2}
    start = time.monotonic()
    result, answer = await call(client, "benchmark", args)
    assert_clear_error(result, answer, "limit")
    assert time.monotonic() - start < 30
    await next_call_works(client)
