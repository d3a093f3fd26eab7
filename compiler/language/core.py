"""The core objects kernels see: dtypes, constexpr, tensors, and the builtin-function marker.

Kernels are compiled, never run as Python: a `Tensor` is the compiler's handle on a Tile IR
value, and a builtin's Python body runs at compile time to build IR through `_sem`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ..ir import types as T
from ..ir.core import Value

__all__ = [
    "dtype", "pointer_type", "block_type", "constexpr", "Tensor", "tensor", "builtin", "is_builtin",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float8e4nv", "float8e5", "float8e4b8", "float8e5b16", "float8e4b15", "float16", "bfloat16",
    "float32", "float64", "void", "to_dtype", "PropagateNan", "static_range", "range",
]

F = TypeVar("F", bound=Callable[..., Any])


class dtype:
    """A scalar element type, e.g. `tl.float32`. Compares equal by type."""

    __slots__ = ("ir",)

    # Triton's type-name lists (`tl.dtype.SINT_TYPES`, ...); `tl.dtype("int32")` works as in Triton.
    SINT_TYPES = ["int8", "int16", "int32", "int64"]
    UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]
    FP_TYPES = ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64"]
    STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]
    OTHER_TYPES = ["void"]

    def __init__(self, ir: T.ScalarType | T.PointerType | str) -> None:
        if isinstance(ir, str):
            ir = T.scalar("fp8e4nv" if ir == "fp8e4b15" else ir)
        self.ir = ir

    def __eq__(self, other: object) -> bool:
        other = to_dtype(other) if not isinstance(other, dtype) else other
        return isinstance(other, dtype) and self.ir == other.ir

    def __hash__(self) -> int:
        return hash(self.ir)

    def __repr__(self) -> str:
        return f"tl.{_PY_NAMES.get(str(self.ir), str(self.ir))}"

    __str__ = __repr__

    @property
    def name(self) -> str:
        """Triton's name of the type: 'int32', 'uint8', 'int1', 'fp16', 'bf16', 'fp32', ..."""
        return _TRITON_NAMES.get(str(self.ir), str(self.ir))

    @property
    def _s(self) -> T.ScalarType:
        if not isinstance(self.ir, T.ScalarType):
            raise AttributeError(f"{self} is a pointer type, not a number type")
        return self.ir

    def is_floating(self) -> bool:
        return isinstance(self.ir, T.ScalarType) and self.ir.is_float

    def is_int(self) -> bool:
        return isinstance(self.ir, T.ScalarType) and self.ir.is_int

    def is_int_signed(self) -> bool:
        return isinstance(self.ir, T.ScalarType) and self.ir.is_signed

    def is_int_unsigned(self) -> bool:
        return isinstance(self.ir, T.ScalarType) and self.ir.is_unsigned

    def is_bool(self) -> bool:
        return self.ir == T.i1

    def is_ptr(self) -> bool:
        return isinstance(self.ir, T.PointerType)

    def is_fp8(self) -> bool:
        return isinstance(self.ir, T.ScalarType) and self.ir.is_fp8

    def is_fp16(self) -> bool:
        return self.ir == T.fp16

    def is_bf16(self) -> bool:
        return self.ir == T.bf16

    def is_fp32(self) -> bool:
        return self.ir == T.fp32

    def is_fp64(self) -> bool:
        return self.ir == T.fp64

    def is_block(self) -> bool:
        return False

    @property
    def primitive_bitwidth(self) -> int:
        return 64 if isinstance(self.ir, T.PointerType) else self.ir.bits

    @property
    def int_bitwidth(self) -> int:
        return self._s.bits

    @property
    def fp_mantissa_width(self) -> int:
        return self._s.man_bits

    @property
    def exponent_bias(self) -> int:
        """The exponent bias of a floating-point type (15 for fp16, 127 for fp32, 8 for fp8e4b8)."""
        if self.name in ("fp8e4b8", "fp8e5b16"):
            return 1 << (self._s.exp_bits - 1)  # the "fnuz" types
        return (1 << (self._s.exp_bits - 1)) - 1

    @property
    def scalar(self) -> dtype:
        return self

    @property
    def element_ty(self) -> dtype:
        if isinstance(self.ir, T.PointerType):
            return dtype(self.ir.elem)
        raise AttributeError(f"{self} is not a pointer type and has no element_ty")

    def to(self, *_: Any) -> Any:  # pragma: no cover - documents the method form
        raise TypeError("dtype.to is not a thing; did you mean tensor.to(dtype)?")


class pointer_type(dtype):
    """`tl.pointer_type(tl.float32)`: the type of a pointer to elements of `element_ty`. A block
    pointer's type (`p.type`, `p.dtype` of `p = tl.make_block_ptr(...)`) points to a block_type, as
    in Triton: `p.dtype.element_ty` is the block's type, `p.dtype.element_ty.element_ty` its dtype."""

    def __init__(self, element_ty: dtype | block_type, address_space: int = 1) -> None:
        self.block = element_ty if isinstance(element_ty, block_type) else None
        elem = element_ty.element_ty if isinstance(element_ty, block_type) else element_ty
        super().__init__(T.PointerType(elem.ir, address_space))  # type: ignore[arg-type]

    @property
    def element_ty(self) -> Any:
        return self.block if self.block is not None else super().element_ty

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and self.block == getattr(other, "block", None)

    def __hash__(self) -> int:
        return hash((self.ir, self.block))

    def __repr__(self) -> str:
        return f"pointer<{self.block}>" if self.block is not None else super().__repr__()

    __str__ = __repr__


class block_type:
    """The type of a tile: element dtype and shape (what `x.type` returns)."""

    def __init__(self, element_ty: dtype, shape: list[int]) -> None:
        self.element_ty = element_ty
        self.shape = list(shape)
        self.scalar = element_ty

    def is_block(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, block_type) and (self.element_ty, self.shape) == (other.element_ty, other.shape)

    def __hash__(self) -> int:
        return hash((self.element_ty, tuple(self.shape)))

    def __repr__(self) -> str:
        return f"<{self.shape}, {self.element_ty}>"


class constexpr:
    """Marks a kernel parameter (or a global) as a compile-time constant: `BLOCK: tl.constexpr`."""

    def __init__(self, value: Any = None) -> None:
        self.value: Any = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return bool(self.value == (other.value if isinstance(other, constexpr) else other))

    def __hash__(self) -> int:
        return hash(self.value)


class Tensor:
    """The compile-time handle of a Tile IR value (a scalar or a tile) inside a kernel."""

    __slots__ = ("handle",)

    def __init__(self, handle: Value) -> None:
        self.handle = handle

    @property
    def type(self) -> T.Type:
        return self.handle.type

    @property
    def ir_elem(self) -> T.ElemType:
        return T.elem_of(self.handle.type)

    @property
    def dtype(self) -> dtype:
        e = self.ir_elem
        if isinstance(e, T.PointerType):
            d = pointer_type.__new__(pointer_type)  # isinstance(x.dtype, tl.pointer_type) holds
            d.ir = e
            d.block = None
            return d
        return dtype(e)

    @property
    def shape(self) -> tuple[int, ...]:
        return T.shape_of(self.handle.type)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_tile(self) -> bool:
        return isinstance(self.handle.type, T.TileType)

    def __repr__(self) -> str:
        return f"Tensor({self.handle.type})"

    def __bool__(self) -> bool:
        raise TypeError("a runtime tensor has no truth value at compile time")


tensor = Tensor


class static_range:
    """A loop unrolled at compile time: `for i in tl.static_range(4): ...` (bounds are constexpr)."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None) -> None:
        self.args = (arg1, arg2, step)


class range:  # noqa: A001 - Triton's name
    """A runtime loop with scheduling hints: `for k in tl.range(0, K, BLOCK, num_stages=3): ...`."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: bool = False,
                 flatten: bool = False, warp_specialize: bool = False) -> None:
        self.args = (arg1, arg2, step)


class PropagateNan:
    """How tl.maximum / tl.minimum treat NaN: NONE (ignore NaN operands) or ALL (propagate)."""

    NONE = "none"
    ALL = "all"


def builtin(fn: F) -> F:
    """Marks a function of the language as a builtin: called at compile time with `_sem`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_sem") is None:
            raise RuntimeError(
                f"tl.{fn.__name__} can only be called inside a kernel compiled with @jit")
        return fn(*args, **kwargs)

    wrapper.__anvil_builtin__ = True  # type: ignore[attr-defined]
    _BUILTINS[id(wrapper)] = wrapper
    return wrapper  # type: ignore[return-value]


# Every builtin made by @builtin, by identity: what kernels may call as a language builtin.
_BUILTINS: dict[int, Callable[..., Any]] = {}


def is_builtin(obj: Any) -> bool:
    """True for a function made by @builtin (decided by identity, not by the object's attributes)."""
    return _BUILTINS.get(id(obj)) is obj


int1 = dtype(T.i1)
int8 = dtype(T.i8)
int16 = dtype(T.i16)
int32 = dtype(T.i32)
int64 = dtype(T.i64)
uint8 = dtype(T.u8)
uint16 = dtype(T.u16)
uint32 = dtype(T.u32)
uint64 = dtype(T.u64)
float8e4nv = dtype(T.fp8e4nv)
float8e5 = dtype(T.fp8e5)
float8e4b8 = dtype(T.fp8e4b8)
float8e5b16 = dtype(T.fp8e5b16)
float8e4b15 = float8e4nv  # not a real type on current GPUs; kept so old code imports
float16 = dtype(T.fp16)
bfloat16 = dtype(T.bf16)
float32 = dtype(T.fp32)
float64 = dtype(T.fp64)
void = None

_PY_NAMES = {
    "i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "fp8e4nv": "float8e4nv", "fp8e5": "float8e5",
    "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16", "fp16": "float16", "bf16": "bfloat16",
    "fp32": "float32", "fp64": "float64",
}


_TRITON_NAMES = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def to_dtype(obj: Any) -> dtype | None:
    """Our dtype for `obj`: one of ours, a real `triton.language` dtype, a torch dtype, or a name."""
    if isinstance(obj, dtype):
        return obj
    if isinstance(obj, constexpr):
        return to_dtype(obj.value)
    mod = type(obj).__module__ or ""
    if mod.startswith("triton"):
        elem = getattr(obj, "element_ty", None)
        if type(obj).__name__ == "pointer_type" and elem is not None:
            inner = to_dtype(elem)
            return pointer_type(inner) if inner is not None else None
        name = getattr(obj, "name", None)
        if isinstance(name, str):
            try:
                return dtype(T.scalar(name))
            except KeyError:
                return None
    if mod == "torch":
        try:
            return dtype(T.scalar(str(obj).removeprefix("torch.")))
        except KeyError:
            return None
    if isinstance(obj, str):
        try:
            return dtype(T.scalar(obj))
        except KeyError:
            return None
    return None
