"""Every tool through an in-memory fastmcp client, including the error paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from server.app import INSTRUCTIONS, create_app
from server.demo import BROKEN, VECTOR_ADD
from server.resources import language_text
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio

N = 1000
ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [N]},
    "y_ptr": {"shape": [N]},
    "out_ptr": {"shape": [N], "init": "empty"},
    "n": N,
}
LAUNCH = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 256}, "grid": ["cdiv(n, BLOCK)"], "args": ARGS}


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    return await client.call_tool(tool, args, raise_on_error=False)


async def test_tools_schemas_and_instructions(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) >= {"compile_kernel", "launch_kernel", "benchmark", "device_info", "read_artifact"}
    for name in ("compile_kernel", "launch_kernel", "benchmark", "device_info", "read_artifact"):
        assert tools[name].outputSchema and tools[name].description
    props = tools["launch_kernel"].inputSchema["properties"]
    assert {"grid", "args", "kernel_id", "source", "reference", "atol", "rtol", "target"} <= set(props)
    assert len(INSTRUCTIONS.encode()) < 2048
    assert client.initialize_result is not None and client.initialize_result.instructions == INSTRUCTIONS


async def test_device_info(client: Client) -> None:
    result = await call(client, "device_info", {})
    assert not result.is_error, text(result)
    data = result.structured_content
    assert data["default_target"] == "cpu" and data["devices"][0]["kind"] == "cpu"
    assert data["devices"][0]["copy_gbps"] > 0 and "torch" in data["versions"]
    assert data["limits"]["launch_timeout_s"] > 0 and text(result).startswith("target 'auto' = cpu")
    verified = {t["target"]: t["verified_on_hardware"] for t in data["targets"]}
    assert verified["cuda:sm_90a"] and not any(verified[f"cuda:sm_{n}a"] for n in (100, 103, 120))


async def test_compile_cache_artifacts_and_paging(client: Client) -> None:
    args = {
        "source": VECTOR_ADD,
        "constexprs": {"BLOCK": 128},
        "artifacts": ["tir", "llir"],
        "artifact_lines": 2,
    }
    first = await call(client, "compile_kernel", args)
    assert not first.is_error, text(first)
    data = first.structured_content
    again = (await call(client, "compile_kernel", args)).structured_content
    assert again["kernel_id"] == data["kernel_id"] and again["cached"] is True
    assert text(first).splitlines()[0] == data["summary"] and json.loads(first.content[1].text) == data
    tir = data["artifacts"]["tir"]
    assert tir["start_line"] == 1 and tir["end_line"] == 2 and tir["total_lines"] > 2
    assert "read_artifact" in tir["next_page"] and "llir" in data["available_artifacts"]
    page = await call(client, "read_artifact", {"kernel_id": data["kernel_id"], "artifact": "tir", "start_line": 3})
    assert page.structured_content["start_line"] == 3
    resource = await client.read_resource(f"anvil://kernels/{data['kernel_id']}/tir?start=2&count=1")
    body = resource[0].text  # type: ignore[union-attr]
    assert body.splitlines()[0] == tir["text"].splitlines()[1] and "[lines 2-2 of" in body
    missing = await call(client, "read_artifact", {"kernel_id": data["kernel_id"], "artifact": "sass"})
    assert missing.is_error and "available:" in text(missing)


async def test_compile_error_is_located(client: Client) -> None:
    result = await call(client, "compile_kernel", {"source": BROKEN, "constexprs": {"BLOCK": 64}})
    assert result.is_error
    message = text(result)
    assert "<source>:10:" in message and "scale" in message and "^" in message
    diag = result.structured_content["diagnostics"][0]
    assert diag["line"] == 10 and diag["column"] > 0 and "x * scale" in diag["source_line"]


async def test_launch_passes_with_progress(client: Client) -> None:
    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    result = await client.call_tool(
        "launch_kernel", {**LAUNCH, "reference": {"out_ptr": "x_ptr + y_ptr"}}, progress_handler=progress
    )
    data = result.structured_content
    assert data["passed"] is True and data["grid"] == [4] and data["checks"]["out_ptr"]["mismatched"] == 0
    assert data["outputs"]["out_ptr"]["unwritten_count"] == 0 and "PASSED" in data["summary"]
    assert "launching" in seen and "checking outputs" in seen


async def test_launch_reference_mismatch_is_a_result(client: Client) -> None:
    result = await call(client, "launch_kernel", {**LAUNCH, "reference": {"out_ptr": "x_ptr - y_ptr"}})
    assert not result.is_error
    data = result.structured_content
    assert data["passed"] is False and data["checks"]["out_ptr"]["mismatched"] > 0
    assert data["checks"]["out_ptr"]["first_mismatch"]["index"] == [0] and "FAILED" in data["summary"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"args": {**ARGS, "x_ptr": {"shape": [N], "dtype": "float99"}}}, "dtype"),
        ({"args": {**ARGS, "x_ptr": {"shape": [N], "seeds": 3}}}, "seeds"),
        ({"args": {**ARGS, "x_ptr": {"shape": [N], "init": "gaussian"}}}, "init"),
        ({"args": {**ARGS, "x_ptr": {"shape": [1 << 21]}}}, "limit per tensor"),
        ({"grid": [1 << 30]}, "program instances"),
        ({"reference": {"out_ptr": "__import__('os').system('true')"}}, "'__import__' is not allowed"),
        ({"reference": {"out_ptr": "x_ptr.__class__.__mro__"}}, "'__mro__' is not allowed"),
        ({"reference": {"out_ptr": "torch.load('x')"}}, "torch.load is not an allowed function"),
        ({"reference": {"out_ptr": "x_ptr.storage()"}}, "tensor method 'storage' is not allowed"),
        ({"target": "tpu"}, "target must be"),
        ({"source": None, "kernel_id": "k404"}, "unknown kernel_id 'k404'"),
        ({"source_file": "/etc/passwd"}, "pass source or source_file"),
    ],
)
async def test_launch_errors(client: Client, change: dict[str, Any], message: str) -> None:
    args = {**LAUNCH, **change}
    result = await call(client, "launch_kernel", {k: v for k, v in args.items() if v is not None})
    assert result.is_error
    assert message in text(result)


async def test_source_file_inside_allowed_dirs(client: Client, kernel_dir: Path) -> None:
    path = kernel_dir / "add.py"
    path.write_text(VECTOR_ADD)
    ok = await call(client, "compile_kernel", {"source_file": str(path), "constexprs": {"BLOCK": 64}})
    assert not ok.is_error, text(ok)
    outside = await call(client, "compile_kernel", {"source_file": "/etc/hostname", "constexprs": {"BLOCK": 64}})
    assert outside.is_error and "outside the allowed directories" in text(outside)


async def test_benchmark(client: Client) -> None:
    result = await call(
        client,
        "benchmark",
        {**LAUNCH, "reference": {"out_ptr": "x_ptr + y_ptr"}, "baseline": "x_ptr + y_ptr", "warmup_ms": 2,
         "rep_ms": 10, "configs": [{"constexprs": {"BLOCK": 256}}, {"constexprs": {"BLOCK": 7}}]},
    )  # fmt: skip
    assert not result.is_error, text(result)
    data = result.structured_content
    good, bad = data["results"]
    assert good["timing"]["n"] >= 3 and good["passed"] is True and good["gbps"] > 0
    assert bad["error"] and "BLOCK" in json.dumps(bad) and data["best"] == 0
    assert data["speedup"] > 0 and data["baseline"]["median_us"] > 0 and "median" in data["summary"]
    too_long = await call(client, "benchmark", {**LAUNCH, "rep_ms": 9999, "warmup_ms": 2000})
    assert too_long.is_error and "limit" in text(too_long)


async def test_language_reference(client: Client) -> None:
    whole = await client.call_tool("language_reference", {})
    assert "# Language" in text(whole)
    section = await client.call_tool("language_reference", {"section": "tl.store"})
    assert "Stores a tile" in text(section) and "Loads" not in text(section)
    resource = await client.read_resource("anvil://docs/language")
    assert "tl.load" in resource[0].text  # type: ignore[union-attr]
    assert "not installed" in language_text(Path("/nonexistent/language.md"), None)


async def test_busy_gate(runtime: Runtime) -> None:
    tiny = create_app(Runtime(limits=runtime.limits.__class__(max_concurrent_calls=0), executor=runtime.executor))
    async with Client(tiny) as c:
        result = await call(c, "device_info", {})
    assert result.is_error and "server busy" in text(result)


async def test_concurrent_clients(app: Any) -> None:
    import anyio

    compiled = await _one_compile(app)
    launch = {**LAUNCH, "source": None, "kernel_id": compiled, "reference": {"out_ptr": "x_ptr + y_ptr"}}
    launch = {k: v for k, v in launch.items() if v is not None}
    failures: list[str] = []

    async def one_client() -> None:
        async with Client(app) as c:
            for i in range(6):
                tool, args = ("compile_kernel", LAUNCH_COMPILE) if i % 2 else ("launch_kernel", launch)
                result = await call(c, tool, args)
                if result.is_error:
                    failures.append(text(result))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one_client)
    assert failures == []


LAUNCH_COMPILE = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 256}}


async def _one_compile(app: Any) -> str:
    async with Client(app) as c:
        result = await call(c, "compile_kernel", LAUNCH_COMPILE)
        return str(result.structured_content["kernel_id"])
