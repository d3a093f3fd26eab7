"""Layout conversion of register tiles: a register gather when each thread already holds the
elements it needs (same lane/warp map), otherwise a round trip through shared memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...layouts import LANE, REGISTER, WARP, LinearLayout
from ..llvm.scalar import I32, I64
from .tiles import GPUTile, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["convert", "linear_index", "register_offsets", "thread_offsets", "register_map", "fold_or", "fold_add",
           "fold_mul", "spill", "through_shared"]


def _hw_bases(layout: LinearLayout, proj: set[int] | None = None) -> tuple[tuple[int, ...], ...]:
    out = []
    for name in (LANE, WARP):
        for basis in layout.bases(name):
            out.append(tuple(0 if proj and d in proj else v for d, v in enumerate(basis)))
    return tuple(out)


def register_map(src: LinearLayout, dst: LinearLayout, zero_dims: set[int]) -> list[int] | None:
    """For each dst register, the src register holding the same element (dims in `zero_dims`
    read at coordinate 0), if the thread->element maps agree; else None."""
    if _hw_bases(src) != _hw_bases(dst, zero_dims):
        return None
    index: dict[tuple[int, ...], int] = {}
    for r in range(num_regs(src)):
        index.setdefault(reg_coords(src, r), r)
    out = []
    for r in range(num_regs(dst)):
        c = tuple(0 if d in zero_dims else v for d, v in enumerate(reg_coords(dst, r)))
        hit = index.get(c)
        if hit is None:
            return None
        out.append(hit)
    return out


def register_offsets(layout: LinearLayout, shape: tuple[int, ...]) -> list[int] | None:
    """Each register's part of the row-major linear index (in a tile of `shape`) of its element, when
    no coordinate bit comes from both the lane/warp bases and the register bases: a coordinate is
    then `hw | reg` = `hw + reg`, so a thread's linear index of register r is its own index (that of
    register 0) plus this constant. None when some bit is shared."""
    rank = len(shape)
    hw_bits = [0] * rank
    for name in (LANE, WARP):
        for basis in layout.bases(name):
            hw_bits = [m | v for m, v in zip(hw_bits, basis, strict=True)]
    reg_bits = [0] * rank
    for basis in layout.bases(REGISTER):
        reg_bits = [m | v for m, v in zip(reg_bits, basis, strict=True)]
    if any(h & g for h, g in zip(hw_bits, reg_bits, strict=True)):
        return None
    strides = _row_major_strides(shape)
    return [sum(c * k for c, k in zip(reg_coords(layout, r), strides, strict=True)) for r in range(num_regs(layout))]


def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1] * len(shape)
    for d in reversed(range(len(shape) - 1)):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


def thread_offsets(lw: NvLowering, layout: LinearLayout, shape: tuple[int, ...]) -> tuple[ir.Value, list[int]] | None:
    """This thread's row-major linear index (i32, built where the builder stands: computed once in
    the entry block it would stay live across the loops, one more register for the whole kernel)
    and each register's constant offset from it (register_offsets), or None where the index does
    not split. A spill of 128 accumulators is then one address and 128 constant offsets. Not inside a
    loop: there LLVM hoists the thread's addresses out of it, registers live across the whole loop
    (an attention's P round trip at 128 registers then spilled), where the per-register form is
    recomputed cheaply."""
    if lw.loop_depth or not lw.split_addresses:
        return None
    key = (layout, shape)
    if key not in lw.register_offsets:
        lw.register_offsets[key] = register_offsets(layout, shape)
    offs = lw.register_offsets[key]
    if offs is None:
        return None
    hw = lw.hw_coords(layout)
    base: ir.Value = ir.Constant(I32, 0)
    for d, stride in enumerate(_row_major_strides(shape)):
        base = fold_add(lw.b, base, fold_mul(lw.b, hw[d], stride))
    lw.used_split = True
    return base, offs


def linear_index(lw: NvLowering, layout: LinearLayout, r: int, shape: tuple[int, ...]) -> ir.Value:
    """Row-major linear index (i32) of register r's element for this thread."""
    b = lw.b
    split = thread_offsets(lw, layout, shape)
    if split is not None:
        return fold_add(b, split[0], ir.Constant(I32, split[1][r]))
    hw = lw.hw_coords(layout)
    rc = reg_coords(layout, r)
    idx: ir.Value = ir.Constant(I32, 0)
    stride = 1
    for d in reversed(range(len(shape))):
        c = fold_or(b, hw[d], ir.Constant(I32, rc[d]))
        idx = fold_add(b, idx, fold_mul(b, c, stride))
        stride *= shape[d]
    return idx


# i32 arithmetic folded in Python when an operand is a constant: the lowering computes many
# indices from constants (register coordinates, warp slots), and every instruction not emitted is
# time saved in building, printing, parsing and optimising the IR.
def _const(x: ir.Value) -> int | None:
    return x.constant if isinstance(x, ir.Constant) and isinstance(x.constant, int) else None


def fold_or(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    cx, cy = _const(x), _const(y)
    if cx is not None and cy is not None:
        return ir.Constant(I32, cx | cy)
    if cx == 0:
        return y
    return x if cy == 0 else b.or_(x, y)


def fold_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    cx, cy = _const(x), _const(y)
    if cx is not None and cy is not None:
        return ir.Constant(I32, cx + cy)
    if cx == 0:
        return y
    return x if cy == 0 else b.add(x, y)


def fold_mul(b: ir.IRBuilder, x: ir.Value, k: int) -> ir.Value:
    cx = _const(x)
    if cx is not None:
        return ir.Constant(I32, cx * k)
    return x if k == 1 else b.mul(x, ir.Constant(I32, k))


def spill(lw: NvLowering, x: GPUTile, shape: tuple[int, ...], elem: T.ElemType) -> ir.Value:
    """Write tile `x` (of `shape`) to the shared scratch area in row-major order, between the
    barriers that order it after earlier users and before the reads; returns the area."""
    n = 1
    for s in shape:
        n *= s
    size = 8 if isinstance(elem, T.PointerType) else max(1, elem.bits // 8)
    base = lw.scratch(n * size)
    lw.barrier()
    split = thread_offsets(lw, x.layout, shape)
    if split is None:
        for r, v in enumerate(x.regs):
            smem_store(lw, base, linear_index(lw, x.layout, r, shape), v)
    else:
        b = lw.b
        vals = [b.ptrtoint(v, I64) if isinstance(v.type, ir.PointerType) else v for v in x.regs]
        p = _addr(lw, base, split[0], vals[0].type)  # the registers' own type, as smem_store addresses
        for v, off in zip(vals, split[1], strict=True):
            b.store(v, _at(b, p, off))
    lw.barrier()
    return base


def through_shared(lw: NvLowering, x: GPUTile, src_shape: tuple[int, ...], dst: LinearLayout,
                   elem: T.ElemType) -> GPUTile:
    """`x` re-read in layout `dst` (same elements in row-major order; the shapes may differ)."""
    base = spill(lw, x, src_shape, elem)
    ty = nv_type(elem)
    shape = dst.out_shape
    split = thread_offsets(lw, dst, shape)
    if split is None or isinstance(ty, ir.PointerType):
        return GPUTile(dst, [smem_load(lw, base, linear_index(lw, dst, r, shape), ty) for r in range(num_regs(dst))])
    b = lw.b
    p = _addr(lw, base, split[0], ty)
    return GPUTile(dst, [b.load(_at(b, p, off), typ=ty) for off in split[1]])


def _at(b: ir.IRBuilder, p: ir.Value, off: int) -> ir.Value:
    """`p` advanced by `off` elements (no instruction for 0)."""
    return b.gep(p, [ir.Constant(I64, off)]) if off else p


def smem_store(lw: NvLowering, base: ir.Value, idx: ir.Value, v: ir.Value) -> None:
    """Store `v` as element `idx` of the shared scratch area (pointers travel as i64)."""
    b = lw.b
    if isinstance(v.type, ir.PointerType):
        v = b.ptrtoint(v, I64)
    b.store(v, _addr(lw, base, idx, v.type))


def smem_load(lw: NvLowering, base: ir.Value, idx: ir.Value, ty: ir.Type) -> ir.Value:
    b = lw.b
    if isinstance(ty, ir.PointerType):
        return b.inttoptr(b.load(_addr(lw, base, idx, I64), typ=I64), ty)
    return b.load(_addr(lw, base, idx, ty), typ=ty)


def _addr(lw: NvLowering, base: ir.Value, idx: ir.Value, ty: ir.Type) -> ir.Value:
    """Address of element `idx` of type `ty` in the shared scratch area starting at `base`."""
    b = lw.b
    pty = ir.PointerType(ty, addrspace=3)
    # the scratch area itself is a global: its cast is a constant expression, not an instruction
    p = base.bitcast(pty) if isinstance(base, ir.GlobalVariable) else b.bitcast(base, pty)
    c = _const(idx)
    return b.gep(p, [ir.Constant(I64, c) if c is not None else b.zext(idx, I64)])


def convert(lw: NvLowering, x: GPUTile, dst: LinearLayout, elem: T.ElemType) -> GPUTile:
    if x.layout == dst:
        return x
    m = register_map(x.layout, dst, set())
    if m is not None:
        return GPUTile(dst, [x.regs[i] for i in m])
    return through_shared(lw, x, dst.out_shape, dst, elem)


_ = REGISTER
