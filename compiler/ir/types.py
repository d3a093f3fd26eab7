"""Tile IR types: scalars, pointers and tiles (block-level tensors).

Every type is a frozen value object, so types compare and hash by value and can key caches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import prod

__all__ = [
    "ScalarType",
    "PointerType",
    "TileType",
    "Type",
    "ElemType",
    "SCALARS",
    "scalar",
    "elem_of",
    "shape_of",
    "with_elem",
    "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16", "fp16", "bf16", "fp32", "fp64",
]


@dataclass(frozen=True)
class ScalarType:
    """A scalar element type. `kind` is one of "bool", "int", "uint", "float"."""

    name: str
    kind: str
    bits: int
    # Floating-point layout: exponent and mantissa bits (0 for integers).
    exp_bits: int = 0
    man_bits: int = 0

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for integers of any signedness, including i1 (Triton's convention)."""
        return self.kind in ("int", "uint", "bool")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_unsigned(self) -> bool:
        return self.kind in ("uint", "bool")

    @property
    def is_fp8(self) -> bool:
        return self.is_float and self.bits == 8

    @property
    def is_standard_float(self) -> bool:
        return self.name in ("fp16", "bf16", "fp32", "fp64")

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def int_min(self) -> int:
        return -(1 << (self.bits - 1)) if self.is_signed else 0

    @property
    def int_max(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.is_signed else (1 << self.bits) - 1

    @property
    def kind_rank(self) -> int:
        """Promotion rank of the kind: bool < integer (signed or not) < float, as in Triton
        (so `x_uint8 + 1` stays uint8)."""
        return {"bool": 0, "uint": 1, "int": 1, "float": 2}[self.kind]


@dataclass(frozen=True)
class PointerType:
    """A pointer to `elem` in an address space (1: global, 3: shared)."""

    elem: ElemType
    addrspace: int = 1

    def __str__(self) -> str:
        return f"!ptr<{self.elem}>" if self.addrspace == 1 else f"!ptr<{self.elem}, {self.addrspace}>"

    __repr__ = __str__

    @property
    def nbytes(self) -> int:
        return 8


@dataclass(frozen=True)
class TileType:
    """A block-level tensor of statically known shape."""

    shape: tuple[int, ...]
    elem: ElemType

    def __str__(self) -> str:
        return f"tile<{'x'.join(map(str, self.shape))}x{self.elem}>"

    __repr__ = __str__

    @cached_property
    def numel(self) -> int:
        return prod(self.shape)


ElemType = ScalarType | PointerType
Type = ScalarType | PointerType | TileType


def _f(name: str, bits: int, e: int, m: int) -> ScalarType:
    return ScalarType(name, "float", bits, e, m)


i1 = ScalarType("i1", "bool", 1)
i8 = ScalarType("i8", "int", 8)
i16 = ScalarType("i16", "int", 16)
i32 = ScalarType("i32", "int", 32)
i64 = ScalarType("i64", "int", 64)
u8 = ScalarType("u8", "uint", 8)
u16 = ScalarType("u16", "uint", 16)
u32 = ScalarType("u32", "uint", 32)
u64 = ScalarType("u64", "uint", 64)
fp8e4nv = _f("fp8e4nv", 8, 4, 3)
fp8e5 = _f("fp8e5", 8, 5, 2)
fp8e4b8 = _f("fp8e4b8", 8, 4, 3)
fp8e5b16 = _f("fp8e5b16", 8, 5, 2)
fp16 = _f("fp16", 16, 5, 10)
bf16 = _f("bf16", 16, 8, 7)
fp32 = _f("fp32", 32, 8, 23)
fp64 = _f("fp64", 64, 11, 52)

SCALARS: dict[str, ScalarType] = {
    t.name: t
    for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64,
              fp8e4nv, fp8e5, fp8e4b8, fp8e5b16, fp16, bf16, fp32, fp64)
}
# Aliases accepted in signatures and dtype names.
_ALIASES = {
    "int1": "i1", "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "float8_e4m3fn": "fp8e4nv", "float8e4nv": "fp8e4nv",
    "float8_e5m2": "fp8e5", "float8e5": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8e4b8": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16", "float8e5b16": "fp8e5b16",
}


def scalar(name: str) -> ScalarType:
    """Look up a scalar type by Tile IR name or common alias; KeyError if unknown."""
    return SCALARS[_ALIASES.get(name, name)]


def elem_of(t: Type) -> ElemType:
    return t.elem if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    return t.shape if isinstance(t, TileType) else ()


def with_elem(t: Type, elem: ElemType) -> Type:
    """The type `t` with its element replaced (a tile stays a tile of the same shape)."""
    return TileType(t.shape, elem) if isinstance(t, TileType) else elem
