"""tl.inline_asm_elementwise on NVIDIA GPUs: one LLVM inline-asm call per group of `pack` elements.

A group is `pack` consecutive elements along the last dimension held in consecutive registers
of one thread. Elements narrower than 32 bits travel packed: up to 32 // bits of them per
operand, as an integer of their combined width (four i8 in one `r` register, two fp16 in one);
wider elements travel one per operand. Operands are numbered outputs first (each result's
operands in turn), then inputs, as in Triton.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...layouts import REGISTER, LinearLayout
from ..llvm.scalar import I32
from .tiles import GPUTile, blocked_for, num_regs, nv_type

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_inline_asm", "packed_layout"]


def _bits(e: T.ElemType) -> int:
    return 64 if isinstance(e, T.PointerType) else max(8, e.bits)


def _chunk(e: T.ElemType, pack: int) -> int:
    """Elements per asm operand (i1 values travel one per operand)."""
    if isinstance(e, T.ScalarType) and e.bits == 1:
        return 1
    b = _bits(e)
    return min(pack, 32 // b) if b < 32 else 1


def _packs_last_dim(layout: LinearLayout, pack: int) -> bool:
    rank = len(layout.out_dims)
    regs = layout.bases(REGISTER)
    need = pack.bit_length() - 1
    return len(regs) >= need and all(
        regs[k] == tuple((1 << k) if d == rank - 1 else 0 for d in range(rank)) for k in range(need))


def packed_layout(lw: NvLowering, shape: tuple[int, ...], pack: int) -> LinearLayout:
    """The canonical layout, or a blocked one with `pack` elements per thread along the last dim."""
    layout = lw.canonical(shape)
    if _packs_last_dim(layout, pack):
        return layout
    return blocked_for(shape, pack, lw.num_warps)


def _to_operands(b: ir.IRBuilder, vals: list[ir.Value], e: T.ElemType, pack: int) -> list[ir.Value]:
    c = _chunk(e, pack)
    if c == 1:
        return list(vals)
    out = []
    ety = vals[0].type
    for i in range(0, len(vals), c):
        vec = ir.Constant(ir.VectorType(ety, c), None)
        for k, v in enumerate(vals[i:i + c]):
            vec = b.insert_element(vec, v, ir.Constant(I32, k))
        out.append(b.bitcast(vec, ir.IntType(c * _bits(e))))
    return out


def _operand_types(e: T.ElemType, pack: int) -> list[ir.Type]:
    c = _chunk(e, pack)
    if c == 1:
        return [nv_type(e)] * pack
    return [ir.IntType(c * _bits(e))] * (pack // c)


def _from_operands(b: ir.IRBuilder, words: list[ir.Value], e: T.ElemType, pack: int) -> list[ir.Value]:
    c = _chunk(e, pack)
    if c == 1:
        return list(words)
    ety = nv_type(e)
    out = []
    for w in words:
        vec = b.bitcast(w, ir.VectorType(ety, c))
        out += [b.extract_element(vec, ir.Constant(I32, k)) for k in range(c)]
    return out


def _call(lw: NvLowering, op: Op, ins: list[list[ir.Value]], pack: int) -> list[list[ir.Value]]:
    """One asm call for a group: ins[i] are input i's `pack` elements; returns each result's."""
    b = lw.b
    in_elems = [T.elem_of(v.type) for v in op.operands]
    out_elems = [T.elem_of(r.type) for r in op.results]
    args: list[ir.Value] = []
    for vals, e in zip(ins, in_elems, strict=True):
        args += _to_operands(b, vals, e, pack)
    out_types: list[ir.Type] = []
    for e in out_elems:
        out_types += _operand_types(e, pack)
    ret: ir.Type = out_types[0] if len(out_types) == 1 else ir.LiteralStructType(out_types)
    fty = ir.FunctionType(ret, [a.type for a in args])
    res = b.asm(fty, op.attrs["asm"], op.attrs["constraints"], args, side_effect=not op.attrs["pure"])
    words = [res] if len(out_types) == 1 else [b.extract_value(res, i) for i in range(len(out_types))]
    outs, pos = [], 0
    for e in out_elems:
        n = len(_operand_types(e, pack))
        outs.append(_from_operands(b, words[pos:pos + n], e, pack))
        pos += n
    return outs


def lower_inline_asm(lw: NvLowering, op: Op) -> None:
    pack = int(op.attrs["pack"])
    if pack < 1 or pack & (pack - 1):
        raise UnsupportedError(f"inline_asm_elementwise: pack={pack} must be a power of two", op.loc)
    shape = T.shape_of(op.results[0].type)
    if not shape:
        outs = _call(lw, op, [[lw.scalar(v)] for v in op.operands], 1)
        for r, vals in zip(op.results, outs, strict=True):
            lw.vals[r] = vals[0]
        return
    if shape[-1] % pack:
        raise UnsupportedError(f"inline_asm_elementwise: pack={pack} does not divide the last dimension "
                               f"({shape[-1]}) of the result", op.loc, hint="use a smaller pack")
    layout = lw.layout(op.results[0])  # packed_layout, planned (layout_plan.py)
    tiles = [lw.tile(v, layout) for v in op.operands]
    n = num_regs(layout)
    results: list[list[ir.Value]] = [[] for _ in op.results]
    for r0 in range(0, n, pack):
        outs = _call(lw, op, [t.regs[r0:r0 + pack] for t in tiles], pack)
        for acc, vals in zip(results, outs, strict=True):
            acc += vals
    for r, regs in zip(op.results, results, strict=True):
        lw.vals[r] = GPUTile(layout, regs)
