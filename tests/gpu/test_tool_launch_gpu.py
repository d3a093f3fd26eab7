"""Tool launches on an NVIDIA GPU (target cuda) through the MCP server: debug=true and the
always-on bounds checks give the located report (kernel, line, program id, offset), the access is
not performed, and the next launch in the same worker passes."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import torch
from fastmcp import Client, FastMCP

from server.app import create_app
from server.worker import ProcessExecutor
from tests.server.test_faults import GOOD, text
from tests.server.test_launch_debug import UNMASKED_STORE
from tools.limits import Limits
from tools.runtime import Runtime

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]

BLOCK = 16


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def gpu_app() -> Iterator[FastMCP]:
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    limits = Limits(launch_timeout_s=60.0, compile_workers=1)
    rt = Runtime(limits=limits, executor=ProcessExecutor(limits))
    yield create_app(rt)
    rt.executor.close()


@pytest.fixture
async def client(gpu_app: FastMCP) -> AsyncIterator[Client]:
    async with Client(gpu_app) as c:
        yield c


def _store_call(n: int, **extra: Any) -> dict[str, Any]:
    return {"source": UNMASKED_STORE, "constexprs": {"BLOCK": BLOCK}, "grid": [3], "target": "cuda",
            "args": {"out_ptr": {"shape": [n], "init": "zeros"}}, **extra}  # fmt: skip


def _assert_located(result: Any, n: int) -> None:
    assert result.is_error, text(result)
    data = result.structured_content
    assert data["error"] == "out_of_bounds" and data["kernel_name"] == "fill_kernel", text(result)
    assert data["line"] == 8 and data["source_line"] == "tl.store(out_ptr + offs, 1.0)"
    assert data["program_id"] == [2, 0, 0]
    assert (data["tensor"], data["offset"], data["numel"]) == ("out_ptr", n, n)
    assert "fill_kernel" in text(result) and "program id (2, 0, 0)" in text(result)


async def _next_launch_works(client: Client) -> None:
    result = await client.call_tool("launch_kernel", {**GOOD, "target": "cuda"}, raise_on_error=False)
    assert not result.is_error and result.structured_content["passed"] is True, text(result)


@pytest.mark.parametrize("debug", [True, None])
async def test_gpu_launch_out_of_bounds_is_located(client: Client, debug: bool | None) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    result = await client.call_tool("launch_kernel", _store_call(n, debug=debug), raise_on_error=False)
    _assert_located(result, n)
    await _next_launch_works(client)


async def test_gpu_kernel_compiled_with_debug(client: Client) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    compiled = await client.call_tool(
        "compile_kernel", {"source": UNMASKED_STORE, "constexprs": {"BLOCK": BLOCK}, "debug": True,
                           "target": "cuda", "signature": {"out_ptr": "*fp32"}}, raise_on_error=False,
    )  # fmt: skip
    assert not compiled.is_error, text(compiled)
    call = _store_call(n, kernel_id=compiled.structured_content["kernel_id"])
    del call["source"], call["constexprs"]
    _assert_located(await client.call_tool("launch_kernel", call, raise_on_error=False), n)
    await _next_launch_works(client)


async def test_gpu_benchmark_checks_before_timing(client: Client) -> None:
    n = 2 * BLOCK + random.randint(1, BLOCK - 1)
    call = _store_call(n, warmup_ms=1, rep_ms=1, input_sets=1, cache="warm")
    _assert_located(await client.call_tool("benchmark", call, raise_on_error=False), n)
    await _next_launch_works(client)
