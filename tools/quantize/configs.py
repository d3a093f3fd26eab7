"""The quantization config each ecosystem reads (the ``quantization_config`` of config.json).

- int4_awq: AutoAWQ's ``{"quant_method": "awq", "version": "gemm", ...}``.
- fp8 tensor / block: vLLM's ``"fp8"`` method (``weight_block_size`` for blocks, whose scales are
  ``weight_scale_inv``); activations quantized dynamically at run time.
- fp8 channel and mxfp4: compressed-tensors (``float-quantized`` / ``mxfp4-pack-quantized``).
- nvfp4: ModelOpt's ``{"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}``.

``ignored`` lists the modules (weight names without ``.weight``) of 2-D weights left in full
precision, under each ecosystem's key for it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["quantization_config"]


def _ct_group(weights: dict[str, Any], activations: dict[str, Any] | None) -> dict[str, Any]:
    return {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": activations}}


def quantization_config(fmt: str, scheme: str | None, group_size: int, ignored: list[str]) -> dict[str, Any]:
    if fmt == "int4_awq":
        return {"quant_method": "awq", "zero_point": True, "group_size": group_size, "bits": 4, "version": "gemm",
                "modules_to_not_convert": ignored or None}
    if fmt.startswith("fp8"):
        fmt_name = fmt.split("_")[1]
        if scheme == "channel":
            weights = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False,
                       "group_size": None, "block_structure": None}
            acts = {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True, "dynamic": True}
            return {"quant_method": "compressed-tensors", "format": "float-quantized",
                    "quantization_status": "compressed", "config_groups": _ct_group(weights, acts),
                    "ignore": ignored, "fp8_format": fmt_name}
        cfg: dict[str, Any] = {"quant_method": "fp8", "fmt": fmt_name, "activation_scheme": "dynamic",
                               "ignored_layers": ignored}
        if scheme == "block":
            cfg["weight_block_size"] = [group_size, group_size]
        return cfg
    if fmt == "nvfp4":
        return {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": group_size,
                "kv_cache_quant_algo": None, "exclude_modules": ignored, "producer": {"name": "anvil"}}
    if fmt == "mxfp4":
        weights = {"num_bits": 4, "type": "float", "strategy": "group", "group_size": group_size,
                   "symmetric": True, "dynamic": False}
        return {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
                "quantization_status": "compressed", "config_groups": _ct_group(weights, None), "ignore": ignored}
    raise ValueError(f"unknown format {fmt!r}")
