"""Reductions on AMDGPU: within a thread, then across the lanes of a wavefront that hold the
reduced dim (a butterfly of ds_bpermute exchanges, which address all 64 lanes), then across the
wavefronts through LDS with a workgroup barrier on either side.

The order of combination is the same in every thread, so every copy of a result is the same
value (threads holding copies later store or compare them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Op
from ...ir.ops import ASSOCIATIVE
from ...layouts import LANE, REGISTER, WARP, LinearLayout, slice_layout
from ..llvm.scalar import I32, I64
from .convert import _index, elem_bytes, lds_addr, lds_load, lds_store, row_major
from .tiles import GPUTile, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_reduce", "lane_xor"]


def _combine(lw: AmdLowering, region: Block, acc: list[ir.Value], new: list[ir.Value]) -> list[ir.Value]:
    for a, v in zip(region.args, acc + new, strict=True):
        lw.vals[a] = v
    lw.lower_block(region)
    return [lw.scalar(y) for y in region.ops[-1].operands]


def _bits(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return ty.width
    if isinstance(ty, ir.PointerType):
        return 64
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]


def lane_xor(lw: AmdLowering, v: ir.Value, mask: int) -> ir.Value:
    """The value `v` of lane (this lane XOR mask): ds_bpermute moves 32-bit words, addressed by
    the source lane times 4; wider values go as two words, narrower ones widened."""
    b = lw.b
    ty = v.type
    bits = _bits(ty)
    if isinstance(ty, ir.PointerType):
        as_int = b.ptrtoint(v, I64)
    else:
        as_int = v if isinstance(ty, ir.IntType) else b.bitcast(v, ir.IntType(bits))
    addr = b.shl(b.xor(lw.lane, ir.Constant(I32, mask)), ir.Constant(I32, 2))
    if bits == 64:
        words = [b.trunc(as_int, I32), b.trunc(b.lshr(as_int, ir.Constant(I64, 32)), I32)]
    else:
        words = [b.zext(as_int, I32) if bits < 32 else as_int]
    moved = [lw.intrinsic("llvm.amdgcn.ds.bpermute", I32, [addr, w]) for w in words]
    if bits == 64:
        out = b.or_(b.zext(moved[0], I64), b.shl(b.zext(moved[1], I64), ir.Constant(I64, 32)))
    else:
        out = b.trunc(moved[0], ir.IntType(bits)) if bits < 32 else moved[0]
    if isinstance(ty, ir.PointerType):
        return b.inttoptr(out, ty)
    return out if isinstance(ty, ir.IntType) else b.bitcast(out, ty)


def lower_reduce(lw: AmdLowering, op: Op) -> None:
    axis = op.attrs["axis"]
    region = op.regions[0]
    first = lw.tile(op.operands[0])
    layout = first.layout
    xs = [lw.tile(v, layout) for v in op.operands]
    elems = [T.elem_of(v.type) for v in op.operands]
    out_layout = slice_layout(layout, axis)
    out_shape = out_layout.out_shape if T.shape_of(op.results[0].type) else ()
    saved = lw.fmf
    if all(o.opcode in ASSOCIATIVE or o.opcode == "yield" for o in region.ops):
        lw.fmf = ("reassoc", "nsz", "contract")
    # 1. within the thread: registers grouped by their coordinates outside the reduced axis
    out_index: dict[tuple[int, ...], int] = {}
    for r in range(num_regs(out_layout)):
        out_index.setdefault(reg_coords(out_layout, r), r)
    dup = sum(1 << k for k, basis in enumerate(layout.bases(REGISTER)) if not any(basis))
    acc: dict[int, list[ir.Value]] = {}
    for r in range(num_regs(layout)):
        if r & dup:
            continue
        c = reg_coords(layout, r)
        key = out_index[tuple(v for d, v in enumerate(c) if d != axis)]
        vals = [x.regs[r] for x in xs]
        acc[key] = vals if key not in acc else _combine(lw, region, acc[key], vals)
    # 2. across the lanes holding different positions along the axis
    for k, basis in enumerate(layout.bases(LANE)):
        if basis[axis]:
            for key, vals in acc.items():
                acc[key] = _combine(lw, region, vals, [lane_xor(lw, v, 1 << k) for v in vals])
    # 3. across the wavefronts, through LDS
    wave_bits = [k for k, basis in enumerate(layout.bases(WARP)) if basis[axis]]
    if wave_bits:
        _across_waves(lw, op, region, acc, wave_bits, out_layout, out_shape, elems)
    lw.fmf = saved
    regs = [[acc[r][i] if r in acc else acc[out_index[reg_coords(out_layout, r)]][i]
             for r in range(num_regs(out_layout))] for i in range(len(xs))]
    for i, res in enumerate(op.results):
        lw.vals[res] = GPUTile(out_layout, regs[i]) if out_shape else regs[i][0]


def _across_waves(lw: AmdLowering, op: Op, region: Block, acc: dict[int, list[ir.Value]], wave_bits: list[int],
                  out_layout: LinearLayout, out_shape: tuple[int, ...], elems: list[T.ElemType]) -> None:
    """Each wave writes its partial results to its slot of each output element (slot = the
    wave's bits along the axis, packed); after a barrier every thread combines the slots in
    order."""
    b = lw.b
    nw = 1 << len(wave_bits)
    n_out = 1
    for s in out_shape:
        n_out *= s
    widx: ir.Value = ir.Constant(I32, 0)
    for j, k in enumerate(wave_bits):
        bit = b.and_(b.lshr(lw.warp, ir.Constant(I32, k)), ir.Constant(I32, 1))
        widx = b.or_(widx, b.shl(bit, ir.Constant(I32, j)))
    offsets, off = [], 0
    for e in elems:
        off = -(-off // 8) * 8
        offsets.append(off)
        off += n_out * nw * elem_bytes(e)
    base = lw.lds(off, op)
    bases = [lds_addr(lw, base, ir.Constant(I32, o), ir.IntType(8)) if o else base for o in offsets]
    lw.barrier()  # earlier readers of the scratch area are done
    for key, vals in acc.items():
        li = _out_index(lw, out_layout, key, out_shape)
        slot = b.add(b.mul(li, ir.Constant(I32, nw)), widx)
        for v, p, e in zip(vals, bases, elems, strict=True):
            lds_store(lw, p, slot, v, e)
    lw.barrier()
    for key in list(acc):
        row = b.mul(_out_index(lw, out_layout, key, out_shape), ir.Constant(I32, nw))
        cur: list[ir.Value] | None = None
        for j in range(nw):
            slot = b.add(row, ir.Constant(I32, j))
            vals = [lds_load(lw, p, slot, e) for p, e in zip(bases, elems, strict=True)]
            cur = vals if cur is None else _combine(lw, region, cur, vals)
        assert cur is not None
        acc[key] = cur


def _out_index(lw: AmdLowering, layout: LinearLayout, r: int, shape: tuple[int, ...]) -> ir.Value:
    """The row-major index of register r's output element in this thread."""
    if not shape:
        return ir.Constant(I32, 0)
    return _index(lw, layout, r, row_major(shape))
