"""`tl.dot` on Hopper tensor cores with `wgmma.mma_async` (sm_90a).

Warpgroups (4 warps) each own 64-row slabs of the output and `instr_n` columns. Operands are
staged from registers into shared memory in the layouts the wgmma matrix descriptors describe,
with the 128/64/32-byte swizzles (the 16-byte chunk index of a row XOR-ed with the row's index
inside its 8-row atom), so the staging stores and the tensor core's reads are free of bank
conflicts:

- A [M, K] is K-major: rows of K * esize bytes (the swizzle width S), 8-row atoms of 8 * S bytes;
  the descriptor's stride offset is 8 * S and the start address advances by 32 bytes per k16 step.
  Rows longer than 128 bytes are split into 128-byte column blocks, [M, 128 B] tiles one after the
  other (a head dimension of 128 in attention).
- B [K, N] is stored N-major (`trans-b`): atoms of 8 K-rows x 64 N-columns (128 B, swizzled by
  the K row), atoms along K 1024 B apart (the descriptor's stride offset) and atoms along N
  K/8 * 1024 B apart (its leading offset). A warpgroup whose N extent is not a multiple of 64
  stores B^T K-major like A instead (scalar transposing stores: slower), and so does a B whose K is
  contiguous in global memory (the dot's `b_kmajor` mark): its copies then go straight in.

The generic-proxy stores are made visible to the tensor core's async proxy with
`fence.proxy.async.shared::cta` before the barrier; the accumulators stay in registers in the
wgmma accumulator layout, which loops carry unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from ... import knobs
from ...ir import types as T
from ...layouts import LinearLayout
from ...layouts.distributed import wgmma_accumulator
from ..llvm import scalar as S
from ..llvm.scalar import I32, I64
from ..nvidia_targets import nv_target
from .math import pack_pair
from .staging import Offset, stage
from .tiles import GPUTile, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering
    from .mma import MmaPlan
    from .tcgen05 import Tcgen05Plan

__all__ = ["WgmmaPlan", "SmemOperand", "plan_wgmma", "operand_smem", "register_a_layout", "wgmma_tiles", "wgmma_wait",
           "wgmma_in_flight", "wait_tied", "wait_tiles", "stage_invariant_a"]

F32 = ir.FloatType()


@dataclass(frozen=True)
class WgmmaPlan:
    kind: str
    elem_bits: int
    warps: tuple[int, int]  # warpgroups along M, along N
    instr_n: int
    layout: LinearLayout
    acc: T.ScalarType
    b_mode: str  # "kmajor" or "nmajor"


def plan_wgmma(lw: NvLowering, m: int, n: int, k: int, base: MmaPlan, b_kmajor: bool = False) -> WgmmaPlan | None:
    """The wgmma plan for an [m, k] @ [k, n] dot, or None when wgmma does not apply. `b_kmajor`:
    B's K is contiguous in global memory (passes/pipeline.py's mark), so B is stored K-major."""
    if not knobs.wgmma() or not nv_target(lw.arch).wgmma:
        return None
    if base.kind not in _ASM_TYPES or lw.num_warps % 4:
        return None
    groups = lw.num_warps // 4
    esize = base.elem_bits // 8
    if m % 64 or k * esize % 32 or (k * esize > 128 and k * esize % 128):
        return None
    gm = min(groups, m // 64)
    gn = groups // gm
    instr_n = n // gn
    if instr_n < 8 or instr_n > 256 or instr_n % 8:
        return None
    # N-major B (trans-b) exists for 16-bit types only; 8- and 32-bit B is stored K-major, and so
    # is 16-bit B whose K is the contiguous dimension in global memory (b_kmajor)
    mode = "nmajor" if instr_n % 64 == 0 and esize == 2 and not b_kmajor else "kmajor"
    layout = wgmma_accumulator((m, n), (4 * gm, gn), instr_n)
    return WgmmaPlan(base.kind, base.elem_bits, (gm, gn), instr_n, layout, T.fp32, mode)


# operand types in the instruction name, per mma kind; the k of one instruction is 32 bytes
_ASM_TYPES = {"f16": "f16.f16", "bf16": "bf16.bf16", "tf32": "tf32.tf32", "e4m3.e4m3": "e4m3.e4m3",
              "e4m3.e5m2": "e4m3.e5m2", "e5m2.e4m3": "e5m2.e4m3", "e5m2.e5m2": "e5m2.e5m2"}


def _swizzle_width(row_bytes: int) -> int:
    return 128 if row_bytes >= 128 else (64 if row_bytes >= 64 else 32)


_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def _kmajor_blocks(b: ir.IRBuilder, row: ir.Value, kbyte: ir.Value, width: int, rows: int, row_bytes: int) -> ir.Value:
    """Byte offset of (row, byte kbyte) in a K-major tile of `rows` rows of `row_bytes` bytes, stored
    as row_bytes / width column blocks of [rows, width] swizzled tiles one after the other."""
    if row_bytes <= width:
        return _kmajor_offset(b, row, kbyte, width)
    blk = b.lshr(kbyte, ir.Constant(I32, width.bit_length() - 1))
    inner = _kmajor_offset(b, row, b.and_(kbyte, ir.Constant(I32, width - 1)), width)
    return b.add(b.mul(blk, ir.Constant(I32, rows * width)), inner)


def _kmajor_offset(b: ir.IRBuilder, row: ir.Value, kbyte: ir.Value, width: int) -> ir.Value:
    """Byte offset of (row, byte kbyte of the row) in a K-major swizzled tile of `width`-byte rows."""
    inner = b.and_(row, ir.Constant(I32, 7))
    atom = b.lshr(row, ir.Constant(I32, 3))
    chunk = b.lshr(kbyte, ir.Constant(I32, 4))
    mask = width // 16 - 1
    # the swizzle XORs address bits [4, 4 + log2(width/16)) with bits [7, ...): row bits for 128 B
    # rows, (row / 2) bits for 64 B rows, (row / 4) for 32 B rows
    sw_src = b.lshr(b.mul(inner, ir.Constant(I32, width)), ir.Constant(I32, 7))
    chunk = b.xor(chunk, b.and_(sw_src, ir.Constant(I32, mask)))
    off = b.add(b.mul(atom, ir.Constant(I32, 8 * width)), b.mul(inner, ir.Constant(I32, width)))
    off = b.add(off, b.shl(chunk, ir.Constant(I32, 4)))
    return b.add(off, b.and_(kbyte, ir.Constant(I32, 15)))


def _nmajor_offset(b: ir.IRBuilder, k: ir.Value, nbyte: ir.Value, k_rows: int) -> ir.Value:
    """Byte offset of (k, byte nbyte along N) in an N-major tile of 128 B-swizzled atoms
    (8 K-rows x 128 B); atoms along K are 1024 B apart, atoms along N k_rows/8 * 1024 B apart."""
    inner = b.and_(k, ir.Constant(I32, 7))
    katom = b.lshr(k, ir.Constant(I32, 3))
    natom = b.lshr(nbyte, ir.Constant(I32, 7))
    chunk = b.and_(b.lshr(nbyte, ir.Constant(I32, 4)), ir.Constant(I32, 7))
    chunk = b.xor(chunk, inner)
    off = b.add(b.mul(natom, ir.Constant(I32, (k_rows // 8) * 1024)), b.mul(katom, ir.Constant(I32, 1024)))
    off = b.add(off, b.mul(inner, ir.Constant(I32, 128)))
    off = b.add(off, b.shl(chunk, ir.Constant(I32, 4)))
    return b.add(off, b.and_(nbyte, ir.Constant(I32, 15)))


def _desc(lw: NvLowering, addr: ir.Value, lbo: int, sbo: int, swizzle: int) -> ir.Value:
    """A wgmma matrix descriptor for the shared-memory byte address `addr` (i32)."""
    b = lw.b
    start = b.zext(b.and_(b.lshr(addr, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF)), I64)
    const = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | swizzle << 62
    return b.or_(start, ir.Constant(I64, const))


def _desc_at(lw: NvLowering, desc: ir.Value, offset: int) -> ir.Value:
    """The descriptor `desc` moved `offset` bytes (a multiple of 16): one 64-bit add to its start
    field, which cannot carry out (shared-memory addresses stay below 2^18 bytes)."""
    assert offset % 16 == 0
    return lw.b.add(desc, ir.Constant(I64, offset >> 4)) if offset else desc


def _is_zero(regs: list[ir.Value]) -> bool:
    return all(isinstance(v, ir.Constant) and v.constant == 0.0 and v.type == F32 for v in regs)


def _wgmma(lw: NvLowering, plan: WgmmaPlan, acc: list[ir.Value], da: ir.Value | list[ir.Value],
           db: ir.Value) -> list[ir.Value]:
    """One wgmma: A by descriptor `da`, or in registers (`da` the 4 packed 32-bit fragments). A zero
    accumulator is not read (scale-d false): no instruction defines its registers beforehand."""
    n = len(acc)
    zero = _is_zero(acc)
    k = 256 // plan.elem_bits  # 32 bytes of K
    trans_b = 0 if plan.b_mode == "kmajor" else 1
    a_regs = da if isinstance(da, list) else [da]
    na = len(a_regs)
    # the transpose immediates exist for 16-bit types only (no trans-a for A in registers)
    if plan.elem_bits != 16:
        tail = ""
    else:
        tail = f", {trans_b}" if na > 1 else f", 0, {trans_b}"
    outs = ",".join(f"${i}" for i in range(n))
    a_asm = "{" + ",".join(f"${n + i}" for i in range(na)) + "}" if na > 1 else f"${n}"
    asm = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, ${n + na + 1}, 0;\n"
           f"wgmma.mma_async.sync.aligned.m64n{plan.instr_n}k{k}.f32.{_ASM_TYPES[plan.kind]} "
           f"{{{outs}}}, {a_asm}, ${n + na}, p, 1, 1{tail};\n}}")
    a_cons = ["r"] * na if na > 1 else ["l"]
    tied = [] if zero else acc
    cons = ",".join(["=f"] * n + a_cons + ["l", "r"] + [str(i) for i in range(len(tied))])
    a_tys = [I32] * na if na > 1 else [I64]
    fty = ir.FunctionType(lw.results_type([F32] * n), [*a_tys, I64, I32, *([F32] * len(tied))])
    res = lw.b.asm(fty, asm, cons, [*a_regs, db, ir.Constant(I32, 0 if zero else 1), *tied], side_effect=True)
    return [lw.b.extract_value(res, i) for i in range(n)]


def register_a_layout(plan: WgmmaPlan, m: int, k: int) -> LinearLayout | None:
    """The layout of A [m, k] as wgmma takes it from registers (16-bit types, one warpgroup along N):
    the accumulator pattern over [m, k] (so an fp32 wgmma result converted to 16 bits, as attention's
    probabilities, is already in it); None when A must come from shared memory."""
    if plan.elem_bits != 16 or plan.warps[1] != 1 or k % 16 or k > 256:
        return None
    return wgmma_accumulator((m, k), (4 * plan.warps[0], 1), k)


def stage_invariant_a(lw: NvLowering, plan: WgmmaPlan, tile: GPUTile, m: int, n: int, k: int) -> ir.Value:
    """Stage a loop-invariant A [m, k] once, before the loop, into shared memory held (reserved)
    above what is live until the caller lowers the floor again; its i32 address."""
    so = operand_smem(plan, 0, m, n, k)
    floor = lw.scratch_floor
    base = lw.scratch(so.nbytes)
    lw.barrier()  # the scratch area may still be read by an earlier conversion
    stage(lw, tile, base, 0, so.offset, so.fast_dim, plan.elem_bits)
    lw.intrinsic("llvm.nvvm.fence.proxy.async.shared_cta", ir.VoidType(), [])
    lw.barrier()
    lw.reserve(floor + so.nbytes)
    e = lw.entry
    return e.add(lw.scratch_base(), ir.Constant(I32, floor))


def _a_fragments(lw: NvLowering, a: GPUTile, rows: int, kk: int) -> list[ir.Value]:
    """The 4 packed registers of A's m64k16 fragment at row offset `rows`, column `kk`: pairs of
    columns (c, c+1) of rows r and r+8, then of columns c+8, c+9 (register_a_layout)."""
    index = getattr(a, "_coords", None)
    if index is None:
        index = {reg_coords(a.layout, r): r for r in range(num_regs(a.layout))}
        a._coords = index  # type: ignore[attr-defined]
    out = []
    for dr, dc in ((0, 0), (8, 0), (0, 8), (8, 8)):
        lo, hi = (a.regs[index[(rows + dr, kk + dc + t)]] for t in (0, 1))
        out.append(pack_pair(lw.b, lo, hi))
    return out


@dataclass(frozen=True)
class SmemOperand:
    """Where a wgmma operand lives in shared memory: `nbytes` from a 1024-byte aligned base,
    element (i, j) of the operand tile at byte `offset(builder, i, j)`, runs of consecutive
    elements along `fast_dim` contiguous (16 bytes at most within a swizzle chunk)."""

    nbytes: int
    offset: Offset
    fast_dim: int


def operand_smem(plan: WgmmaPlan | Tcgen05Plan, role: int, m: int, n: int, k: int) -> SmemOperand:
    """The shared-memory layout of operand A (role 0, [m, k]) or B (role 1, [k, n]) for `plan`
    (tcgen05.mma reads the same layouts by the same descriptors)."""
    es = plan.elem_bits // 8
    wa = _swizzle_width(k * es)
    kb = max(k * es, wa)  # bytes of K per row: one swizzle width, or several column blocks of 128 B

    def scaled(bb: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return bb.mul(x, ir.Constant(I32, es)) if es != 1 else x

    if role == 0:
        return SmemOperand(m * kb, lambda bb, i, j: _kmajor_blocks(bb, i, scaled(bb, j), wa, m, kb), 1)
    if plan.b_mode == "kmajor":
        return SmemOperand(n * kb, lambda bb, i, j: _kmajor_blocks(bb, j, scaled(bb, i), wa, n, kb), 0)
    return SmemOperand((n * 2 // 128) * k * 128, lambda bb, i, j: _nmajor_offset(bb, i, scaled(bb, j), k), 1)


def wait_tied(lw: NvLowering, regs: list[ir.Value], pending: int) -> list[ir.Value]:
    """`wgmma.wait_group pending` with the fp32 accumulators `regs` passed through as tied operands
    of its asm, so nothing that reads them can be scheduled before it."""
    n = len(regs)
    fty = ir.FunctionType(lw.results_type([F32] * n), [F32] * n)
    cons = ",".join(["=f"] * n + [str(i) for i in range(n)])
    res = lw.b.asm(fty, f"wgmma.wait_group.sync.aligned {pending};", cons, regs, side_effect=True)
    return [lw.b.extract_value(res, i) for i in range(n)]


def wait_tiles(lw: NvLowering, tiles: list[list[ir.Value]], pending: int) -> list[list[ir.Value]]:
    """wait_tied for the registers of several tiles at once (one wait), split back per tile."""
    done = iter(wait_tied(lw, [r for regs in tiles for r in regs], pending))
    return [[next(done) for _ in regs] for regs in tiles]


def wgmma_wait(lw: NvLowering, plan: WgmmaPlan, issued: GPUTile, oe: T.ScalarType) -> GPUTile:
    """Wait for the wgmma group that produces `issued` (wgmma_tiles(..., wait=False)); the result
    in `oe`. Groups a loop carried in flight from its previous iteration complete with it (their
    values pass through the same wait)."""
    held = lw.take_inflight()
    regs, *rest = wait_tiles(lw, [issued.regs] + [t.regs for _, t in held], 0)
    for (v, t), done in zip(held, rest, strict=True):
        lw.vals[v] = GPUTile(t.layout, done)
    return GPUTile(issued.layout, [S.emit_cast(lw.b, plan.acc, oe, v) for v in regs])


def wgmma_in_flight(lw: NvLowering, issued: GPUTile, pending: int = 1) -> GPUTile:
    """Leave the group that produces `issued` in flight (its result feeds nothing but the same
    accumulator's next wgmma): wait for the group before it, then a barrier, after which every
    warpgroup is done with the operands that group read (their pipeline slot may be refilled).
    The values stay tied to the wait, so nothing reads them early; a later wait_tied(..., 0)
    (the pipeline's drain) completes them."""
    out = GPUTile(issued.layout, wait_tied(lw, issued.regs, pending))
    lw.barrier()
    return out


def wgmma_tiles(lw: NvLowering, plan: WgmmaPlan, a_tile: GPUTile | ir.Value, b_tile: GPUTile | ir.Value,
                acc_tile: GPUTile, m: int, n: int, k: int, oe: T.ScalarType, wait: bool = True) -> GPUTile:
    """acc + a @ b for a [m, k], b [k, n] and acc [m, n] in `plan.layout`; the result is in
    `plan.layout` with element type `oe`. An operand is a register tile (any layout; staged into
    the scratch area here) or the i32 shared-memory address of the operand already in the layout
    `operand_smem` gives (a pipelined copy's slot, made visible to the async proxy by its waiter).
    `wait=False`: return the issued, not yet complete accumulators (fp32); `wgmma_wait` finishes."""
    layout = plan.layout
    b = lw.b
    cur = [S.emit_cast(b, oe, plan.acc, v) for v in acc_tile.regs]
    bits = plan.elem_bits
    es = bits // 8
    wa = _swizzle_width(k * es)
    sa, sb = operand_smem(plan, 0, m, n, k), operand_smem(plan, 1, m, n, k)
    a_regs = isinstance(a_tile, GPUTile) and a_tile.layout == register_a_layout(plan, m, k)
    addrs: list[ir.Value] = []
    staged = [(t, so) for t, so in ((a_tile, sa), (b_tile, sb)) if isinstance(t, GPUTile)
              and not (a_regs and t is a_tile)]
    if staged:
        offs, total = [], 0
        for _, so in staged:
            offs.append(total)
            total = -(-(total + so.nbytes) // 1024) * 1024
        base = lw.scratch(total)
        assert lw.smem is not None
        lw.smem.align = 1024
        lw.barrier()
        for (t, so), off in zip(staged, offs, strict=True):
            assert isinstance(t, GPUTile)
            stage(lw, t, base, off, so.offset, so.fast_dim, bits)
        lw.intrinsic("llvm.nvvm.fence.proxy.async.shared_cta", ir.VoidType(), [])
        lw.barrier()
        e = lw.entry
        smem_addr = e.trunc(e.ptrtoint(base, I64), I32)
        it = iter(offs)
        for t in (a_tile, b_tile):
            staged_here = isinstance(t, GPUTile) and not (a_regs and t is a_tile)
            addrs.append(e.add(smem_addr, ir.Constant(I32, next(it))) if staged_here else t)  # type: ignore[arg-type]
    else:
        addrs = [a_tile, b_tile]  # type: ignore[list-item]
    a_addr, b_addr = addrs
    if a_regs:
        a_addr = ir.Constant(I32, 0)  # unused: A comes from registers
    e = lw.entry
    wg = e.lshr(lw.warp, ir.Constant(I32, 2))
    gm, gn = plan.warps
    wg_m = e.urem(wg, ir.Constant(I32, gm)) if gm > 1 else ir.Constant(I32, 0)
    wg_n = e.udiv(wg, ir.Constant(I32, gm)) if gn > 1 else ir.Constant(I32, 0)
    # this warpgroup's first row of A and first column of B (register reps go along M by 64 * gm)
    a_row0 = e.mul(wg_m, ir.Constant(I32, 64))
    n0 = e.mul(wg_n, ir.Constant(I32, plan.instr_n))
    a_start = b.add(a_addr, e.mul(a_row0, ir.Constant(I32, wa)))
    if plan.b_mode == "kmajor":
        b_start = b.add(b_addr, e.mul(n0, ir.Constant(I32, wa)))
    else:
        b_start = b.add(b_addr, e.mul(e.lshr(n0, ir.Constant(I32, 6)), ir.Constant(I32, (k // 8) * 1024)))
    per_rep = plan.instr_n // 2  # f32 accumulators per thread per 64-row slab
    reps = len(cur) // per_rep
    step = 32 // es  # elements of K per instruction (32 bytes)
    frags = {}
    if a_regs:  # packed before the fence: no register a wgmma reads changes after it
        assert isinstance(a_tile, GPUTile)
        frags = {(rep, kk): _a_fragments(lw, a_tile, rep * 64 * gm, kk) for kk in range(0, k, step)
                 for rep in range(reps)}
    # one descriptor per operand; each instruction's is it plus a constant
    if plan.b_mode == "kmajor":
        b_desc = _desc(lw, b_start, 16, 8 * wa, _SWIZZLE_MODE[wa])
    else:
        b_desc = _desc(lw, b_start, (k // 8) * 1024, 1024, 1)
    a_desc = None if a_regs else _desc(lw, a_start, 16, 8 * wa, _SWIZZLE_MODE[wa])
    lw.intrinsic("llvm.nvvm.wgmma.fence.sync.aligned", ir.VoidType(), [])
    for kk in range(0, k, step):
        blk, kin = divmod(kk * es, wa)  # column block of K-major operands, byte offset in it
        db = _desc_at(lw, b_desc, blk * n * wa + kin if plan.b_mode == "kmajor" else (kk // 8) * 1024)
        for rep in range(reps):
            row = rep * 64 * gm
            if a_desc is None:
                da: ir.Value | list[ir.Value] = frags[(rep, kk)]
            else:
                da = _desc_at(lw, a_desc, blk * m * wa + row * wa + kin)
            regs = cur[rep * per_rep:(rep + 1) * per_rep]
            cur[rep * per_rep:(rep + 1) * per_rep] = _wgmma(lw, plan, regs, da, db)
    lw.intrinsic("llvm.nvvm.wgmma.commit_group.sync.aligned", ir.VoidType(), [])
    issued = GPUTile(layout, cur)
    return wgmma_wait(lw, plan, issued, oe) if wait else issued
