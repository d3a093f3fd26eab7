"""A representative subset of the attacks against ``anvil serve`` over stdio, with the official MCP client.

The server runs with canary secrets in its environment and without --allow-path; no text of any answer
may hold a canary, an attack must leave no file, and the next valid call must work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fuzzing import INTERNAL_ERROR_MARKS, REPO, canary_env, leaked
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from test_sec_frontend import CODE_EXECUTION, kernel
from test_sec_tools import GOOD, OOB_STORE

pytestmark = pytest.mark.anyio


def _text(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    if result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent))
    return "\n".join(parts)


async def test_attacks_over_stdio(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    env = canary_env()
    env.pop("ANVIL_ALLOWED_PATHS", None)
    env["PYTHONPATH"] = str(REPO)
    params = StdioServerParameters(command=sys.executable, args=["-m", "server", "serve"], env=env, cwd=str(REPO))
    attacks: list[tuple[str, str, dict[str, Any]]] = [
        (name, "compile_kernel", {"source": kernel(CODE_EXECUTION[name].format(marker=marker)),
                                  "kernel_name": "attack_kernel", "constexprs": {"BLOCK": 16}})
        for name in ("issue_payload", "static_assert_environ", "format_walk", "globals_builtins")
    ]
    attacks += [
        ("string_bomb", "compile_kernel", {"source": kernel('x = "A" * (1 << 32)'), "kernel_name": "attack_kernel",
                                           "constexprs": {"BLOCK": 16}}),
        ("oob_store", "launch_kernel", {"source": OOB_STORE, "constexprs": {"BLOCK": 32}, "grid": [1],
                                        "args": {"out_ptr": {"shape": [16], "init": "zeros"}}}),
        ("reference_keywords", "launch_kernel", {**GOOD, "reference": {
            "out_ptr": "torch.eye(n=40000, m=40000)[0, :1].sum() + x_ptr"}}),
        ("no_allow_path", "compile_kernel", {"source_file": "server/demo.py", "constexprs": {"BLOCK": 16}}),
        ("nul_path", "compile_kernel", {"source_file": "a\x00b.py", "constexprs": {"BLOCK": 16}}),
    ]
    problems: list[str] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, tool, args in attacks:
            result = await session.call_tool(tool, args)
            text = _text(result)
            if leaked(text):
                problems.append(f"{name}: the answer holds a canary secret")
            if not result.isError:
                problems.append(f"{name}: no error: {text[:200]}")
            problems += [f"{name}: {mark!r} in the answer: {text[:200]}" for mark in INTERNAL_ERROR_MARKS
                         if mark in text]
            if marker.exists():
                problems.append(f"{name}: created {marker}")
                marker.unlink()  # so that each later attack is judged on its own
            good = await session.call_tool("launch_kernel", GOOD)
            if good.isError or not (good.structuredContent or {}).get("passed"):
                problems.append(f"{name}: the next valid launch failed: {_text(good)[:200]}")
    assert not problems, "\n".join(problems)
