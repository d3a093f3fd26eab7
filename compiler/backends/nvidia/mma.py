"""`tl.dot` on tensor cores with `mma.sync` (sm_80+).

The operands go from their register layouts into padded row-major tiles in shared memory
(16-byte vector stores where a thread holds contiguous elements), then every warp reads its
fragments with `ldmatrix` and issues `mma.sync.m16n8k{8,16,32}` for its part of the output.
The result lives in the mma accumulator layout (compiler.layouts.mma_v2_accumulator), which
loops carry as is, so a K loop of dots moves no accumulator data.

Shared-memory rows are padded so that a row's stride is an odd multiple of 16 bytes: the 8
rows an `ldmatrix` phase reads then fall in 8 distinct 16-byte bank groups (no conflicts).

Instructions by operand type (row.col, f32 or s32 accumulators):
  fp16 m16n8k16, bf16 m16n8k16, fp32 as tf32 m16n8k8, int8 m16n8k32, fp8 e4m3/e5m2 m16n8k32
  (sm_89+). B fragments of 16-bit types come from a [K][N] tile with `ldmatrix.trans`; other
  widths need K contiguous per column, so B is stored transposed ([N][K]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE, WARP, LinearLayout
from ...layouts.distributed import mma_v2_accumulator
from ..llvm import scalar as S
from ..llvm.scalar import I8, I16, I32
from ..nvidia_targets import nv_target
from .staging import Offset, stage
from .tcgen05 import plan_tcgen05
from .tiles import GPUTile, num_regs, reg_coords
from .wgmma import plan_wgmma

if TYPE_CHECKING:
    from .lower import NvLowering
    from .tcgen05 import Tcgen05Plan
    from .wgmma import WgmmaPlan

__all__ = ["MmaPlan", "plan_mma", "mma_tiles"]

F32 = ir.FloatType()
F16 = ir.HalfType()
H2 = ir.VectorType(F16, 2)


@dataclass(frozen=True)
class MmaPlan:
    """How one `tl.dot` maps onto mma.sync."""

    kind: str  # "f16", "bf16", "tf32", "s8", "e4m3.e4m3", ...
    elem_bits: int
    instr_k: int
    warps: tuple[int, int]
    layout: LinearLayout  # the accumulator's (and result's) layout
    acc: T.ScalarType  # fp32 or i32


_FP8 = {"fp8e4nv": "e4m3", "fp8e5": "e5m2"}


def _kind(a: T.ScalarType, b: T.ScalarType, precision: str, fp8: bool) -> str | None:
    if a != b and not (a.name in _FP8 and b.name in _FP8):
        return None
    if a == T.fp16:
        return "f16"
    if a == T.bf16:
        return "bf16"
    if a == T.fp32:
        return "tf32" if precision == "tf32" else None
    if a == T.i8:
        return "s8"
    if a.name in _FP8 and b.name in _FP8 and fp8:
        return f"{_FP8[a.name]}.{_FP8[b.name]}"
    return None


def _warps(m: int, n: int, num_warps: int) -> tuple[int, int]:
    """Warps along M and N: split the dimension with more 16-wide tiles left, M first."""
    wm = wn = 1
    while wm * wn < num_warps:
        tm, tn = m // (16 * wm), n // (8 * wn)
        if tm > 1 and tm >= tn // 2:
            wm *= 2
        elif tn > 1:
            wn *= 2
        else:
            wm *= 2  # more warps than tiles: the extra warps hold copies
    return wm, wn


def plan_mma(lw: NvLowering, op: Op) -> MmaPlan | WgmmaPlan | Tcgen05Plan | None:
    """The tensor-core plan for `op` (per batch for a batched dot), or None when the dot must run
    on CUDA cores."""
    a_v, b_v, _ = op.operands
    ashape, bshape = T.shape_of(a_v.type), T.shape_of(b_v.type)
    if len(ashape) not in (2, 3):
        return None
    m, k = ashape[-2:]
    n = bshape[-1]
    ae, be = T.elem_of(a_v.type), T.elem_of(b_v.type)
    oe = T.elem_of(op.result.type)
    if not (isinstance(ae, T.ScalarType) and isinstance(be, T.ScalarType) and isinstance(oe, T.ScalarType)):
        return None
    target = nv_target(lw.arch)
    kind = _kind(ae, be, op.attrs.get("input_precision") or "tf32", target.fp8_mma)
    if kind is None or target.number < 80:
        return None
    bits = ae.bits
    instr_k = 256 // bits
    if m < 16 or n < 8 or k < instr_k:
        return None
    if kind == "s8":
        if oe != T.i32:
            return None
        acc = T.i32
    else:
        if not oe.is_float or oe.bits > 32:
            return None
        acc = T.fp32
    warps = _warps(m, n, lw.num_warps)
    plan = MmaPlan(kind, bits, instr_k, warps, mma_v2_accumulator((m, n), warps), acc)

    b_kmajor = bool(op.attrs.get("b_kmajor"))
    return plan_wgmma(lw, m, n, k, plan, b_kmajor) or plan_tcgen05(lw, m, n, k, plan, b_kmajor) or plan


# --------------------------------------------------------------------------- shared memory staging


def _row_stride(cols: int, esize: int) -> int:
    """Row stride in elements: the row's bytes rounded to 16, plus 16 if that is an even multiple."""
    nbytes = -(-cols * esize // 16) * 16
    if (nbytes // 16) % 2 == 0:
        nbytes += 16
    return nbytes // esize


def _smem_ptr(b: ir.IRBuilder, base: ir.Value, byte_off: ir.Value) -> ir.Value:
    """The byte at `byte_off` of the shared scratch area, as an i8 pointer."""
    return b.gep(b.bitcast(base, ir.PointerType(I8, addrspace=3)), [byte_off])


def _ldmatrix(lw: NvLowering, ptr: ir.Value, trans: bool, count: int = 4) -> list[ir.Value]:
    """`count` 8x8 b16 matrices; lanes 8i..8i+7 address the rows of matrix i."""
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.b16.p3"
    res = lw.intrinsic(name, ir.LiteralStructType([I32] * count), [ptr])
    return [lw.b.extract_value(res, i) for i in range(count)]


def _mma_name(kind: str) -> str:
    if kind == "f16":
        return "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
    if kind == "bf16":
        return "llvm.nvvm.mma.m16n8k16.row.col.bf16"
    if kind == "tf32":
        return "llvm.nvvm.mma.m16n8k8.row.col.tf32"
    if kind == "s8":
        return "llvm.nvvm.mma.m16n8k32.row.col.s8"
    return f"llvm.nvvm.mma.m16n8k32.row.col.f32.{kind}.f32"


def _mma(lw: NvLowering, plan: MmaPlan, a: list[ir.Value], bfr: list[ir.Value], c: list[ir.Value]) -> list[ir.Value]:
    b = lw.b
    cty = I32 if plan.kind == "s8" else F32
    if plan.kind == "f16":
        a = [b.bitcast(x, H2) for x in a]
        bfr = [b.bitcast(x, H2) for x in bfr]
    res = lw.intrinsic(_mma_name(plan.kind), ir.LiteralStructType([cty] * 4), [*a, *bfr, *c])
    return [b.extract_value(res, i) for i in range(4)]


def _warp_origin(lw: NvLowering, layout: LinearLayout) -> tuple[ir.Value, ir.Value]:
    """This warp's (row, col) offset in the accumulator layout."""
    b = lw.entry
    acc: list[ir.Value] = [ir.Constant(I32, 0), ir.Constant(I32, 0)]
    for k, basis in enumerate(layout.bases(WARP)):
        if not any(basis):
            continue
        bit = b.and_(b.lshr(lw.warp, ir.Constant(I32, k)), ir.Constant(I32, 1))
        for d in range(2):
            if basis[d]:
                acc[d] = b.or_(acc[d], b.mul(bit, ir.Constant(I32, basis[d])))
    return acc[0], acc[1]


def _instr_tiles(layout: LinearLayout) -> tuple[list[int], list[int], dict[tuple[int, int], list[int]]]:
    """Per-warp instruction origins: the M offsets, N offsets, and for each (m, n) the registers
    of its four accumulators c0..c3 ((row, col), (row, col+1), (row+8, col), (row+8, col+1))."""
    tiles: dict[tuple[int, int], list[int]] = {}
    for r in range(num_regs(layout)):
        row, col = reg_coords(layout, r)
        key = (row & ~8, col & ~1)
        slot = (2 if row & 8 else 0) + (col & 1)
        tiles.setdefault(key, [-1] * 4)[slot] = r
    ms = sorted({k[0] for k in tiles})
    ns = sorted({k[1] for k in tiles})
    return ms, ns, tiles


def mma_tiles(lw: NvLowering, plan: MmaPlan, a_tile: GPUTile, b_tile: GPUTile, acc_tile: GPUTile,
              m: int, n: int, k: int, oe: T.ScalarType) -> GPUTile:
    """acc + a @ b for register tiles a [m, k], b [k, n] (any layouts) and acc [m, n] in
    `plan.layout`; the result is in `plan.layout` with element type `oe`."""
    bits = plan.elem_bits
    esize = bits // 8
    layout = plan.layout
    b = lw.b
    init = [S.emit_cast(b, oe, plan.acc, v) for v in acc_tile.regs]
    trans_b = bits == 16  # 16-bit B: [K][N] rows read with ldmatrix.trans; else stored as [N][K]
    sa = _row_stride(k, esize)
    sb = _row_stride(n, esize) if trans_b else _row_stride(k, esize)
    a_bytes = m * sa * esize
    b_bytes = (k * sb if trans_b else n * sb) * esize
    base = lw.scratch(a_bytes + b_bytes)
    lw.barrier()

    def rows(stride: int) -> Offset:  # element (i, j) at row i
        return lambda bb, i, j: bb.mul(bb.add(bb.mul(i, ir.Constant(I32, stride)), j), ir.Constant(I32, esize))

    def cols(stride: int) -> Offset:  # element (i, j) at row j (B^T)
        return lambda bb, i, j: bb.mul(bb.add(bb.mul(j, ir.Constant(I32, stride)), i), ir.Constant(I32, esize))

    stage(lw, a_tile, base, 0, rows(sa), 1, bits)  # fp32 operands are rounded to tf32 on the way
    stage(lw, b_tile, base, a_bytes, rows(sb) if trans_b else cols(sb), 1 if trans_b else 0, bits)
    lw.barrier()

    ms, ns, tiles = _instr_tiles(layout)
    e = lw.entry
    wrow, wcol = _warp_origin(lw, layout)
    lane = lw.lane
    l8 = e.and_(lane, ir.Constant(I32, 7))
    hi8 = e.and_(e.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, 1))
    hi16 = e.lshr(lane, ir.Constant(I32, 4))
    half_k = plan.instr_k // 2  # elements in 16 bytes
    # A: lanes 0-7 / 8-15 / 16-23 / 24-31 address rows 0-7 / 8-15 / 0-7 / 8-15, k chunk 0 / 0 / 1 / 1.
    a_row = e.add(wrow, e.add(l8, e.mul(hi8, ir.Constant(I32, 8))))
    a_col = e.mul(hi16, ir.Constant(I32, half_k))
    a_lane = e.mul(e.add(e.mul(a_row, ir.Constant(I32, sa)), a_col), ir.Constant(I32, esize))
    wn_step = ns[1] - ns[0] if len(ns) > 1 else 8
    if trans_b:
        # B [K][N]: matrices (k 0-7, n j), (k 8-15, n j), (k 0-7, n j'), (k 8-15, n j').
        b_krow = e.add(l8, e.mul(hi8, ir.Constant(I32, 8)))
        b_ncol = e.add(wcol, e.mul(hi16, ir.Constant(I32, wn_step)))
        b_lane = e.mul(e.add(e.mul(b_krow, ir.Constant(I32, sb)), b_ncol), ir.Constant(I32, esize))
    else:
        # B^T [N][K]: matrices (n j, k chunk 0), (n j, chunk 1), (n j', chunk 0), (n j', chunk 1).
        b_nrow = e.add(wcol, e.add(l8, e.mul(hi16, ir.Constant(I32, wn_step))))
        b_kcol = e.mul(hi8, ir.Constant(I32, half_k))
        b_lane = e.mul(e.add(e.mul(b_nrow, ir.Constant(I32, sb)), b_kcol), ir.Constant(I32, esize))
    b_lane = e.add(b_lane, ir.Constant(I32, a_bytes))
    a_ptr = _smem_ptr(e, base, a_lane)
    b_ptr = _smem_ptr(e, base, b_lane)

    cur = list(init)
    for kk in range(0, k, plan.instr_k):
        afr: dict[int, list[ir.Value]] = {}
        for mo in ms:
            off = (mo * sa + kk) * esize
            afr[mo] = _ldmatrix(lw, b.gep(a_ptr, [ir.Constant(I32, off)]), False)
        bfr: dict[int, list[ir.Value]] = {}
        for j in range(0, len(ns), 2):
            no = ns[j]
            off = ((kk * sb + no) if trans_b else (no * sb + kk)) * esize
            pair = j + 1 < len(ns)
            regs = _ldmatrix(lw, b.gep(b_ptr, [ir.Constant(I32, off)]), trans_b, 4 if pair else 2)
            bfr[no] = regs[0:2]
            if pair:
                bfr[ns[j + 1]] = regs[2:4]
        for mo in ms:
            for no in ns:
                slots = tiles[(mo, no)]
                c = [cur[r] for r in slots]
                out = _mma(lw, plan, afr[mo], bfr[no], c)
                for r, v in zip(slots, out, strict=True):
                    cur[r] = v
    # No barrier after the last ldmatrix: every user of the scratch area waits at a barrier
    # before writing to it.
    return GPUTile(layout, [S.emit_cast(b, plan.acc, oe, v) for v in cur])


_ = (I16, LANE)
