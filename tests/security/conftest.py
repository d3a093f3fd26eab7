"""Fixtures of the security tests: canary secrets in the server's environment, a sandboxed compile child,
and an app with real worker processes whose limits are small enough that a bomb cannot hurt the machine."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP
from fuzzing import CANARY_SECRET, CANARY_TOKEN, CompileChild

from server.app import create_app
from server.worker import ProcessExecutor
from tools.limits import Limits
from tools.runtime import Runtime

# Set before any worker starts, so every process of the server holds the secrets an attack would look for.
os.environ["ANVIL_TOKEN"] = CANARY_TOKEN
os.environ["ANVIL_SECRET_CANARY"] = CANARY_SECRET
# A launch whose programs all wait forever is stopped well before the launch timeout below (test_sec_waits.py).
os.environ.setdefault("ANVIL_CPU_WAIT_TIMEOUT", "1.5")

SECURITY_LIMITS = Limits(
    launch_timeout_s=8.0,
    compile_timeout_s=20.0,
    max_tensor_elements=1 << 20,
    compile_workers=1,
    worker_memory_bytes=3 << 30,
    benchmark_time_s=1.0,
    benchmark_timeout_s=20.0,
    max_grid_programs=1 << 16,
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def child() -> Iterator[CompileChild]:
    proc = CompileChild(deadline_s=20.0)
    yield proc
    proc.kill()


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="session")
def runtime(kernel_dir: Path) -> Iterator[Runtime]:
    rt = Runtime(limits=SECURITY_LIMITS, executor=ProcessExecutor(SECURITY_LIMITS), allowed_paths=[kernel_dir])
    rt.executor.prestart(["cpu"])  # type: ignore[attr-defined]
    yield rt
    rt.executor.close()


@pytest.fixture(scope="session")
def app(runtime: Runtime, kernel_dir: Path) -> FastMCP:
    return create_app(runtime, allowed_paths=[kernel_dir])


@pytest.fixture
async def client(app: FastMCP) -> AsyncIterator[Client]:
    async with Client(app) as c:
        yield c
