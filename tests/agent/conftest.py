"""Scripted agent tasks: a task, the tool calls an agent makes for it through an MCP client, and checks
of what came back. One server (real worker processes, the CPU backend) for the whole session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP
from scripted import Agent

from server.app import create_app
from server.worker import ProcessExecutor
from tools.limits import Limits
from tools.runtime import Runtime


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-files")


@pytest.fixture(scope="session")
def runtime(work_dir: Path) -> Iterator[Runtime]:
    limits = Limits(launch_timeout_s=20.0, max_tensor_elements=1 << 22, compile_workers=1)
    rt = Runtime(limits=limits, executor=ProcessExecutor(limits), allowed_paths=[work_dir])
    rt.executor.prestart(["cpu"])  # type: ignore[attr-defined]
    yield rt
    rt.executor.close()


@pytest.fixture(scope="session")
def app(runtime: Runtime, work_dir: Path) -> FastMCP:
    return create_app(runtime, allowed_paths=[work_dir])


@pytest.fixture
async def agent(app: FastMCP) -> AsyncIterator[Agent]:
    async with Client(app) as client:
        yield Agent(client)
