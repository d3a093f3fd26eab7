"""quantize_weights on small synthetic safetensors files: layouts, configs, reports, paths."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tools.errors import ToolInputError
from tools.quantize import dequantize_tensors, quantize_weights
from tools.quantize.awq import int4_fake_quant

H, I = 128, 256  # noqa: E741


def _model() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    t = {
        "embed_tokens.weight": torch.randn(40, H, generator=g),
        "layers.0.input_layernorm.weight": torch.rand(H, generator=g) + 0.5,
        "layers.0.self_attn.q_proj.weight": torch.randn(H, H, generator=g) * 0.05,
        "layers.0.self_attn.q_proj.bias": torch.randn(H, generator=g),
        "layers.0.mlp.up_proj.weight": (torch.randn(I, H, generator=g) * 0.05).to(torch.bfloat16),
        "layers.0.mlp.down_proj.weight": torch.randn(H, I, generator=g) * 0.05,
        "layers.0.odd.weight": torch.randn(20, 100, generator=g),  # no format but fp8 can store it
        "position_ids": torch.arange(16).reshape(1, 16),
    }
    return t


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    p = tmp_path / "model.safetensors"
    save_file(_model(), str(p), metadata={"format": "pt", "origin": "test"})
    return p


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())  # noqa: SIM118


LAYOUTS = {
    ("fp8_e4m3", None): {"weight": (torch.float8_e4m3fn, lambda n, k: (n, k)),
                         "weight_scale": (torch.float32, lambda n, k: ())},
    ("fp8_e5m2", "channel"): {"weight": (torch.float8_e5m2, lambda n, k: (n, k)),
                              "weight_scale": (torch.float32, lambda n, k: (n, 1))},
    ("fp8_e4m3", "block"): {"weight": (torch.float8_e4m3fn, lambda n, k: (n, k)),
                            "weight_scale_inv": (torch.float32, lambda n, k: (-(-n // 128), -(-k // 128)))},
    ("int4_awq", None): {"qweight": (torch.int32, lambda n, k: (k, n // 8)),
                         "qzeros": (torch.int32, lambda n, k: (k // 128, n // 8)),
                         "scales": (torch.float16, lambda n, k: (k // 128, n))},
    ("nvfp4", None): {"weight": (torch.uint8, lambda n, k: (n, k // 2)),
                      "weight_scale": (torch.float8_e4m3fn, lambda n, k: (n, k // 16)),
                      "weight_scale_2": (torch.float32, lambda n, k: ())},
    ("mxfp4", None): {"weight_packed": (torch.uint8, lambda n, k: (n, k // 2)),
                      "weight_scale": (torch.uint8, lambda n, k: (n, k // 32))},
}


@pytest.mark.parametrize(("fmt", "scheme"), list(LAYOUTS))
def test_layouts_configs_and_reports(model_file: Path, tmp_path: Path, fmt: str, scheme: str | None) -> None:
    out = tmp_path / "q.safetensors"
    calls: list[tuple[int, int, str]] = []
    res = quantize_weights(str(model_file), fmt, str(out), scheme=scheme, allowed_dirs=[tmp_path],
                           progress=lambda d, t, m: calls.append((d, t, m)))
    src = _model()
    got, meta = _read(out)
    assert meta["origin"] == "test" and meta["quantization"] == fmt
    quantized = {r.name for r in res.tensors}
    expect = {"layers.0.self_attn.q_proj.weight", "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight"}
    if fmt.startswith("fp8"):
        expect.add("layers.0.odd.weight")
    assert quantized == expect
    assert {s.name for s in res.skipped} >= {"embed_tokens.weight"}
    for name, t in src.items():  # unquantized tensors are copied bit for bit
        if name not in quantized:
            assert torch.equal(got[name], t)
    for rep in res.tensors:
        n, k = rep.shape
        base = rep.name[: -len("weight")]
        parts = {}
        for suffix, (dtype, shape) in LAYOUTS[(fmt, scheme)].items():
            t = got[base + suffix]
            assert t.dtype == dtype and tuple(t.shape) == shape(n, k), (base + suffix, t.dtype, t.shape)
            parts[suffix] = t
        assert rep.name not in got or fmt in ("fp8_e4m3", "fp8_e5m2", "nvfp4")
        # What a loader rebuilds from the file gives the reported error.
        w = src[rep.name].float()
        wd = dequantize_tensors(fmt, parts)
        sqnr = 20 * math.log10(float(w.norm() / (w - wd).norm()))
        assert rep.sqnr_db is not None and abs(sqnr - rep.sqnr_db) < 1e-3
        assert rep.bytes_before == w.numel() * src[rep.name].element_size()
        assert rep.bytes_after == sum(p.numel() * p.element_size() for p in parts.values())
        assert 0.9 < rep.cosine <= 1.0 and rep.max_abs_error > 0
    cfg = json.loads(Path(res.config_path).read_text())
    assert cfg == res.quantization_config
    method = {"fp8_e4m3": "fp8", "fp8_e5m2": "compressed-tensors", "int4_awq": "awq", "nvfp4": "modelopt",
              "mxfp4": "compressed-tensors"}[fmt]
    assert cfg["quant_method"] == method
    if fmt == "int4_awq":
        assert cfg | {"modules_to_not_convert": None} == {"quant_method": "awq", "zero_point": True,
                                                         "group_size": 128, "bits": 4, "version": "gemm",
                                                         "modules_to_not_convert": None}
        assert "layers.0.odd" in cfg["modules_to_not_convert"]
    if scheme == "block":
        assert cfg["weight_block_size"] == [128, 128]
    o = res.overall
    assert o.tensors_quantized == len(res.tensors) and o.file_bytes_after < o.file_bytes_before
    assert o.sqnr_db is not None and min(r.sqnr_db or 99 for r in res.tensors) <= o.sqnr_db
    assert calls[-1][0] == calls[-1][1] == len(res.tensors)
    assert fmt in res.summary and str(out) in res.summary


def test_never_overwrites_unless_asked(model_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "q.safetensors"
    out.write_bytes(b"keep me")
    with pytest.raises(ToolInputError, match="overwrite"):
        quantize_weights(str(model_file), "nvfp4", str(out), allowed_dirs=[tmp_path])
    assert out.read_bytes() == b"keep me"
    res = quantize_weights(str(model_file), "nvfp4", str(out), allowed_dirs=[tmp_path], overwrite=True)
    assert res.output_path == str(out) and out.stat().st_size > 100
    with pytest.raises(ToolInputError, match="overwrite"):  # the config exists now too
        quantize_weights(str(model_file), "nvfp4", str(tmp_path / "q.safetensors"), allowed_dirs=[tmp_path])


def test_paths_stay_inside_allowed_dirs(model_file: Path, tmp_path: Path) -> None:
    inner = tmp_path / "allowed"
    inner.mkdir()
    (inner / "m.safetensors").write_bytes(model_file.read_bytes())
    ok = dict(allowed_dirs=[inner])
    with pytest.raises(ToolInputError, match="outside the allowed"):
        quantize_weights(str(model_file), "fp8_e4m3", str(inner / "o.safetensors"), **ok)
    with pytest.raises(ToolInputError, match="outside the allowed"):
        quantize_weights(str(inner / ".." / "model.safetensors"), "fp8_e4m3", str(inner / "o.safetensors"), **ok)
    with pytest.raises(ToolInputError, match="outside the allowed"):
        quantize_weights(str(inner / "m.safetensors"), "fp8_e4m3", str(inner / ".." / "o.safetensors"), **ok)
    os.symlink(model_file, inner / "link.safetensors")
    with pytest.raises(ToolInputError, match="outside the allowed"):
        quantize_weights(str(inner / "link.safetensors"), "fp8_e4m3", str(inner / "o.safetensors"), **ok)
    os.symlink(tmp_path, inner / "escape")
    with pytest.raises(ToolInputError, match="outside the allowed"):
        quantize_weights(str(inner / "m.safetensors"), "fp8_e4m3", str(inner / "escape" / "o.safetensors"), **ok)
    assert not (tmp_path / "o.safetensors").exists()
    # Relative paths are taken inside the first allowed directory.
    res = quantize_weights("m.safetensors", "fp8_e4m3", "o.safetensors", **ok)
    assert res.output_path == str((inner / "o.safetensors").resolve())


def test_bad_requests(model_file: Path, tmp_path: Path) -> None:
    ok = dict(allowed_dirs=[tmp_path])
    out = str(tmp_path / "o.safetensors")
    for kwargs, match in [
        (dict(format="int8"), "unknown format"),
        (dict(format="fp8_e4m3", scheme="group"), "not an fp8 scheme"),
        (dict(format="int4_awq", scheme="block"), "fp8 formats only"),
        (dict(format="nvfp4", group_size=32), "fixed block size"),
        (dict(format="int4_awq", group_size=100), "power of two"),
        (dict(format="int4_awq", tensors=["nothing*"]), "no tensor was quantized"),
    ]:
        with pytest.raises(ToolInputError, match=match):
            quantize_weights(str(model_file), output_path=out, **ok, **kwargs)  # type: ignore[arg-type]
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(ToolInputError, match="not a readable"):
        quantize_weights(str(tmp_path / "junk.safetensors"), "fp8_e4m3", out, **ok)


def test_patterns(model_file: Path, tmp_path: Path) -> None:
    res = quantize_weights(str(model_file), "fp8_e4m3", str(tmp_path / "o.safetensors"), allowed_dirs=[tmp_path],
                           tensors=["*proj*", "!*down*", "embed*"])
    assert {r.name for r in res.tensors} == {"layers.0.self_attn.q_proj.weight", "layers.0.mlp.up_proj.weight",
                                             "embed_tokens.weight"}


def test_tensor_sources() -> None:
    w = torch.randn(64, 256)
    res = quantize_weights(w, "int4_awq", None)
    assert res.output_path is None and res.config_path is None
    assert res.tensors[0].name == "weight" and res.tensors[0].stored_as["qweight"] == "int32 [256, 8]"
    sqnr = 20 * math.log10(float(w.norm() / (w - int4_fake_quant(w, 128)).norm()))
    assert abs(res.tensors[0].sqnr_db - sqnr) < 1e-3
    spec = quantize_weights({"shape": [32, 64], "dtype": "bf16", "init": "randn", "seed": 3}, "mxfp4", None)
    assert spec.tensors[0].dtype == "bfloat16" and spec.overall.sqnr_db > 15
    with pytest.raises(ToolInputError, match="output_path is required"):
        quantize_weights("x.safetensors", "mxfp4", None)


def test_awq_with_calibration_folds_and_beats_plain_rounding(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(2)
    src = {
        "model.layers.0.input_layernorm.weight": torch.rand(H, generator=g) + 0.5,
        "model.layers.0.self_attn.q_proj.weight": torch.randn(H, H, generator=g) * 0.05,
        "model.layers.0.self_attn.k_proj.weight": torch.randn(H, H, generator=g) * 0.05,
        "model.layers.0.self_attn.v_proj.weight": torch.randn(H, H, generator=g) * 0.05,
        "model.layers.0.self_attn.o_proj.weight": torch.randn(H, H, generator=g) * 0.05,
        "model.layers.0.mlp.up_proj.weight": torch.randn(I, H, generator=g) * 0.05,
        "model.layers.0.mlp.up_proj.bias": torch.randn(I, generator=g),
        "model.layers.0.mlp.down_proj.weight": torch.randn(H, I, generator=g) * 0.05,
    }
    save_file(src, str(tmp_path / "m.safetensors"))
    xn = torch.randn(256, H, generator=g)  # normalised hidden states, before the norm's weight
    xn[:, :6] *= 20
    x_attn = xn * src["model.layers.0.input_layernorm.weight"]
    x_down = torch.randn(256, I, generator=g)
    x_down[:, -5:] *= 25
    calib = {"model.layers.0.self_attn.q_proj": x_attn, "model.layers.0.mlp.down_proj": x_down}
    save_file(calib, str(tmp_path / "calib.safetensors"))
    res = quantize_weights(str(tmp_path / "m.safetensors"), "int4_awq", str(tmp_path / "o.safetensors"),
                           calibration_path=str(tmp_path / "calib.safetensors"), allowed_dirs=[tmp_path])
    by = {r.name: r for r in res.tensors}
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                 "model.layers.0.mlp.down_proj.weight"):
        r = by[name]
        assert r.output_rel_error is not None and r.plain_output_rel_error is not None
        assert r.output_rel_error < 0.8 * r.plain_output_rel_error, r
    assert any("folded into model.layers.0.input_layernorm.weight" in n for n in by[
        "model.layers.0.self_attn.q_proj.weight"].notes)
    # The model as loaded from the file: the folded norm weight times the dequantized q_proj.
    got, _ = _read(tmp_path / "o.safetensors")
    base = "model.layers.0.self_attn.q_proj."
    wq = dequantize_tensors("int4_awq", {s: got[base + s] for s in ("qweight", "qzeros", "scales")})
    y_file = (xn * got["model.layers.0.input_layernorm.weight"]) @ wq.t()
    y_ref = x_attn @ src[base + "weight"].t()
    y_plain = x_attn @ int4_fake_quant(src[base + "weight"], 128).t()
    assert (y_file - y_ref).norm() < 0.8 * (y_plain - y_ref).norm()
    # down_proj's 1/s went into up_proj's rows and bias: up_proj's output is scaled, exactly undone downstream.
    up_b = got["model.layers.0.mlp.up_proj.bias"]
    s_down = src["model.layers.0.mlp.up_proj.bias"] / up_b
    assert not torch.allclose(s_down, torch.ones_like(s_down))
    assert by["model.layers.0.mlp.up_proj.weight"].sqnr_db > 15  # measured against the folded weight
