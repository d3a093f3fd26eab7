"""Tensor descriptors (`tl.make_tensor_descriptor`): a tiled view of a strided tensor.

`desc.load([i, j])` reads the block at element offsets (i, j); elements outside the tensor
read as zero (or NaN with padding_option="nan") and `desc.store` never writes them. A descriptor
lowers like a block pointer whose every dimension is bounds-checked, with the offsets given
per access instead of carried (on GPUs the same accesses become TMA copies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import errors as E
from ..ir import types as T
from ..language import builtins as B
from ..language import core as lc
from .values import BlockPointer, Shape, _BoundMethod, is_tensor

__all__ = ["TensorDescriptor", "DescriptorArg", "make_tensor_descriptor", "from_packed", "load", "store",
           "attribute"]


@dataclass(frozen=True)
class DescriptorArg:
    """How a host tensor descriptor argument specializes a kernel: element type, block shape and
    padding are compile-time; base, shape and strides arrive at run time as a pointer to int64
    words [base, shape..., strides...] (the runtime packs them)."""

    elem: T.ScalarType
    block_shape: tuple[int, ...]
    padding: str = "zero"


@dataclass(frozen=True)
class TensorDescriptor:
    """A descriptor inside a kernel: base pointer, shape (i32) and strides (i64) per dimension,
    the static block shape, and the padding of out-of-bounds reads."""

    base: lc.Tensor
    shape: tuple[lc.Tensor, ...]
    strides: tuple[lc.Tensor, ...]
    block_shape: tuple[int, ...]
    padding: str = "zero"

    @property
    def dtype(self) -> lc.dtype:
        elem = self.base.ir_elem
        assert isinstance(elem, T.PointerType)
        return lc.dtype(elem.elem)


def make_tensor_descriptor(sem: Any, base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: str = "zero") -> TensorDescriptor:
    """Triton's checks, then the descriptor (what `tl.make_tensor_descriptor` returns)."""
    n = len(shape)
    if not 1 <= n <= 5:
        raise E.ShapeError(f"Expected 1 <= ndim <= 5 but got {n} dimensions")
    if len(strides) != n:
        raise E.ShapeError(f"Expected {n} strides but got {len(strides)}")
    if len(block_shape) != n:
        raise E.ShapeError(f"Expected block_shape to have {n} dimensions but got {len(block_shape)}")
    if not is_tensor(base) or base.is_tile() or not isinstance(base.ir_elem, T.PointerType):
        raise E.DtypeError("make_tensor_descriptor needs a pointer (a tensor argument) as base")
    blocks = []
    for b in block_shape:
        if is_tensor(b):
            raise E.ConstexprError("a descriptor's block_shape must be compile-time constants")
        b = int(b)
        if b <= 0 or b & (b - 1):
            raise E.ShapeError(f"descriptor block dimensions must be powers of two, got {list(block_shape)}")
        blocks.append(b)
    elem = base.ir_elem.elem
    assert isinstance(elem, T.ScalarType)
    nbytes = blocks[-1] * elem.nbytes
    if nbytes < 16:
        raise E.ShapeError(f"Descriptor block shape must have at least 16 bytes in the last dimension, but got "
                           f"{blocks[-1]} * {elem.nbytes} = {nbytes} bytes")
    last = strides[-1]
    if not is_tensor(last) and int(last) != 1:
        raise E.ShapeError(f"Tensor descriptor last dim must be 1 but got {last}")
    if padding_option not in ("zero", "nan"):
        raise E.ArgumentError(f"padding_option must be 'zero' or 'nan', got {padding_option!r}")
    if padding_option == "nan" and not elem.is_float:
        raise E.DtypeError("Padding option `nan` is not supported for integer blocks")
    return TensorDescriptor(
        base,
        tuple(sem.cast(sem.to_tensor(x), T.i32) for x in shape),
        tuple(sem.cast(sem.to_tensor(x), T.i64) for x in strides),
        tuple(blocks),
        padding_option,
    )


def from_packed(sem: Any, words: lc.Tensor, arg: DescriptorArg) -> TensorDescriptor:
    """The descriptor of a kernel parameter, read from its packed int64 words."""
    r = len(arg.block_shape)
    w = [sem.load(sem.add(words, i) if i else words, None, None) for i in range(1 + 2 * r)]
    base = sem.cast(w[0], T.PointerType(arg.elem))
    return TensorDescriptor(base, tuple(sem.cast(x, T.i32) for x in w[1:1 + r]), tuple(w[1 + r:]),
                            arg.block_shape, arg.padding)


def _block_pointer(sem: Any, d: TensorDescriptor, offsets: Any) -> BlockPointer:
    offs = list(offsets) if isinstance(offsets, (tuple, list)) else [offsets]
    if len(offs) != len(d.block_shape):
        raise E.ShapeError(f"a descriptor of rank {len(d.block_shape)} needs {len(d.block_shape)} offsets, "
                           f"got {len(offs)}")
    n = len(d.block_shape)
    return BlockPointer(d.base, tuple(sem.cast(s, T.i64) for s in d.shape), d.strides,
                        tuple(sem.cast(sem.to_tensor(o), T.i32) for o in offs), d.block_shape, tuple(range(n)))


def load(sem: Any, d: TensorDescriptor, offsets: Any) -> lc.Tensor:
    """The block at `offsets`; out-of-bounds elements padded."""
    bp = _block_pointer(sem, d, offsets)
    return sem.gen.block_ptr_load(bp, tuple(range(len(d.block_shape))), d.padding)


def store(sem: Any, d: TensorDescriptor, offsets: Any, value: Any) -> None:
    """Store `value` (the block's shape) at `offsets`; out-of-bounds elements are not written."""
    v = sem.to_tensor(value)
    if v.is_tile() and tuple(v.shape) != d.block_shape:
        raise E.ShapeError(f"descriptor store of a {list(v.shape)} value into a block of {list(d.block_shape)}")
    bp = _block_pointer(sem, d, offsets)
    sem.gen.block_ptr_store(bp, v, tuple(range(len(d.block_shape))))


def atomic(sem: Any, d: TensorDescriptor, kind: str, offsets: Any, value: Any) -> None:
    """`desc.atomic_<kind>(offsets, value)`: the atomic on every element of the block at `offsets`
    inside the tensor (Triton's descriptor reductions return nothing)."""
    if kind not in _ATOMICS:
        raise E.ArgumentError(f"tensor descriptors have no atomic_{kind}", hint="use atomic_add, atomic_min, "
                              "atomic_max, atomic_and, atomic_or or atomic_xor")
    if not isinstance(d, TensorDescriptor):
        raise E.ArgumentError("a descriptor atomic needs a tensor descriptor (tl.make_tensor_descriptor)")
    v = sem.to_tensor(value)
    if tuple(v.shape) != d.block_shape:
        raise E.ShapeError(f"descriptor atomic_{kind} of a {list(v.shape)} value into a block of "
                           f"{list(d.block_shape)}")
    ptr, mask = sem.gen._block_ptr_tile(_block_pointer(sem, d, offsets), tuple(range(len(d.block_shape))))
    sem.atomic(kind, ptr, v, mask, None, None)


_ATOMICS = ("add", "min", "max", "and", "or", "xor")


def attribute(gen: Any, d: TensorDescriptor, attr: str) -> Any:
    """`desc.load`, `desc.store`, `desc.atomic_add` (min, max, and, or, xor), `desc.block_shape`,
    `desc.block_type`, `desc.shape`, `desc.strides`, `desc.dtype`."""
    if attr == "block_shape":
        return Shape(d.block_shape)
    if attr == "shape":
        return d.shape
    if attr == "strides":
        return d.strides
    if attr == "dtype":
        return d.dtype
    if attr == "block_type":
        return lc.block_type(d.dtype, list(d.block_shape))
    if attr == "load":
        return _BoundMethod(B.load_tensor_descriptor, d)
    if attr == "store":
        return _BoundMethod(B.store_tensor_descriptor, d)
    if attr.startswith("atomic_") and attr[7:] in _ATOMICS:
        return _BoundMethod(B.atomic_tensor_descriptor, d, (attr[7:],))
    raise E.UnsupportedError(f"tensor descriptors have no attribute {attr!r}",
                             hint="a descriptor has load, store, atomic_add/min/max/and/or/xor, block_shape, "
                             "block_type, shape, strides and dtype")

