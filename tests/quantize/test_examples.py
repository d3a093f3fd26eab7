"""The quantization examples run end to end (small sizes; the synthetic model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"anvil_quant_examples.{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quantize_kernels_example(capsys: pytest.CaptureFixture[str]) -> None:
    _load("quantize_kernels").main(n=64, k=256, m=5)
    out = capsys.readouterr().out
    assert "int4 AWQ" in out and "block scales" in out and "mxfp4" in out


def test_quantize_model_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    mod = _load("quantize_model")
    monkeypatch.setattr(mod, "minilm", lambda: None)
    monkeypatch.setattr(mod, "RUNS", [("int4_awq", None), ("nvfp4", None)])
    mod.main(str(tmp_path))
    out = capsys.readouterr().out
    assert "with AWQ vs" in out and "nvfp4" in out
    assert len(list(tmp_path.glob("*.quantization_config.json"))) == 2
