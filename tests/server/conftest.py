"""One app with real worker processes for the whole session (workers take seconds to start)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP

from server.app import create_app
from server.worker import ProcessExecutor
from tools.limits import Limits
from tools.runtime import Runtime

LAUNCH_TIMEOUT_S = 10.0  # a first launch compiles the checked binary in the device worker; loaded machines need it


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernels")


@pytest.fixture(scope="session")
def runtime(kernel_dir: Path) -> Iterator[Runtime]:
    limits = Limits(launch_timeout_s=LAUNCH_TIMEOUT_S, max_tensor_elements=1 << 20, compile_workers=1)
    rt = Runtime(limits=limits, executor=ProcessExecutor(limits), allowed_paths=[kernel_dir])
    rt.executor.prestart(["cpu"])  # type: ignore[attr-defined]
    yield rt
    rt.executor.close()


@pytest.fixture(scope="session")
def app(runtime: Runtime, tmp_path_factory: pytest.TempPathFactory) -> FastMCP:
    docs = tmp_path_factory.mktemp("docs") / "language.md"
    docs.write_text("# Language\n\nIntro.\n\n## tl.load\n\nLoads a tile.\n\n## tl.store\n\nStores a tile.\n")
    return create_app(runtime, docs_path=docs)


@pytest.fixture
async def client(app: FastMCP) -> AsyncIterator[Client]:
    async with Client(app) as c:
        yield c
