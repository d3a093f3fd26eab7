"""`anvil serve` as a real subprocess, driven by the official MCP Python SDK: stdio and streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from server.demo import VECTOR_ADD

pytestmark = pytest.mark.anyio

ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [300]},
    "y_ptr": {"shape": [300]},
    "out_ptr": {"shape": [300], "init": "empty"},
    "n": 300,
}


async def _session_works(session: ClientSession) -> None:
    await session.initialize()
    names = {t.name for t in (await session.list_tools()).tools}
    assert {"compile_kernel", "launch_kernel", "benchmark", "device_info"} <= names
    compiled = await session.call_tool("compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 128}})
    assert not compiled.isError and compiled.structuredContent
    kernel_id = compiled.structuredContent["kernel_id"]
    launched = await session.call_tool(
        "launch_kernel",
        {
            "kernel_id": kernel_id,
            "grid": ["cdiv(n, BLOCK)"],
            "args": ARGS,
            "reference": {"out_ptr": "x_ptr + y_ptr"},
        },
    )
    assert not launched.isError and launched.structuredContent and launched.structuredContent["passed"] is True
    broken = await session.call_tool("compile_kernel", {"source": "def f(:\n", "constexprs": {}})
    assert broken.isError


async def test_stdio_with_the_official_client() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve", "--prestart"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await _session_works(session)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_streamable_http_with_token() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "server",
            "serve",
            "--http",
            "--port",
            str(port),
            "--token",
            "s3cret",
            "--prestart",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        async with httpx.AsyncClient() as http:
            denied = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert denied.status_code == 401
            # DNS rebinding: another Host, or a web page's Origin, is refused even with the token
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
            accept = {"Accept": "application/json, text/event-stream", "Authorization": "Bearer s3cret"}
            welcomed = await http.post(url, json=init, headers=accept)
            assert welcomed.status_code == 200, welcomed.text[:200]
            for bad in ({"Host": f"evil.example:{port}"}, {"Origin": "http://evil.example"}):
                refused = await http.post(url, json=init, headers={**accept, **bad})
                assert refused.status_code in (403, 421), (bad, refused.status_code, refused.text[:200])
        headers = {"Authorization": "Bearer s3cret"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await _session_works(session)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
