"""Request and response models of quantize_weights (pydantic v2).

Numbers that may be non-finite (an SQNR of an exactly representable tensor is +inf) are
``None`` instead, since JSON has no infinity.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Format = Literal["fp8_e4m3", "fp8_e5m2", "int4_awq", "nvfp4", "mxfp4"]
Scheme = Literal["tensor", "channel", "block"]


class QuantizeRequest(BaseModel):
    """The parameters of quantize_weights, for the server's tool signature and validation."""

    model_config = ConfigDict(extra="forbid")

    source_path: Annotated[str, Field(description="A .safetensors file inside the allowed directories.")]
    format: Annotated[
        Format,
        Field(description="fp8_e4m3 / fp8_e5m2 (vLLM, compressed-tensors), int4_awq (AutoAWQ gemm), "
              "nvfp4 (ModelOpt), mxfp4 (OCP MX, compressed-tensors)."),
    ]
    output_path: Annotated[str, Field(description="Where to write the quantized .safetensors (allowed dirs).")]
    tensors: Annotated[
        list[str],
        Field(description="Glob patterns over tensor names to quantize ('!pattern' excludes); others are copied "
              "unchanged. Only 2-D floating-point weights are quantized. With the default ['*'], embeddings, "
              "norms and lm_head are left unquantized, as inference stacks expect."),
    ] = ["*"]
    group_size: Annotated[
        int | None,
        Field(description="int4_awq: input channels per group (default 128); fp8 block: block edge (default "
              "128); fixed for nvfp4 (16) and mxfp4 (32)."),
    ] = None
    scheme: Annotated[
        Scheme | None,
        Field(description="fp8 granularity: 'tensor' (default), 'channel' (per output row) or 'block' (128x128)."),
    ] = None
    calibration_path: Annotated[
        str | None,
        Field(description="int4_awq: a .safetensors of input activations [tokens, K] per layer, named like the "
              "weight or its module (e.g. 'model.layers.0.mlp.down_proj'); enables AWQ's scale and clip search."),
    ] = None
    overwrite: Annotated[bool, Field(description="Replace existing output files.")] = False


class TensorReport(BaseModel):
    """The error one quantized weight costs."""

    name: Annotated[str, Field(description="Name of the source tensor.")]
    shape: Annotated[list[int], Field(description="Its shape [N, K].")]
    dtype: Annotated[str, Field(description="Its source dtype.")]
    stored_as: Annotated[dict[str, str], Field(description="Output tensor names -> 'dtype [shape]'.")]
    sqnr_db: Annotated[float | None, Field(description="20 log10(||W|| / ||W - W~||); None if exact.")]
    rel_error: Annotated[float, Field(description="||W - W~||_F / ||W||_F.")]
    cosine: Annotated[float, Field(description="Cosine similarity of W and W~ (flattened).")]
    max_abs_error: Annotated[float, Field(description="max |W - W~|.")]
    bytes_before: Annotated[int, Field(description="Bytes of the source tensor.")]
    bytes_after: Annotated[int, Field(description="Bytes of its stored tensors (data, scales, zeros).")]
    output_rel_error: Annotated[
        float | None,
        Field(description="With calibration: ||X W~^T - X W^T|| / ||X W^T|| on the activations."),
    ] = None
    plain_output_rel_error: Annotated[
        float | None, Field(description="With calibration: the same for plain rounding (no AWQ search).")
    ] = None
    notes: Annotated[list[str], Field(description="What was done beyond plain rounding, or left undone.")] = []


class SkippedTensor(BaseModel):
    name: str
    reason: str


class OverallReport(BaseModel):
    """Totals over every quantized weight (errors pooled over all their elements)."""

    tensors_quantized: int
    tensors_copied: Annotated[int, Field(description="Tensors written unchanged.")]
    sqnr_db: Annotated[float | None, Field(description="Pooled: 20 log10(sqrt(sum ||W||^2 / sum ||W - W~||^2)).")]
    rel_error: float
    cosine: float
    max_abs_error: float
    bytes_before: Annotated[int, Field(description="Bytes of the quantized weights in the source.")]
    bytes_after: Annotated[int, Field(description="Bytes of what replaced them.")]
    file_bytes_before: Annotated[int, Field(description="Bytes of all tensors of the source.")]
    file_bytes_after: Annotated[int, Field(description="Bytes of all tensors of the output.")]
    compression: Annotated[float | None, Field(description="file_bytes_before / file_bytes_after.")]
    seconds: float


class QuantizeResult(BaseModel):
    """What quantize_weights wrote and what it cost."""

    output_path: Annotated[str | None, Field(description="The quantized .safetensors (None: not written).")]
    config_path: Annotated[
        str | None,
        Field(description="JSON with the quantization config, to be placed under 'quantization_config' "
              "in the model's config.json (None: not written)."),
    ]
    format: Format
    scheme: Scheme | None = None
    group_size: int
    quantization_config: Annotated[dict, Field(description="The config written to config_path.")]
    tensors: list[TensorReport]
    skipped: Annotated[list[SkippedTensor], Field(description="Matched tensors left unquantized, and why.")] = []
    overall: OverallReport
    summary: str
