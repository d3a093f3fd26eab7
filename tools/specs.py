"""Tensor specs: how a caller describes a launch's arguments, and how the harness builds them.

A tensor argument is a spec, never data the caller uploads: ``{"shape": [1024], "dtype":
"float32", "init": "randn", "seed": 0}``. The harness creates it (on the CPU with a seeded
generator, then moves it to the device, so every device sees the same values), which keeps
inputs harness-owned and reproducible. ``init: "empty"`` marks an output: it is poisoned
with a recognisable NaN pattern (floats) or the most negative value (signed integers) so
that elements the kernel never wrote show up in its stats.

This module is what the server process checks requests with and does not import torch: dtypes
are names here, and the torch dtype of each is looked up when a worker asks for it. Building,
poisoning and reading tensors is in tools/tensors.py (worker side).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)

from tools.errors import ToolInputError
from tools.limits import Limits

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    """One element type: its name (torch's), its Triton signature name, its size and its poison pattern."""

    name: str
    triton: str
    is_float: bool
    itemsize: int  # bytes per element
    bits: str  # the name of an integer dtype of the same width, to read and write bit patterns
    poison_bits: int

    @property
    def torch_dtype(self) -> torch.dtype:
        """torch's dtype of this name (imports torch: for the workers, which build and read tensors)."""
        return _torch_dtype(self.name)

    @property
    def bits_view(self) -> torch.dtype:
        """The integer torch dtype of the same width (imports torch, as :attr:`torch_dtype`)."""
        return _torch_dtype(self.bits)


@cache
def _torch_dtype(name: str) -> torch.dtype:
    # deferred: start-up cost: torch (about 2 s); the server process checks specs by dtype name only
    import torch

    dtype = getattr(torch, name)
    assert isinstance(dtype, torch.dtype), name
    return dtype


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "fp32", True, 4, "int32", 0x7FDADBAD),
        DType("float16", "fp16", True, 2, "int16", 0x7EAD),
        DType("bfloat16", "bf16", True, 2, "int16", 0x7FDA),
        DType("float64", "fp64", True, 8, "int64", 0x7FFADBADDEADBEEF),
        DType("float8_e4m3fn", "fp8e4nv", True, 1, "int8", 0x7F),
        DType("float8_e5m2", "fp8e5", True, 1, "int8", 0x7E),
        DType("int8", "i8", False, 1, "int8", -(1 << 7)),
        DType("int16", "i16", False, 2, "int16", -(1 << 15)),
        DType("int32", "i32", False, 4, "int32", -(1 << 31)),
        DType("int64", "i64", False, 8, "int64", -(1 << 63)),
        DType("uint8", "u8", False, 1, "uint8", 0xFF),
        DType("bool", "i1", False, 1, "bool", 1),
    )
}
_ALIASES: dict[str, str] = {
    "fp32": "float32", "f32": "float32", "float": "float32", "torch.float32": "float32",
    "fp16": "float16", "f16": "float16", "half": "float16", "torch.float16": "float16",
    "bf16": "bfloat16", "torch.bfloat16": "bfloat16",
    "fp64": "float64", "f64": "float64", "double": "float64",
    "fp8e4nv": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
    "fp8e5": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2",
    "i8": "int8", "i16": "int16", "i32": "int32", "int": "int32", "i64": "int64", "long": "int64",
    "u8": "uint8", "i1": "bool",
}  # fmt: skip
BY_TRITON: dict[str, DType] = {d.triton: d for d in DTYPES.values()}
SCALAR_TYPES = frozenset({"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"})

DTypeName = Literal[
    "float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2",
    "int8", "int16", "int32", "int64", "uint8", "bool",
]  # fmt: skip
InitName = Literal["randn", "rand", "randint", "zeros", "ones", "arange", "full", "empty"]
MAX_EXPLICIT = 1 << 16  # hard cap in the schema; Limits.max_explicit_values is the configured one


def dtype_of(name: str) -> DType:
    """The DType for a name or alias (``float32``, ``fp16``, ``bf16``, ``i32``, ...)."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPES:
        raise ToolInputError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[key]


def flatten_values(values: Any, shape: list[int], depth: int = 0) -> list[Any]:
    """Flatten nested lists, recording the shape; reject ragged or non-numeric values."""
    if isinstance(values, list):
        if depth >= 8:
            raise ValueError("explicit values nest deeper than 8 levels")
        if len(shape) <= depth:
            shape.append(len(values))
        elif shape[depth] != len(values):
            raise ValueError("explicit values are ragged: every row must have the same length")
        flat: list[Any] = []
        for v in values:
            flat.extend(flatten_values(v, shape, depth + 1))
        return flat
    if len(shape) > depth:
        raise ValueError("explicit values are ragged: mixed numbers and lists at one level")
    if not isinstance(values, int | float | bool):
        raise ValueError(f"explicit values must be numbers, got {values!r}")
    return [values]


class TensorSpec(BaseModel):
    """A tensor argument the harness creates: shape, dtype and how to fill it."""

    model_config = ConfigDict(extra="forbid")

    shape: Annotated[
        list[Annotated[int, Field(ge=0, le=1 << 31)]] | None,
        Field(description="Dimensions, e.g. [1024] or [64, 128]. Optional when init is a list of values."),
    ] = None
    dtype: Annotated[
        DTypeName,
        Field(description="Element type; aliases accepted: fp32, fp16, bf16, fp64, i8, i32, i64, u8, fp8e4nv, fp8e5."),
    ] = "float32"
    init: Annotated[
        InitName | list[Any],
        Field(
            description="How to fill it: randn (normal, float dtypes), rand (uniform [low, high)), randint "
            "(integers in [low, high)), zeros, ones, arange (0, 1, 2, ... plus low), full (value), empty "
            "(an output: poisoned with NaN / the minimum integer so unwritten elements show), or a "
            "(nested) list of explicit values."
        ),
    ] = "randn"
    seed: Annotated[
        int | None,
        Field(description="Seed of the random fill; default: derived from the argument's name, so inputs differ."),
    ] = None
    low: Annotated[float | None, Field(description="Lower bound for rand/randint, start for arange.")] = None
    high: Annotated[float | None, Field(description="Upper bound (exclusive) for rand/randint.")] = None
    value: Annotated[float | None, Field(description="Fill value for init 'full'.")] = None
    mean: Annotated[float, Field(description="Mean for randn.")] = 0.0
    std: Annotated[float, Field(ge=0, description="Standard deviation for randn.")] = 1.0

    @field_validator("dtype", mode="before")
    @classmethod
    def _normalize_dtype(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _ALIASES.get(value.strip().lower(), value.strip().lower())
        return value

    @model_validator(mode="after")
    def _check(self) -> TensorSpec:
        if isinstance(self.init, list):
            shape: list[int] = []
            flat = flatten_values(self.init, shape)
            if len(flat) > MAX_EXPLICIT:
                raise ValueError(f"at most {MAX_EXPLICIT} explicit values; use an init pattern for larger tensors")
            if self.shape is None:
                self.shape = shape
            elif math.prod(self.shape) != len(flat):
                raise ValueError(
                    f"shape {self.shape} has {math.prod(self.shape)} elements but {len(flat)} values were given"
                )
        elif self.shape is None:
            raise ValueError("shape is required (e.g. [1024]) unless init is a list of values")
        if self.init in ("randn", "rand") and not DTYPES[self.dtype].is_float:
            raise ValueError(f"init {self.init!r} needs a float dtype; use init 'randint' for {self.dtype}")
        if self.init == "full" and self.value is None:
            raise ValueError("init 'full' needs a value, e.g. {'init': 'full', 'value': 1.5}")
        return self

    @property
    def numel(self) -> int:
        return math.prod(self.shape or [])

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype].itemsize


Scalar = bool | int | float
# a tl.constexpr's value: a scalar, or a short string (e.g. ACTIVATION="leaky_relu")
ConstexprValue = bool | int | float | Annotated[str, StringConstraints(max_length=128)]


def _arg_kind(value: Any) -> str:
    return "tensor" if isinstance(value, dict | TensorSpec) else "scalar"


ArgValue = Annotated[
    Annotated[TensorSpec, Tag("tensor")] | Annotated[Scalar, Tag("scalar")],
    Discriminator(_arg_kind),
]


def default_seed(name: str) -> int:
    """A stable per-argument seed, so that x and y of one launch get different values."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def check_args_limits(args: dict[str, Any], limits: Limits, *, copies: int = 1) -> None:
    """Refuse tensor specs beyond the limits (per tensor and per call, times ``copies`` sets)."""
    total_elements = total_bytes = 0
    for name, spec in args.items():
        if not isinstance(spec, TensorSpec):
            continue
        assert spec.shape is not None
        if len(spec.shape) > limits.max_tensor_rank:
            raise ToolInputError(
                f"args[{name!r}]: {len(spec.shape)} dimensions; the limit is {limits.max_tensor_rank}."
            )
        if spec.numel > limits.max_tensor_elements:
            raise ToolInputError(
                f"args[{name!r}]: {spec.numel} elements; the limit per tensor is "
                f"{limits.max_tensor_elements}. Use a smaller shape."
            )
        if isinstance(spec.init, list) and spec.numel > limits.max_explicit_values:
            raise ToolInputError(
                f"args[{name!r}]: {spec.numel} explicit values; the limit is {limits.max_explicit_values}. "
                "Use an init pattern (randn, arange, ...) for larger tensors."
            )
        total_elements += spec.numel * copies
        total_bytes += spec.nbytes * copies
    if total_elements > limits.max_call_elements:
        raise ToolInputError(
            f"the tensors of this call have {total_elements} elements in all; the limit is {limits.max_call_elements}."
        )
    if total_bytes > limits.max_call_bytes:
        raise ToolInputError(
            f"the tensors of this call take {total_bytes} bytes; the limit is {limits.max_call_bytes}."
        )


def resolved_seed(name: str, spec: TensorSpec) -> int:
    """The seed a spec's random values come from: its own, or one derived from the argument's name."""
    return default_seed(name) if spec.seed is None else spec.seed


def generated_on_host(spec: TensorSpec) -> bool:
    """Whether a spec's values are generated on the CPU and copied to the device (random, arange, listed
    values: the same on every device), as opposed to filled in place (zeros, ones, full, empty)."""
    return spec.init not in ("zeros", "ones", "full", "empty")


def signature_of(value: TensorSpec | Scalar) -> str:
    """The Triton signature type a launch argument implies (``*fp32`` for a float32 tensor, ``i32``...)."""
    if isinstance(value, TensorSpec):
        return "*" + DTYPES[value.dtype].triton
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return "i32"
        if -(1 << 63) <= value < (1 << 63):
            return "i64"
        return "u64"
    return "fp32"


def check_signature_type(text: str, *, where: str) -> str:
    """Validate one Triton signature type string (``*fp16``, ``i32``, ``constexpr``)."""
    t = text.strip()
    if t.startswith("*"):
        if t[1:] not in BY_TRITON:
            raise ToolInputError(
                f"{where}: unknown pointer type {text!r}; use one of {', '.join('*' + k for k in BY_TRITON)}."
            )
        return t
    if t not in SCALAR_TYPES and t != "constexpr":
        raise ToolInputError(
            f"{where}: unknown type {text!r}; use a pointer type like '*fp32' or a scalar type "
            f"({', '.join(sorted(SCALAR_TYPES))})."
        )
    return t


def scalar_fits(value: Scalar, sig: str) -> bool:
    """Whether a scalar argument is acceptable for a scalar signature type."""
    if sig == "i1":
        return isinstance(value, bool | int) and value in (0, 1)
    if sig.startswith(("fp", "bf")):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(value, float | bool):
        return False
    bits = int(sig[1:])
    if sig.startswith("u"):
        return 0 <= value < (1 << bits)
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))
