"""generate_kernel through an in-memory MCP client and the server's worker processes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastmcp import Client

pytestmark = pytest.mark.anyio


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_schema_and_description(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    tool = tools["generate_kernel"]
    assert tool.outputSchema and {"source", "kernel_id", "launch", "check", "passed"} <= set(
        tool.outputSchema["properties"])
    assert {"expression", "args", "outputs", "benchmark", "target"} <= set(tool.inputSchema["properties"])
    assert tool.description and "F.{" in tool.description and "layer_norm" in tool.description


async def test_generate_then_launch_the_kernel_id(client: Client) -> None:
    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    result = await client.call_tool("generate_kernel", {
        "expression": "torch.log_softmax(x, dim=-1)", "args": {"x": {"shape": [9, 130]}}}, progress_handler=progress)
    data = result.structured_content
    assert data["passed"] is True and data["template"] == "rows" and "def log_softmax_kernel(" in data["source"]
    assert text(result).splitlines()[0] == data["summary"] and json.loads(result.content[1].text) == data
    assert any("compiling" in m for m in seen)
    launch = data["launch"]
    again = await client.call_tool("launch_kernel", {k: launch[k] for k in ("kernel_id", "grid", "args", "reference")})
    assert again.structured_content["passed"] is True


async def test_a_refusal_is_a_located_error(client: Client) -> None:
    result = await client.call_tool("generate_kernel", {"expression": "torch.cumsum(x, -1)",
                                                        "args": {"x": {"shape": [8]}}}, raise_on_error=False)
    assert result.is_error
    message = text(result)
    assert "torch.cumsum cannot be fused" in message and "^" in message
    # the nearest fusable names, not the whole list again (the description has it)
    assert "close names: torch.sum" in message and "description lists every function" in message
    assert "F.{" not in message and len(message) < 1200
    assert "by hand (the language has tl.cumsum)" in message and "reference=" in message
