"""What an agent reads: tool descriptions that state the reference language and every result field,
consistent keys, readable summaries and progress, kernels findable by id, resources and prompts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastmcp import Client
from pydantic import BaseModel

from server.demo import VECTOR_ADD
from tools import models as m
from tools.reference import BUILTINS, NAMESPACES, TENSOR_METHODS

pytestmark = pytest.mark.anyio

N = 777
ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [N]}, "y_ptr": {"shape": [N]}, "out_ptr": {"shape": [N], "init": "empty"}, "n": N,
}  # fmt: skip
LAUNCH = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 128}, "grid": ["cdiv(n, BLOCK)"], "args": ARGS,
          "reference": {"out_ptr": "x_ptr + y_ptr"}}  # fmt: skip
RESULTS = {"compile_kernel": m.CompileResult, "launch_kernel": m.LaunchResult, "benchmark": m.BenchmarkResult,
           "device_info": m.DeviceInfo, "read_artifact": m.ArtifactPage, "list_kernels": m.KernelList}


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, text(result)
    return result


def _all_models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    from server.descriptions import _models_in

    seen.add(model)
    for info in model.model_fields.values():
        for nested in _models_in(info.annotation):
            if nested not in seen:
                _all_models(nested, seen)
    return seen


async def test_descriptions_state_every_result_field_and_the_reference_language(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    for name, model in RESULTS.items():
        description = tools[name].description or ""
        for nested in _all_models(model, set()):
            for field, info in nested.model_fields.items():
                assert info.description, f"{nested.__name__}.{field} has no description"
                assert re.search(rf"\b{field}: ", description), f"{name}'s description lacks {nested.__name__}.{field}"
    # generate_kernel lists its own fields and refers its nested results to the tools that return them
    generate = tools["generate_kernel"].description or ""
    from tools.generate.models import GeneratedLaunch, GenerateResult

    for nested in (GenerateResult, GeneratedLaunch):
        assert all(re.search(rf"\b{field}: ", generate) for field in nested.model_fields)
    for field, owner in (("compile", "compile_kernel"), ("check", "launch_kernel"), ("benchmark", "benchmark")):
        assert f"\n{field}: the " in generate and f"in {owner}'s description" in generate
    assert "Each TensorStats" not in generate and len(generate) < 6000, len(generate)
    launch = tools["launch_kernel"].description or ""
    for namespace, names in NAMESPACES.items():
        for fn in names:
            assert re.search(rf"\b{re.escape(fn)}\b", launch), f"{namespace}.{fn} is not listed"
    assert all(re.search(rf"\b{method}\b", launch) for method in TENSOR_METHODS | set(BUILTINS))


async def test_compile_ms_has_one_key_per_stage_and_asm_is_x86(client: Client) -> None:
    result = (await call(client, "compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 64},
                                                    "artifacts": ["asm", "source"]})).structured_content
    keys = set(result["compile_ms"])
    assert "total" in keys and not any(k.endswith("_ms") for k in keys), keys
    asm = result["artifacts"]["asm"]
    assert asm["total_lines"] > 20 and re.search(r"\b(vmov|mov|ret|vadd)\w*", asm["text"]) is not None
    assert result["artifacts"]["source"]["text"].splitlines()[5] == "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: " \
        "tl.constexpr):"
    assert {"source", "asm", "tir", "llir"} <= set(result["available_artifacts"])
    # a kernel compiled without it gets its assembly when it is read
    plain = (await call(client, "compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 32}}))
    kernel_id = plain.structured_content["kernel_id"]
    page = (await call(client, "read_artifact", {"kernel_id": kernel_id, "artifact": "asm"})).structured_content
    assert page["total_lines"] > 20 and page["name"] == "asm"


async def test_launch_echoes_the_signature_it_ran_with(client: Client) -> None:
    data = (await call(client, "launch_kernel", LAUNCH | {"args": ARGS | {"x_ptr": {"shape": [N], "dtype": "float16"}},
                                                          "atol": 1e-2, "rtol": 1e-2})).structured_content
    assert data["signature"] == {"x_ptr": "*fp16", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    assert data["constexprs"] == {"BLOCK": 128}
    head = "add_kernel(x_ptr: *fp16, y_ptr: *fp32, out_ptr: *fp32, n: i32, BLOCK=128) on cpu"
    assert data["summary"].startswith(head)


async def test_benchmark_reports_tflops_peak_runs_and_noise_with_readable_progress(client: Client) -> None:
    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    result = await client.call_tool(
        "benchmark", LAUNCH | {"flops": N, "warmup_ms": 1, "rep_ms": 1, "configs": [{"constexprs": {"BLOCK": 64}}]},
        progress_handler=progress, raise_on_error=False)
    assert not result.is_error, text(result)
    data = result.structured_content
    timing = data["results"][0]["timing"]
    assert timing["n"] >= 10 and timing["noise_pct"] is not None and timing["noise_pct"] >= 0
    assert re.search(r"TFLOP/s = [\d.]+% of the measured [\d.]+ TFLOP/s \w+ matmul peak", data["summary"])
    assert "GB/s" not in data["summary"] and f"n={timing['n']}, noise" in data["summary"]
    assert "config 1/1: timing add_kernel (BLOCK=64)" in seen, seen
    assert not any("{" in line for line in seen), seen
    plain = (await call(client, "benchmark", LAUNCH | {"warmup_ms": 1, "rep_ms": 1})).structured_content
    assert re.search(r"[\d.]+ GB/s = [\d.]+% of the measured [\d.]+ GB/s copy rate", plain["summary"])


async def test_kernels_are_listed_and_readable_by_id(client: Client) -> None:
    source = VECTOR_ADD.replace("add_kernel", "listed_add_kernel")
    compiled = (await call(client, "compile_kernel", {"source": source, "constexprs": {"BLOCK": 64}}))
    compiled = compiled.structured_content
    listing = (await call(client, "list_kernels", {"name": "listed_add"})).structured_content
    assert [k["kernel_id"] for k in listing["kernels"]] == [compiled["kernel_id"]]
    entry = listing["kernels"][0]
    assert entry["signature"]["x_ptr"] == "*fp32" and entry["constexprs"] == {"BLOCK": 64}
    page = (await call(client, "read_artifact", {"kernel_id": compiled["kernel_id"], "artifact": "source"}))
    assert page.structured_content["text"] == source.rstrip("\n")
    index = await client.read_resource("anvil://kernels")
    assert compiled["kernel_id"] in index[0].text  # type: ignore[union-attr]
    body = await client.read_resource(f"anvil://kernels/{compiled['kernel_id']}/source")
    assert "def listed_add_kernel" in body[0].text  # type: ignore[union-attr]


async def test_resources_and_prompts(client: Client) -> None:
    uris = {str(r.uri) for r in await client.list_resources()}
    assert {"anvil://docs/language", "anvil://docs/reference-expressions", "anvil://examples",
            "anvil://kernels"} <= uris
    templates = {t.uriTemplate for t in await client.list_resource_templates()}
    assert "anvil://examples/{name}" in templates
    index = (await client.read_resource("anvil://examples"))[0].text  # type: ignore[union-attr]
    assert "anvil://examples/vector_add" in index and "mcp_session" not in index
    example = (await client.read_resource("anvil://examples/vector_add"))[0].text  # type: ignore[union-attr]
    assert "def add_kernel" in example
    with pytest.raises(Exception, match="no example"):
        await client.read_resource("anvil://examples/..%2Fpyproject")
    reference = (await client.read_resource("anvil://docs/reference-expressions"))[0].text  # type: ignore[union-attr]
    assert "scaled_dot_product_attention" in reference
    prompts = {p.name: p for p in await client.list_prompts()}
    assert {"write_kernel", "check_kernel", "benchmark_kernel"} <= set(prompts)
    for prompt in prompts.values():  # plain strings, each described (not "Provide as a JSON string ...")
        for argument in prompt.arguments or []:
            assert argument.description and "JSON" not in argument.description, (prompt.name, argument)
    assert "torch expression" in next(a.description or "" for a in prompts["check_kernel"].arguments or []
                                      if a.name == "reference")
    written = await client.get_prompt("write_kernel", {"task": "row softmax", "reference": "torch.softmax(x, -1)"})
    body = written.messages[0].content.text  # type: ignore[union-attr]
    assert "row softmax" in body and "compile_kernel" in body and "torch.softmax(x, -1)" in body
    bench = await client.get_prompt("benchmark_kernel", {"kernel_id": "k1", "flops": "2e9"})
    assert "autotune=true" in bench.messages[0].content.text  # type: ignore[union-attr]
