"""Moving a tile between layouts on AMDGPU: within each thread's registers when the thread
already holds every element it needs, else through LDS.

One routine serves a layout conversion, a broadcast, a transpose and a reshape: the destination
thread reads, for its element at coordinates c, the source element at linear index
sum_d c[d] * strides[d] of the source tile (row-major), with `strides` the source's own strides
(a conversion), zero along broadcast dims, permuted (a transpose) or the destination's row-major
strides (a reshape, which keeps the row-major order of the elements).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE, WARP, LinearLayout
from ..llvm.scalar import I1, I8, I32, I64
from .tiles import GPUTile, amd_type, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["convert", "move", "register_map", "row_major", "spill", "linear_index", "lds_load", "lds_store"]


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def convert(lw: AmdLowering, x: GPUTile, target: LinearLayout, elem: T.ElemType, op: Op | None) -> GPUTile:
    """`x` (of the same shape) in `target`."""
    return move(lw, x, target, row_major(x.layout.out_shape), elem, op)


def move(lw: AmdLowering, x: GPUTile, target: LinearLayout, strides: tuple[int, ...], elem: T.ElemType,
         op: Op | None) -> GPUTile:
    """The tile in `target` whose element c is `x`'s element at linear index sum c[d] * strides[d]."""
    m = register_map(x.layout, target, strides)
    if m is not None:
        return GPUTile(target, [x.regs[i] for i in m])
    return _through_lds(lw, x, target, strides, elem, op)


def _linear(layout: LinearLayout, c: Sequence[int]) -> int:
    return sum(v * s for v, s in zip(c, row_major(layout.out_shape), strict=True))


def register_map(src: LinearLayout, dst: LinearLayout, strides: tuple[int, ...]) -> list[int] | None:
    """For each register of `dst`, the register of `src` in the same thread holding its element,
    or None when some element lives in another thread. Each lane and wave bit must move the same
    source element in both layouts; then a register's element differs between threads by the
    same offset in both, and the register parts alone decide."""
    if src.in_dim_size(LANE) != dst.in_dim_size(LANE) or src.in_dim_size(WARP) != dst.in_dim_size(WARP):
        return None
    for name in (LANE, WARP):
        for bs, bd in zip(src.bases(name), dst.bases(name), strict=True):
            if _linear(src, bs) != sum(v * s for v, s in zip(bd, strides, strict=True)):
                return None
    have: dict[int, int] = {}
    for r in range(num_regs(src)):
        have.setdefault(_linear(src, reg_coords(src, r)), r)
    out = []
    for r in range(num_regs(dst)):
        hit = have.get(sum(v * s for v, s in zip(reg_coords(dst, r), strides, strict=True)))
        if hit is None:
            return None
        out.append(hit)
    return out


def _index(lw: AmdLowering, layout: LinearLayout, r: int, strides: Sequence[int]) -> ir.Value:
    """The linear index sum c[d] * strides[d] of register r's element in this thread (i32)."""
    b = lw.b
    hw = lw.hw_coords(layout)
    idx: ir.Value = ir.Constant(I32, 0)
    for h, c, s in zip(hw, reg_coords(layout, r), strides, strict=True):
        if not s:
            continue
        coord = b.xor(h, ir.Constant(I32, c)) if c else h
        term = b.mul(coord, ir.Constant(I32, s)) if s != 1 else coord
        idx = term if isinstance(idx, ir.Constant) and idx.constant == 0 else b.add(idx, term)
    return idx


def _slot_type(elem: T.ElemType) -> ir.Type:
    """How an element sits in LDS: booleans as bytes, pointers as i64."""
    if elem == T.i1:
        return I8
    return I64 if isinstance(elem, T.PointerType) else amd_type(elem)


def lds_addr(lw: AmdLowering, base: ir.Value, index: ir.Value, ty: ir.Type) -> ir.Value:
    """The address of element `index` of type `ty` in the LDS area starting at `base`."""
    b = lw.b
    pty = ir.PointerType(ty, addrspace=3)
    # the area itself is a global: its cast is a constant expression, not an instruction
    p = base.bitcast(pty) if isinstance(base, ir.GlobalVariable) else b.bitcast(base, pty)
    idx = ir.Constant(I64, index.constant) if isinstance(index, ir.Constant) else b.zext(index, I64)
    return b.gep(p, [idx])


def lds_store(lw: AmdLowering, base: ir.Value, index: ir.Value, v: ir.Value, elem: T.ElemType) -> None:
    b = lw.b
    if elem == T.i1:
        v = b.zext(v, I8)
    elif isinstance(elem, T.PointerType):
        v = b.ptrtoint(v, I64)
    b.store(v, lds_addr(lw, base, index, _slot_type(elem)))


def lds_load(lw: AmdLowering, base: ir.Value, index: ir.Value, elem: T.ElemType) -> ir.Value:
    b = lw.b
    ty = _slot_type(elem)
    v = b.load(lds_addr(lw, base, index, ty), typ=ty)
    if elem == T.i1:
        return b.trunc(v, I1)
    return b.inttoptr(v, amd_type(elem)) if isinstance(elem, T.PointerType) else v


def elem_bytes(elem: T.ElemType) -> int:
    return 8 if isinstance(elem, T.PointerType) else max(1, elem.bits // 8)


def spill(lw: AmdLowering, x: GPUTile, elem: T.ElemType, op: Op | None) -> ir.Value:
    """`x` stored row-major in the LDS scratch area, visible to the whole workgroup (between two
    barriers); returns the area."""
    n = 1
    for s in x.layout.out_shape:
        n *= s
    base = lw.lds(n * elem_bytes(elem), op)
    src_strides = row_major(x.layout.out_shape)
    lw.barrier()  # the scratch area's previous readers are done
    # copies (threads and registers that repeat another's elements) write the same value to the
    # same slot: harmless, and cheaper than predicating them off
    seen: set[int] = set()
    for r in range(num_regs(x.layout)):
        key = _linear(x.layout, reg_coords(x.layout, r))
        if key in seen:
            continue
        seen.add(key)
        lds_store(lw, base, _index(lw, x.layout, r, src_strides), x.regs[r], elem)
    lw.barrier()
    return base


def linear_index(lw: AmdLowering, layout: LinearLayout, r: int) -> ir.Value:
    """The row-major index of register r's element in this thread (i32)."""
    return _index(lw, layout, r, row_major(layout.out_shape))


def _through_lds(lw: AmdLowering, x: GPUTile, target: LinearLayout, strides: tuple[int, ...], elem: T.ElemType,
                 op: Op | None) -> GPUTile:
    base = spill(lw, x, elem, op)
    regs = [lds_load(lw, base, _index(lw, target, r, strides), elem) for r in range(num_regs(target))]
    return GPUTile(target, regs)
