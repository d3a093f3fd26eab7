"""Reductions on NVIDIA GPUs: within a thread, then butterfly shuffles across the lanes that
hold the reduced dimension, then across warps through shared memory (docs/layouts.md#reductions-and-scans)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Op
from ...ir.ops import ASSOCIATIVE
from ...layouts import LANE, REGISTER, WARP, slice_layout
from ..llvm.scalar import I16, I32, I64
from .convert import fold_add, fold_mul, fold_or, linear_index, smem_load, smem_store
from .tiles import GPUTile, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_reduce"]


def _combine(lw: NvLowering, region: Block, acc: list[ir.Value], new: list[ir.Value]) -> list[ir.Value]:
    for a, v in zip(region.args, acc + new, strict=True):
        lw.vals[a] = v
    lw.lower_block(region)
    return [lw.scalar(y) for y in region.ops[-1].operands]


def _shfl_xor(lw: NvLowering, v: ir.Value, mask: int) -> ir.Value:
    b = lw.b
    ty = v.type
    bits = ty.width if isinstance(ty, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]
    as_int = v if isinstance(ty, ir.IntType) else b.bitcast(v, ir.IntType(bits))
    words = []
    if bits == 64:
        words = [b.trunc(as_int, I32), b.trunc(b.lshr(as_int, ir.Constant(I64, 32)), I32)]
    else:
        words = [b.zext(as_int, I32) if bits < 32 else as_int]
    shuffled = [lw.intrinsic("llvm.nvvm.shfl.sync.bfly.i32", I32,
                             [ir.Constant(I32, -1), w, ir.Constant(I32, mask), ir.Constant(I32, 31)]) for w in words]
    if bits == 64:
        lo, hi = (b.zext(w, I64) for w in shuffled)
        out = b.or_(lo, b.shl(hi, ir.Constant(I64, 32)))
    elif bits < 32:
        out = b.trunc(shuffled[0], ir.IntType(bits))
    else:
        out = shuffled[0]
    return out if isinstance(ty, ir.IntType) else b.bitcast(out, ty)


def lower_reduce(lw: NvLowering, op: Op) -> None:
    axis = op.attrs["axis"]
    region = op.regions[0]
    xs = [lw.tile(v) for v in op.operands]
    layout = xs[0].layout
    xs = [lw.tile(v, layout) for v in op.operands]
    elems = [T.elem_of(v.type) for v in op.operands]
    out_layout = slice_layout(layout, axis)
    out_shape = out_layout.out_shape if T.shape_of(op.results[0].type) else ()
    saved = lw.fmf
    if all(o.opcode in ASSOCIATIVE or o.opcode == "yield" for o in region.ops):
        lw.fmf = ("reassoc", "nsz", "contract")
    # 1. within the thread: group registers by their coordinate outside the reduced axis
    out_index: dict[tuple[int, ...], int] = {}
    for r in range(num_regs(out_layout)):
        out_index.setdefault(reg_coords(out_layout, r), r)
    dup = 0
    for k, basis in enumerate(layout.bases(REGISTER)):
        if not any(basis):
            dup |= 1 << k
    acc: dict[int, list[ir.Value]] = {}
    for r in range(num_regs(layout)):
        if r & dup:
            continue
        c = reg_coords(layout, r)
        key = out_index[tuple(v for d, v in enumerate(c) if d != axis)]
        vals = [x.regs[r] for x in xs]
        acc[key] = vals if key not in acc else _combine(lw, region, acc[key], vals)
    # 2. across lanes holding different positions along the axis
    for k, basis in enumerate(layout.bases(LANE)):
        if basis[axis]:
            for key, vals in acc.items():
                acc[key] = _combine(lw, region, vals, [_shfl_xor(lw, v, 1 << k) for v in vals])
    # 3. across warps, through shared memory
    warp_bits = [k for k, basis in enumerate(layout.bases(WARP)) if basis[axis]]
    if warp_bits:
        _across_warps(lw, region, acc, warp_bits, out_layout, out_shape, elems)
    lw.fmf = saved
    regs_per_out = [[acc[r][i] if r in acc else acc[out_index[reg_coords(out_layout, r)]][i]
                     for r in range(num_regs(out_layout))] for i in range(len(xs))]
    for i, res in enumerate(op.results):
        lw.vals[res] = GPUTile(out_layout, regs_per_out[i]) if out_shape else regs_per_out[i][0]


def _across_warps(lw: NvLowering, region: Block, acc: dict[int, list[ir.Value]], warp_bits: list[int],
                  out_layout: object, out_shape: tuple[int, ...], elems: list[T.ElemType]) -> None:
    b = lw.b
    nw = 1 << len(warp_bits)
    n_out = 1
    for s in out_shape:
        n_out *= s
    # this warp's slot: its bits `warp_bits` packed densely (runs of adjacent bits move as one field)
    widx: ir.Value = ir.Constant(I32, 0)
    j = 0
    while j < len(warp_bits):
        n = 1
        while j + n < len(warp_bits) and warp_bits[j + n] == warp_bits[j] + n:
            n += 1
        k = warp_bits[j]
        field = b.and_(b.lshr(lw.warp, ir.Constant(I32, k)) if k else lw.warp, ir.Constant(I32, (1 << n) - 1))
        widx = fold_or(b, widx, b.shl(field, ir.Constant(I32, j)) if j else field)
        j += n
    sizes = [8 if isinstance(e, T.PointerType) else max(1, e.bits // 8) for e in elems]
    offsets, off = [], 0
    for s in sizes:
        offsets.append(off)
        off += n_out * nw * s
    base = lw.scratch(off)
    lw.barrier()
    for key, vals in acc.items():
        li = linear_index(lw, out_layout, key, out_shape) if out_shape else ir.Constant(I32, 0)  # type: ignore[arg-type]
        slot = fold_add(b, fold_mul(b, li, nw), widx)
        for v, o, _e in zip(vals, offsets, elems, strict=True):
            smem_store(lw, _byte_offset(lw, base, o), slot, v)
    lw.barrier()
    for key in list(acc):
        li = linear_index(lw, out_layout, key, out_shape) if out_shape else ir.Constant(I32, 0)  # type: ignore[arg-type]
        row = fold_mul(b, li, nw)
        cur: list[ir.Value] | None = None
        for j in range(nw):
            slot = fold_add(b, row, ir.Constant(I32, j))
            vals = [smem_load(lw, _byte_offset(lw, base, o), slot, nv_type(e))
                    for o, e in zip(offsets, elems, strict=True)]
            cur = vals if cur is None else _combine(lw, region, cur, vals)
        assert cur is not None
        acc[key] = cur


def _byte_offset(lw: NvLowering, base: ir.Value, off: int) -> ir.Value:
    if off == 0:
        return base
    b = lw.b
    p = b.bitcast(base, ir.PointerType(ir.IntType(8), addrspace=3))
    return b.gep(p, [ir.Constant(I64, off)])


_ = (I16, REGISTER)
