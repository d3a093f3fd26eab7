"""The compile-time values the frontend passes around besides tensors: block pointers, shapes, bound
methods, the result of a `return`; and how objects of the real `triton` package map onto ours."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from typing import Any

from .. import errors as E
from .. import language as tl
from ..ir import types as T
from ..language import builtins as B
from ..language import core as lc

__all__ = ["Returned", "UNKNOWN", "is_tensor", "BlockPointer", "Shape"]


@dataclass
class Returned:
    """A `return` was reached; `value` is what it returned (None for a bare return)."""

    value: Any
    node: ast.AST | None = None


class _Unknown:
    """The value of a name while a test is settled ahead of the code that assigns it (statements.py)."""


UNKNOWN = _Unknown()


def is_tensor(x: Any) -> bool:
    return isinstance(x, lc.Tensor)


@dataclass(frozen=True)
class BlockPointer:
    """A `tl.make_block_ptr` value: base pointer, per-dimension shape/strides/offsets (runtime)."""

    base: lc.Tensor
    shape: tuple[lc.Tensor, ...]
    strides: tuple[lc.Tensor, ...]
    offsets: tuple[lc.Tensor, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]

    def attribute(self, attr: str) -> Any:
        """What kernels read of a block pointer, as of Triton's: `type` and `dtype` are
        pointer_type(block_type(element dtype, block_shape)), and `advance`, `load`, `store` are methods."""
        if attr in ("type", "dtype"):
            elem = self.base.ir_elem
            assert isinstance(elem, T.PointerType)
            return lc.pointer_type(lc.block_type(lc.dtype(elem.elem), list(self.block_shape)))
        if attr in ("advance", "load", "store"):
            return _BoundMethod(getattr(B, attr), self)
        raise E.UnsupportedError(f"block pointers have no attribute {attr!r}",
                                 hint="a block pointer has type, dtype (dtype.element_ty is the block's type), "
                                 "advance, load and store")


class Shape(tuple):  # type: ignore[type-arg]
    """`x.shape` inside a kernel: a tuple that also equals, and concatenates with, a list
    (Triton's `tensor.shape` is a list, so Triton code writes `x.shape == [M, N]`)."""

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return tuple.__hash__(self)

    def __add__(self, other: Any) -> Shape:  # type: ignore[override]
        return Shape(tuple(self) + tuple(other))

    def __radd__(self, other: Any) -> Shape:
        return Shape(tuple(other) + tuple(self))

    def __getitem__(self, i: Any) -> Any:  # type: ignore[override]
        r = tuple.__getitem__(self, i)
        return Shape(r) if isinstance(i, slice) else r


@dataclass(frozen=True)
class _BoundMethod:
    """`value.method`: calls `fn(value, *bound, *args)`."""

    fn: Any
    self: Any
    bound: tuple[Any, ...] = ()


def _unwrap(x: Any) -> Any:
    if isinstance(x, lc.constexpr):
        return x.value
    if type(x).__name__ == "constexpr" and type(x).__module__.startswith("triton"):
        return _normalize_global(x.value)
    return x


def _normalize_global(obj: Any) -> Any:
    """Map objects of the real `triton` package that a Python kernel's module holds onto ours;
    unwrap constexpr globals. (Source text never holds them: its imports resolve to ours.)"""
    if isinstance(obj, type) and (getattr(obj, "__module__", "") or "").startswith("triton.language"):
        ours = _TRITON_CLASSES.get(obj.__name__)
        return ours if ours is not None else obj
    if isinstance(obj, type(ast)) and obj.__name__ == "triton":
        return importlib.import_module("compiler.triton_compat")
    mod = getattr(type(obj), "__module__", "") or ""
    if mod.startswith("triton"):
        tname = type(obj).__name__
        if tname == "constexpr":
            return _normalize_global(obj.value)
        if tname in ("dtype", "pointer_type") or tname.endswith("_type") and hasattr(obj, "name"):
            d = lc.to_dtype(obj)
            if d is not None:
                return d
    if isinstance(obj, lc.constexpr):
        return obj.value
    if callable(obj) and not isinstance(obj, type):
        fmod = getattr(obj, "__module__", "") or ""
        if fmod.startswith("triton.language"):
            return _triton_builtin(obj, fmod)
    if isinstance(obj, type(ast)) and obj.__name__.startswith("triton.language"):
        return _triton_module(obj.__name__)
    return obj


_TRITON_CLASSES: dict[str, Any] = {"constexpr": lc.constexpr, "tensor": lc.Tensor, "dtype": lc.dtype,
                                   "pointer_type": lc.pointer_type, "block_type": lc.block_type,
                                   "static_range": lc.static_range, "range": lc.range}


def _triton_module(name: str) -> Any:
    ours = "compiler.language" + name[len("triton.language"):]
    ours = ours.replace(".extra.cuda.libdevice", ".extra.libdevice").replace(".extra.cuda", ".extra")
    try:
        return importlib.import_module(ours)
    except ImportError:
        return importlib.import_module("compiler.language")


def _triton_builtin(obj: Any, fmod: str) -> Any:
    """Our function for a function of the real triton.language (matched by name)."""
    name = getattr(obj, "__name__", "")
    if fmod.endswith("libdevice") or ".extra" in fmod:
        return getattr(tl.extra.libdevice, name)
    if fmod.endswith(".math") and hasattr(tl.math, name):
        return getattr(tl.math, name)
    if hasattr(tl, name):
        return getattr(tl, name)
    if hasattr(tl.math, name):
        return getattr(tl.math, name)
    return obj
