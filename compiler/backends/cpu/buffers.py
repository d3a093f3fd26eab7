"""A materialized tile of the CPU lowering: a pointer and strides over its elements."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ir import types as T
from ..llvm.scalar import I64, llvm_type

__all__ = ["Buf", "contiguous_strides"]


@dataclass
class Buf:
    """A materialized tile: `ptr` to elements with the given strides (in elements)."""

    ptr: ir.Value
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    elem: T.ElemType
    alloc: int  # identity of the underlying allocation

    def addr(self, b: ir.IRBuilder, idx: tuple[ir.Value, ...]) -> ir.Value:
        off: ir.Value | None = None
        for i, s in zip(idx, self.strides, strict=True):
            if s == 0:
                continue
            term = i if s == 1 else b.mul(i, ir.Constant(I64, s))
            off = term if off is None else b.add(off, term)
        if off is None:
            return self.ptr
        return b.gep(self.ptr, [off], inbounds=True, source_etype=llvm_type(self.elem))


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc if d > 1 else 0)
        acc *= d
    return tuple(reversed(out))
