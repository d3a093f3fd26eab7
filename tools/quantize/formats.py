"""The formats: quantize one 2-D weight into the tensors an inference stack loads, and back.

Every format stores a linear weight ``W[N, K]`` under the names its ecosystem uses (``base`` is
the weight's name without its trailing ``weight``, e.g. ``model.layers.0.mlp.up_proj.``):

| format | tensors (suffix: dtype [shape]) | loaded by |
|---|---|---|
| fp8_e4m3 / fp8_e5m2, tensor | weight: fp8 [N, K]; weight_scale: fp32 [] | vLLM "fp8", ModelOpt |
| fp8, channel | weight: fp8 [N, K]; weight_scale: fp32 [N, 1] | compressed-tensors (channel) |
| fp8, block | weight: fp8 [N, K]; weight_scale_inv: fp32 [N/128, K/128] | vLLM "fp8", weight_block_size |
| int4_awq | qweight: int32 [K, N/8]; qzeros: int32 [K/G, N/8]; scales: fp16 [K/G, N] | AutoAWQ "gemm", vLLM |
| nvfp4 | weight: uint8 [N, K/2]; weight_scale: e4m3 [N, K/16]; weight_scale_2: fp32 [] | ModelOpt, vLLM |
| mxfp4 | weight_packed: uint8 [N, K/2]; weight_scale: uint8 e8m0 [N, K/32] | compressed-tensors (mxfp4) |

All tensor work runs as Anvil kernels (tools/kernels); the scales are multipliers everywhere
(``weight_scale_inv`` too, despite its name).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tools.kernels.fp4 import fp4_dequantize, mxfp4_quantize, nvfp4_quantize
from tools.kernels.fp8 import fp8_dequantize, fp8_quantize
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack

__all__ = [
    "FORMATS", "FP8_SCHEMES", "Quantized", "resolve_options", "unsupported_reason", "quantize_tensor",
    "dequantize_tensors", "stored_suffixes", "base_of",
]

FORMATS = ("fp8_e4m3", "fp8_e5m2", "int4_awq", "nvfp4", "mxfp4")
FP8_SCHEMES = ("tensor", "channel", "block")
_FP8_DTYPES = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


@dataclass
class Quantized:
    """One quantized weight: the stored tensors by suffix, and the weight they stand for."""

    tensors: dict[str, torch.Tensor]
    dequantized: torch.Tensor  # fp32 [N, K]: what a loader reconstructs (AWQ: divided by its input scales)
    notes: list[str] = field(default_factory=list)


def resolve_options(fmt: str, group_size: int | None, scheme: str | None) -> tuple[int, str | None]:
    """Validated (group_size, scheme) with each format's defaults; ValueError says what to change."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt.startswith("fp8"):
        scheme = scheme or "tensor"
        if scheme not in FP8_SCHEMES:
            raise ValueError(f"scheme {scheme!r} is not an fp8 scheme; use one of {', '.join(FP8_SCHEMES)}")
        if group_size is not None and scheme != "block":
            raise ValueError("group_size applies to fp8 only with scheme='block' (the block edge, default 128)")
        gs = group_size or 128
        if scheme == "block" and (gs < 16 or gs & (gs - 1)):
            raise ValueError(f"fp8 block size must be a power of two >= 16, got {gs}")
        return gs, scheme
    if scheme is not None:
        raise ValueError(f"scheme applies to the fp8 formats only, not {fmt}")
    if fmt == "int4_awq":
        gs = group_size or 128
        if gs < 16 or gs & (gs - 1):
            raise ValueError(f"int4_awq group_size must be a power of two >= 16 (usually 128), got {gs}")
        return gs, None
    fixed = 16 if fmt == "nvfp4" else 32
    if group_size not in (None, fixed):
        raise ValueError(f"{fmt} has a fixed block size of {fixed}; leave group_size unset")
    return fixed, None


def unsupported_reason(fmt: str, shape: tuple[int, ...], group_size: int) -> str | None:
    """Why a 2-D weight of this shape cannot be stored in the format (None: it can)."""
    n, k = shape
    if fmt == "int4_awq":
        if n % 8:
            return f"int4_awq packs 8 output channels per int32: N={n} is not a multiple of 8"
        if k % group_size:
            return f"K={k} is not a multiple of group_size={group_size}"
    elif fmt in ("nvfp4", "mxfp4") and k % group_size:
        return f"{fmt} needs K a multiple of {group_size}, got K={k}"
    return None


def base_of(name: str) -> str:
    """Prefix of the stored names: ``a.b.weight`` -> ``a.b.``; ``w`` -> ``w.``."""
    return name[: -len("weight")] if name.endswith("weight") else name + "."


def stored_suffixes(fmt: str, scheme: str | None) -> tuple[str, ...]:
    if fmt.startswith("fp8"):
        return ("weight", "weight_scale_inv" if scheme == "block" else "weight_scale")
    if fmt == "int4_awq":
        return ("qweight", "qzeros", "scales")
    if fmt == "nvfp4":
        return ("weight", "weight_scale", "weight_scale_2")
    return ("weight_packed", "weight_scale")


def quantize_tensor(w: torch.Tensor, fmt: str, group_size: int | None = None, scheme: str | None = None,
                    input_scales: torch.Tensor | None = None) -> Quantized:
    """Quantize a 2-D float weight W[N, K].

    For int4_awq, ``input_scales`` (AWQ's s, [K]) means ``w`` is already ``W * s`` and the
    layer's input is divided by s (folded upstream): the dequantized weight is reported in the
    original space, ``Q(W s) / s``.
    """
    gs, scheme = resolve_options(fmt, group_size, scheme)
    if w.dim() != 2 or not w.is_floating_point():
        raise ValueError(f"only 2-D floating-point weights can be quantized, got {w.dtype} {tuple(w.shape)}")
    reason = unsupported_reason(fmt, tuple(w.shape), gs)
    if reason:
        raise ValueError(reason)
    w = w.contiguous()
    if fmt.startswith("fp8"):
        q, s = fp8_quantize(w, _FP8_DTYPES[fmt], scheme or "tensor", (gs, gs))
        name = "weight_scale_inv" if scheme == "block" else "weight_scale"
        return Quantized({"weight": q, name: s}, fp8_dequantize(q, s, block=(gs, gs)))
    if fmt == "int4_awq":
        qweight, qzeros, scales = awq_quantize_pack(w, gs)
        deq = awq_dequantize(qweight, qzeros, scales)
        if input_scales is not None:
            deq = deq / input_scales.float()[None, :]
        return Quantized({"qweight": qweight, "qzeros": qzeros, "scales": scales}, deq)
    if fmt == "nvfp4":
        packed, bs, g = nvfp4_quantize(w)
        return Quantized({"weight": packed, "weight_scale": bs, "weight_scale_2": g}, fp4_dequantize(packed, bs, g))
    packed, e8 = mxfp4_quantize(w)
    return Quantized({"weight_packed": packed, "weight_scale": e8}, fp4_dequantize(packed, e8))


def dequantize_tensors(fmt: str, tensors: dict[str, torch.Tensor], dtype: torch.dtype = torch.float32,
                       group_size: int | None = None) -> torch.Tensor:
    """W~[N, K] from the stored tensors of one weight (by suffix), as a loader would rebuild it."""
    if fmt.startswith("fp8"):
        s = tensors.get("weight_scale_inv", tensors.get("weight_scale"))
        if s is None:
            raise ValueError("fp8 needs weight_scale or weight_scale_inv")
        gs = group_size or 128
        return fp8_dequantize(tensors["weight"], s, dtype, block=(gs, gs))
    if fmt == "int4_awq":
        return awq_dequantize(tensors["qweight"], tensors["qzeros"], tensors["scales"], dtype)
    if fmt == "nvfp4":
        return fp4_dequantize(tensors["weight"], tensors["weight_scale"], tensors["weight_scale_2"], dtype)
    if fmt == "mxfp4":
        return fp4_dequantize(tensors["weight_packed"], tensors["weight_scale"], None, dtype)
    raise ValueError(f"unknown format {fmt!r}")
