"""The scripted agent of these tasks: an MCP client that checks each answer's shape and keeps a transcript."""

from __future__ import annotations

import json
from typing import Any

from fastmcp import Client


class Agent:
    """An MCP client that keeps a log of its calls, as an agent's transcript."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls: list[str] = []

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        """A call that must succeed; its structured result."""
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        self.calls.append(f"{tool} -> {text.splitlines()[0] if text else ''}")
        assert not result.is_error, f"{tool} failed:\n{text}\ncalls so far:\n" + "\n".join(self.calls)
        data = result.structured_content
        assert data is not None
        if "summary" in data:  # a one-line summary comes first
            assert data["summary"] == text.splitlines()[0]
        assert json.loads(result.content[-1].text) == data  # the JSON block says what the structure says
        return data

    async def fails(self, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
        """A call that must fail; its message and structured details."""
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        self.calls.append(f"{tool} -> error: {text.splitlines()[0] if text else ''}")
        assert result.is_error, f"{tool} was expected to fail, got: {text[:400]}\ncalls so far:\n" + "\n".join(
            self.calls)
        return text, dict(result.structured_content or {})
