"""Tensor specs: how a caller describes a launch's arguments, and how the harness builds them.

A tensor argument is a spec, never data the caller uploads: ``{"shape": [1024], "dtype":
"float32", "init": "randn", "seed": 0}``. The harness creates it (on the CPU with a seeded
generator, then moves it to the device, so every device sees the same values), which keeps
inputs harness-owned and reproducible. ``init: "empty"`` marks an output: it is poisoned
with a recognisable NaN pattern (floats) or the most negative value (signed integers) so
that elements the kernel never wrote show up in its stats.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from tools.errors import ToolInputError
from tools.limits import Limits


@dataclass(frozen=True)
class DType:
    """One element type: its torch dtype, its Triton signature name and its poison pattern."""

    name: str
    torch_dtype: torch.dtype
    triton: str
    is_float: bool
    bits_view: torch.dtype  # an integer dtype of the same width, to read and write bit patterns
    poison_bits: int


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", torch.float32, "fp32", True, torch.int32, 0x7FDADBAD),
        DType("float16", torch.float16, "fp16", True, torch.int16, 0x7EAD),
        DType("bfloat16", torch.bfloat16, "bf16", True, torch.int16, 0x7FDA),
        DType("float64", torch.float64, "fp64", True, torch.int64, 0x7FFADBADDEADBEEF),
        DType("float8_e4m3fn", torch.float8_e4m3fn, "fp8e4nv", True, torch.int8, 0x7F),
        DType("float8_e5m2", torch.float8_e5m2, "fp8e5", True, torch.int8, 0x7E),
        DType("int8", torch.int8, "i8", False, torch.int8, -(1 << 7)),
        DType("int16", torch.int16, "i16", False, torch.int16, -(1 << 15)),
        DType("int32", torch.int32, "i32", False, torch.int32, -(1 << 31)),
        DType("int64", torch.int64, "i64", False, torch.int64, -(1 << 63)),
        DType("uint8", torch.uint8, "u8", False, torch.uint8, 0xFF),
        DType("bool", torch.bool, "i1", False, torch.bool, 1),
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


def _flatten(values: Any, shape: list[int], depth: int = 0) -> list[Any]:
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
            flat.extend(_flatten(v, shape, depth + 1))
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
            flat = _flatten(self.init, shape)
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
        return self.numel * DTYPES[self.dtype].torch_dtype.itemsize


Scalar = bool | int | float


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


def build_tensor(name: str, spec: TensorSpec, device: torch.device | str = "cpu") -> torch.Tensor:
    """Create the tensor a spec describes. Values are generated on the CPU, then moved to ``device``.
    A value the dtype cannot hold (a bound, a fill value, a listed value) is the caller's error."""
    try:
        return _build_tensor(name, spec, device)
    except ToolInputError:
        raise
    except (RuntimeError, ValueError, OverflowError, TypeError) as exc:
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if "out of memory" in detail.lower() or "CUDA" in detail:
            raise
        raise ToolInputError(
            f"args[{name!r}]: cannot build a {spec.dtype} tensor from this spec ({detail}); give bounds and values "
            f"that {spec.dtype} can hold."
        ) from None


def _build_tensor(name: str, spec: TensorSpec, device: torch.device | str) -> torch.Tensor:
    dt = DTYPES[spec.dtype]
    shape = list(spec.shape or [])
    init = spec.init
    if init in ("zeros", "ones", "full", "empty"):  # the same values wherever they are made: made in place
        if init == "full":
            return torch.full(shape, spec.value if spec.value is not None else 0, dtype=dt.torch_dtype, device=device)
        if init == "empty":  # poisoned so that unwritten elements are visible
            return poison_(torch.empty(shape, dtype=dt.torch_dtype, device=device))
        return (torch.zeros if init == "zeros" else torch.ones)(shape, dtype=dt.torch_dtype, device=device)
    gen = torch.Generator().manual_seed(resolved_seed(name, spec))
    if isinstance(init, list):
        flat = _flatten(init, [])
        base = torch.tensor(flat, dtype=torch.float64 if dt.is_float else torch.int64)
        t = base.reshape(shape).to(dt.torch_dtype)
    elif init == "randn":
        t = (torch.randn(shape, generator=gen) * spec.std + spec.mean).to(dt.torch_dtype)
    elif init == "rand":
        low, high = spec.low if spec.low is not None else 0.0, spec.high if spec.high is not None else 1.0
        t = (torch.rand(shape, generator=gen) * (high - low) + low).to(dt.torch_dtype)
    elif init == "randint":
        low_i = int(spec.low) if spec.low is not None else 0
        high_i = int(spec.high) if spec.high is not None else (2 if dt.torch_dtype == torch.bool else 10)
        if not -(2**63) <= low_i < high_i <= 2**63 - 1:
            raise ToolInputError(f"args[{name!r}]: randint needs -2**63 <= low < high <= 2**63-1 "
                                 f"(got low={low_i}, high={high_i}).")
        if high_i <= low_i:
            raise ToolInputError(f"args[{name!r}]: randint needs high > low (got low={low_i}, high={high_i}).")
        t = torch.randint(low_i, high_i, shape, generator=gen, dtype=torch.int64).to(dt.torch_dtype)
    else:  # "arange"
        start = spec.low or 0
        t = (torch.arange(math.prod(shape), dtype=torch.float64) + start).reshape(shape).to(dt.torch_dtype)
    return t.to(device)


def resolved_seed(name: str, spec: TensorSpec) -> int:
    """The seed a spec's random values come from: its own, or one derived from the argument's name."""
    return default_seed(name) if spec.seed is None else spec.seed


def generated_on_host(spec: TensorSpec) -> bool:
    """Whether a spec's values are generated on the CPU and copied to the device (random, arange, listed
    values: the same on every device), as opposed to filled in place (zeros, ones, full, empty)."""
    return spec.init not in ("zeros", "ones", "full", "empty")


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with its dtype's poison pattern."""
    dt = _dtype_by_torch(t.dtype)
    if t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.view(dt.bits_view).fill_(dt.poison_bits)
    return t


def poison_mask(t: torch.Tensor) -> torch.Tensor:
    """Where ``t`` holds its dtype's poison pattern bit for bit (never written); all False for bool."""
    if t.dtype == torch.bool:
        return torch.zeros_like(t)
    dt = _dtype_by_torch(t.dtype)
    return t.view(dt.bits_view) == dt.poison_bits


def count_poison(t: torch.Tensor) -> int:
    """Elements of ``t`` still holding the poison pattern bit for bit (never written)."""
    return 0 if t.dtype == torch.bool else int(poison_mask(t).sum().item())


def poison_possible(dtype: torch.dtype, lo: float, hi: float) -> bool:
    """Whether an integer tensor whose values span [lo, hi] can hold its poison (the extreme value)."""
    if dtype == torch.bool:
        return False
    poison = _dtype_by_torch(dtype).poison_bits
    return lo <= poison <= hi


def _dtype_by_torch(dtype: torch.dtype) -> DType:
    for d in DTYPES.values():
        if d.torch_dtype == dtype:
            return d
    raise ToolInputError(f"unsupported dtype {dtype}")


def dtype_name(dtype: torch.dtype) -> str:
    return _dtype_by_torch(dtype).name


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
