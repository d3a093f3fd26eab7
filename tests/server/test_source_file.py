"""source_file through an in-memory fastmcp client: refused without allowed directories, clear errors, no stall."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from server.app import ALLOWED_PATHS_ENV, create_app
from server.demo import VECTOR_ADD
from tools.limits import Limits
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _compile(app: Any, source_file: str, tool: str = "compile_kernel") -> str:
    async with Client(app) as client:
        args: dict[str, Any] = {"source_file": source_file, "constexprs": {"BLOCK": 64}}
        if tool in ("launch_kernel", "benchmark"):
            args |= {"grid": [1], "args": {"x_ptr": {"shape": [4]}, "y_ptr": {"shape": [4]},
                                           "out_ptr": {"shape": [4]}, "n": 4}}  # fmt: skip
        result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error
    message = text(result)
    assert "Errno" not in message and "Traceback" not in message, message
    return message


async def test_without_allowed_dirs_source_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWED_PATHS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "add.py").write_text(VECTOR_ADD)
    app = create_app(Runtime())
    for tool in ("compile_kernel", "launch_kernel", "benchmark"):
        message = await _compile(app, "add.py", tool)
        assert "--allow-path" in message and ALLOWED_PATHS_ENV in message, message


async def test_bad_source_files(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_bytes(b"#" * 2049)
    with open(tmp_path / "huge.py", "wb") as f:
        f.truncate(1_500_000_000)
    os.mkfifo(tmp_path / "pipe.py")
    app = create_app(Runtime(limits=Limits(max_source_bytes=2048), allowed_paths=[tmp_path]))
    start = time.perf_counter()
    assert "the limit (max_source_bytes) is 2048" in await _compile(app, "huge.py")
    assert time.perf_counter() - start < 2.0  # refused by its size, not read
    assert "the limit (max_source_bytes) is 2048" in await _compile(app, "big.py")
    assert "FIFO" in await _compile(app, "pipe.py")
    assert "NUL byte" in await _compile(app, "add\x00.py")
    assert "at most 255 bytes" in await _compile(app, "k" * 1000 + ".py")
    assert "is a directory" in await _compile(app, str(tmp_path))
    assert "outside the allowed directories" in await _compile(app, "../../etc/passwd")
