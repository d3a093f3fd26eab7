"""A scripted MCP session with Anvil, in-process (no subprocess): compile, launch, benchmark.

    python examples/mcp_session.py

Uses fastmcp's in-memory client against the same app ``anvil serve`` runs, with worker processes
for compiling and launching. ``anvil demo`` does the same over stdio with the official MCP SDK.
"""

from __future__ import annotations

import anyio
from fastmcp import Client

from server.app import create_app
from server.demo import ADD_ARGS, VECTOR_ADD


async def main() -> None:
    async with Client(create_app()) as client:
        compiled = await client.call_tool("compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 1024}})
        print(compiled.structured_content["summary"])
        kernel_id = compiled.structured_content["kernel_id"]
        launch = {"kernel_id": kernel_id, "grid": ["cdiv(n, BLOCK)"], "args": ADD_ARGS,
                  "reference": {"out_ptr": "x_ptr + y_ptr"}}  # fmt: skip
        launched = await client.call_tool("launch_kernel", launch)
        print(launched.structured_content["summary"])
        timed = await client.call_tool("benchmark", {**launch, "baseline": "x_ptr + y_ptr"})
        print(timed.structured_content["summary"])


if __name__ == "__main__":
    anyio.run(main)
