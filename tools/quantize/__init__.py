"""Weight quantization into the formats inference stacks load: FP8 (e4m3, e5m2; per-tensor,
per-channel, 128x128 blocks), INT4 AWQ (AutoAWQ "gemm"), NVFP4 (ModelOpt) and MXFP4 (OCP MX).

    from tools.quantize import quantize_weights
    result = quantize_weights("model.safetensors", "int4_awq", "model-awq.safetensors")

Quantization and dequantization run as Anvil kernels (tools/kernels); AWQ's searches in torch.
The request and result models load with the package; the quantizer itself (torch, the kernels)
on first use of one of its names, so that the server process starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .models import OverallReport, QuantizeRequest, QuantizeResult, SkippedTensor, TensorReport

if TYPE_CHECKING:
    from .api import quantize_weights
    from .formats import FORMATS, FP8_SCHEMES, Quantized, dequantize_tensors, quantize_tensor

__all__ = [
    "quantize_weights", "quantize_tensor", "dequantize_tensors", "Quantized", "FORMATS", "FP8_SCHEMES",
    "QuantizeRequest", "QuantizeResult", "TensorReport", "OverallReport", "SkippedTensor",
]
_FORMATS_NAMES = frozenset({"quantize_tensor", "dequantize_tensors", "Quantized", "FORMATS", "FP8_SCHEMES"})


def __getattr__(name: str) -> Any:
    if name == "quantize_weights":
        # deferred: start-up cost: torch and the quantization kernels (about 3 s), loaded when quantizing
        from .api import quantize_weights

        return quantize_weights
    if name in _FORMATS_NAMES:
        # deferred: start-up cost: torch and the quantization kernels (about 3 s), loaded when quantizing
        from . import formats

        return getattr(formats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
