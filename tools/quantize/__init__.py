"""Weight quantization into the formats inference stacks load: FP8 (e4m3, e5m2; per-tensor,
per-channel, 128x128 blocks), INT4 AWQ (AutoAWQ "gemm"), NVFP4 (ModelOpt) and MXFP4 (OCP MX).

    from tools.quantize import quantize_weights
    result = quantize_weights("model.safetensors", "int4_awq", "model-awq.safetensors")

Quantization and dequantization run as Anvil kernels (tools/kernels); AWQ's searches in torch.
"""

from __future__ import annotations

from .api import quantize_weights
from .formats import FORMATS, FP8_SCHEMES, Quantized, dequantize_tensors, quantize_tensor
from .models import OverallReport, QuantizeRequest, QuantizeResult, SkippedTensor, TensorReport

__all__ = [
    "quantize_weights", "quantize_tensor", "dequantize_tensors", "Quantized", "FORMATS", "FP8_SCHEMES",
    "QuantizeRequest", "QuantizeResult", "TensorReport", "OverallReport", "SkippedTensor",
]
