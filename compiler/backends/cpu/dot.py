"""tl.dot on the CPU, fp32: a register-blocked micro-kernel.

C[i0:i0+MR, j0:j0+NV*VW] is held in MR x NV vector registers (VW lanes: the host's vector width)
across the whole K loop: per k, NV vector loads of B's row, MR scalar loads of A's column, each
broadcast, and MR x NV fused multiply-adds; C is read once before the loop and written once after
it. The sums run over k in order, as the scalar loop's. Tiles whose M or N the blocks do not divide,
and other element types, take lower_dot's plain loops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Function, Value
from ...passes.fold import splat_constant
from ...passes.uses import replace_all_uses, use_counts
from ..llvm.scalar import F32, I32, I64
from .engine import vector_bits
from .loops import loop_carry

if TYPE_CHECKING:
    from .lower import Buf, Lowering

__all__ = ["blocked_shape", "dot_blocked", "fold_dot_add"]


def fold_dot_add(fn: Function) -> None:
    """`x + tl.dot(a, b)` (a dot with a zero accumulator, read only by the add) becomes
    `tl.dot(a, b, x)`, as Triton combines them: the dot then sums into x's buffer (in place for a
    loop's accumulator) instead of a zeroed one plus a pass adding the two tiles."""
    counts = use_counts(fn.body)
    mapping: dict[Value, Value] = {}

    def visit(block: Block) -> None:
        order = {id(op): i for i, op in enumerate(block.ops)}
        for op in list(block.ops):
            for r in op.regions:
                visit(r)
            if op.opcode != "add" or not isinstance(op.result.type, T.TileType):
                continue
            for k in (0, 1):
                d, x = op.operands[k].op, op.operands[1 - k]
                if (d is None or d.opcode != "dot" or d.parent is not block or counts.get(d.result) != 1
                        or x.type != d.result.type or splat_constant(d.operands[2]) != 0):
                    continue
                xd = x.op
                if xd is not None and xd.parent is block and order[id(xd)] > order[id(d)]:
                    continue  # x is computed after the dot
                d.operands = [d.operands[0], d.operands[1], x]
                mapping[op.result] = d.result
                block.ops.remove(op)
                break

    visit(fn.body)
    replace_all_uses(fn, mapping)


Idx = tuple[ir.Value, ...]


def blocked_shape(m: int, n: int) -> tuple[int, int, int] | None:
    """(MR, NV, VW) for an m x n fp32 tile: MR rows of NV vectors of VW lanes per block (the rows
    past the last full block: one block of fewer rows); None: N not a multiple of the vector width."""
    vw = 16 if vector_bits() == 512 else 8  # fp32 lanes (8: two 128-bit halves without AVX2)
    nv = 2 if n % (2 * vw) == 0 else 1 if n % vw == 0 else 0
    if not nv:
        return None
    return (6 if nv == 2 else 8), nv, vw  # 12 or 8 accumulators: FMAs enough in flight, in 16 registers


def dot_blocked(lw: Lowering, A: Buf, B: Buf, C: Buf, bi: Idx, m: int, k: int, n: int,
                shape: tuple[int, int, int]) -> None:
    """C[bi] += A[bi] @ B[bi] (fp32 buffers, row-major), blocked as `shape` = (MR, NV, VW)."""
    mr_main, nv, vw = shape
    vt = ir.VectorType(F32, vw)
    name = f"llvm.fmuladd.v{vw}f32"
    fma = lw.m.globals.get(name) or ir.Function(lw.m, ir.FunctionType(vt, [vt, vt, vt]), name)
    zeros = ir.Constant(ir.VectorType(I32, vw), [0] * vw)
    undef = ir.Constant(vt, ir.Undefined)

    def at(buf: Buf, i: ir.Value, j: ir.Value) -> ir.Value:
        return buf.addr(lw.b, (*bi, i, j))

    def vec_at(buf: Buf, i: ir.Value, j: ir.Value) -> ir.Value:
        return lw.b.bitcast(at(buf, i, j), vt.as_pointer())

    def tile(i0: ir.Value, j0: ir.Value, mr: int) -> None:
        b = lw.b
        rows = [b.add(i0, ir.Constant(I64, r)) for r in range(mr)]
        cols = [b.add(j0, ir.Constant(I64, v * vw)) for v in range(nv)]
        init = [b.load(vec_at(C, i, j), typ=vt, align=4) for i in rows for j in cols]

        def step(kv: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            b = lw.b
            bv = [b.load(vec_at(B, kv, j), typ=vt, align=4) for j in cols]
            out = []
            for r, i in enumerate(rows):
                a = b.load(at(A, i, kv), typ=F32)
                s = b.shuffle_vector(b.insert_element(undef, a, ir.Constant(I32, 0)), undef, zeros)
                out += [b.call(fma, [s, bv[v], acc[r * nv + v]]) for v in range(nv)]
            return out

        acc = loop_carry(lw, 0, k, init, step, vector_width=-1)  # already vector code
        b = lw.b
        for (i, j), v in zip(((i, j) for i in rows for j in cols), acc, strict=True):
            b.store(v, vec_at(C, i, j), align=4)

    def panel(start: int, mr: int) -> Callable[[ir.Value], None]:
        def row_block(ib: ir.Value) -> None:
            i0 = lw.b.add(lw.b.mul(ib, ir.Constant(I64, mr)), ir.Constant(I64, start))
            lw.loop(n // (nv * vw), lambda jb: tile(i0, lw.b.mul(jb, ir.Constant(I64, nv * vw)), mr))

        return row_block

    full = m // mr_main
    lw.loop(full, panel(0, mr_main))
    if m % mr_main:
        lw.loop(1, panel(full * mr_main, m % mr_main))
