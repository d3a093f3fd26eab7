"""`tl.dot` on Blackwell's fifth-generation tensor cores with `tcgen05.mma` (sm_100a, sm_103a).

One thread issues the MMA; its accumulator D lives in tensor memory (TMEM: 128 lanes of 32-bit
columns per SM partition), not in registers; A and B come from shared memory by 64-bit matrix
descriptors, and a 32-bit instruction descriptor gives the types, shape and majorness.

Per kernel (`Tmem`, set up on the first tcgen05 dot): warp 0 allocates the TMEM columns the widest
dot needs (a power of two >= 32) into a shared-memory slot and gives up its allocation permit
(`relinq`), so another block on the SM may allocate the rest; thread 0 initialises an mbarrier
(arrival count 1). Everyone reads the TMEM address after a barrier. Before the kernel returns,
warp 0 frees the columns. The alloc, mbarrier and address are emitted in blocks between the entry
block and the body (`finish_tmem` wires them), so every use is dominated by them.

Per dot (un-pipelined): the operands are staged into the scratch area in the swizzled layouts the
wgmma path stages (wgmma.operand_smem: A K-major, B N-major for 16-bit types with N a multiple of
64, else K-major), made visible to the async proxy, then thread 0 issues one `tcgen05.mma` per 32
bytes of K (enable-input-d false on the first: D is overwritten) and commits them to the mbarrier.
All threads wait on the mbarrier's phase (a counter kept per thread, flipped by every wait; the
commits of successive dots complete phases in order), read D with `tcgen05.ld.32x32b` into the
`tcgen05_accumulator` layout (compiler/layouts/distributed.py: thread t of warp w holds row
32 * (w % 4) + t), and add it to the incoming accumulator in registers. The result then lives in
registers like any other dot's, so loops, epilogues and stores are unchanged.

A K loop's accumulator stays in TMEM instead (`resident_accumulators`, control.lower_for): when
the loop's only dot sits at the top of its body, accumulates into the carried value that nothing
else reads, and the loop starts from zeros, each iteration issues its MMAs with enable-input-d
false only on the first MMA of the loop's first iteration (a predicate on the induction
variable), waits for them (the staged operands are overwritten by the next iteration), and reads
nothing back; D is read once on the loop's way out. The 128 x N accumulator is then not live in
registers during the loop. ANVIL_TCGEN05=readback keeps the per-dot read-back.

Descriptors: the shared-memory descriptor is wgmma's plus the fixed version field (bits 46-48 =
0b001); wgmma's 2-bit swizzle code at bits 62-63 (1: 128 B, 2: 64 B, 3: 32 B) is the same bit
pattern as tcgen05's 3-bit code at bits 61-63 (2, 4, 6). The instruction descriptor (kinds f16,
tf32, f8f6f4): D type at bits 4-5 (1: f32), A type at 7-9 and B type at 10-12 (f16 0 / bf16 1;
tf32 2; e4m3 0 / e5m2 1), transpose (MN-major) A at 15 and B at 16, N >> 3 at 17-22, M >> 4 at
24-28. The TMEM address is lane << 16 | column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ... import knobs
from ...ir import types as T
from ...layouts import LinearLayout
from ...layouts.distributed import tcgen05_accumulator
from ..llvm import scalar as S
from ..llvm.scalar import I1, I32, I64
from ..nvidia_targets import nv_target
from .staging import stage
from .tiles import GPUTile, num_regs
from .wgmma import _SWIZZLE_MODE, _desc, _desc_at, _swizzle_width, operand_smem

if TYPE_CHECKING:
    from ...ir.core import Op, Value
    from .lower import NvLowering
    from .mma import MmaPlan

__all__ = ["Tcgen05Plan", "Tmem", "plan_tcgen05", "tcgen05_tiles", "tcgen05_resident", "read_acc",
           "resident_accumulators", "finish_tmem", "instr_desc", "smem_desc_bits"]

F32 = ir.FloatType()
TMEM_PTR = ir.PointerType(ir.IntType(8), addrspace=6)

# mma kind -> (the intrinsic's kind immediate: 0 f16, 1 tf32, 2 f8f6f4; the A and B type codes of
# the instruction descriptor). The PTX kind has K = 32 bytes per instruction for all of them.
_KINDS: dict[str, tuple[int, int, int]] = {
    "f16": (0, 0, 0), "bf16": (0, 1, 1), "tf32": (1, 2, 2),
    "e4m3.e4m3": (2, 0, 0), "e4m3.e5m2": (2, 0, 1), "e5m2.e4m3": (2, 1, 0), "e5m2.e5m2": (2, 1, 1),
}
M_TILE = 128  # rows of D per block: the 128 TMEM lanes (cta_group::1)
LD_CHUNK = 32  # columns per tcgen05.ld (registers per thread per load)
smem_desc_bits = 1 << 46  # the shared-memory descriptor's fixed version field (0b001 at bits 46-48)


@dataclass(frozen=True)
class Tcgen05Plan:
    kind: str
    elem_bits: int
    layout: LinearLayout  # tcgen05_accumulator: the result's layout in registers
    acc: T.ScalarType
    b_mode: str  # "kmajor" or "nmajor", as wgmma.operand_smem reads it
    ncols: int  # TMEM columns this dot needs: N rounded up to a power of two, at least 32


def plan_tcgen05(lw: NvLowering, m: int, n: int, k: int, base: MmaPlan, b_kmajor: bool = False) -> Tcgen05Plan | None:
    """The tcgen05 plan for an [m, k] @ [k, n] dot, or None (mma.sync keeps it): M = 128 on 4 warps
    (or 8: two warpgroups reading half the columns each), N a multiple of 16 up to 256, K whole
    32-byte steps laid out as the wgmma staging lays them out; fp16/bf16 (kind::f16), fp32 rounded
    to tf32 (kind::tf32) or fp8 e4m3/e5m2 (kind::f8f6f4) inputs, fp32 accumulator."""
    if not knobs.tcgen05() or not nv_target(lw.arch).tcgen05:
        return None
    if base.kind not in _KINDS or base.acc != T.fp32 or lw.num_warps not in (4, 8):
        return None
    es = base.elem_bits // 8
    groups = lw.num_warps // 4
    if m != M_TILE or n % 16 or n > 256 or n // groups < 8:
        return None
    if k * es % 32 or (k * es > 128 and k * es % 128):
        return None
    mode = "nmajor" if n % 64 == 0 and es == 2 and not b_kmajor else "kmajor"
    ncols = max(32, 1 << (n - 1).bit_length())
    return Tcgen05Plan(base.kind, base.elem_bits, tcgen05_accumulator((m, n), lw.num_warps), T.fp32, mode, ncols)


def instr_desc(plan: Tcgen05Plan, m: int, n: int) -> int:
    """The 32-bit instruction descriptor: f32 D, A K-major, B N-major in "nmajor" mode (16-bit
    types only: 8- and 32-bit B is staged K-major, as for wgmma)."""
    _, a, b = _KINDS[plan.kind]
    trans_b = 1 if plan.b_mode == "nmajor" else 0
    return 1 << 4 | a << 7 | b << 10 | trans_b << 16 | (n >> 3) << 17 | (m >> 4) << 24


# ---------------------------------------------------------------------------------------- TMEM


@dataclass
class Tmem:
    """The kernel's tensor memory and the mbarrier its MMAs complete on."""

    alloc_bb: ir.Block  # warp 0 allocates here (filled by finish_tmem, once the column count is known)
    init_bb: ir.Block  # then its thread 0 initialises the mbarrier
    sync_bb: ir.Block  # everyone reads the address here, then enters the body
    slot: ir.GlobalVariable  # the shared-memory word tcgen05.alloc writes the address to
    bar: ir.GlobalVariable  # the mbarrier
    mbar: ir.Value  # its i32 shared address
    addr: ir.Value  # i32 TMEM address of column 0, lane 0
    phase: ir.Value  # alloca i32: the parity of the mbarrier phase the next wait waits for
    ncols: int = 32


def _shared_global(lw: NvLowering, name: str, ty: ir.Type, align: int) -> ir.GlobalVariable:
    g = ir.GlobalVariable(lw.m, ty, name, addrspace=3)
    g.linkage = "internal"
    g.initializer = ir.Constant(ty, None)  # shared memory takes no initial value (undef)
    g.align = align
    return g


def _tmem(lw: NvLowering, ncols: int) -> Tmem:
    """The kernel's Tmem, created on first use, widened to `ncols` columns."""
    tm: Tmem | None = lw.tmem
    if tm is None:
        slot = _shared_global(lw, "__anvil_tmem_slot", I32, 4)
        bar = _shared_global(lw, "__anvil_tmem_mbar", I64, 8)
        e = lw.entry
        mbar = e.trunc(e.ptrtoint(bar, I64), I32)
        phase = e.alloca(I32)
        e.store(ir.Constant(I32, 0), phase)
        f = lw.f
        alloc_bb, init_bb, sync_bb = (f.append_basic_block(f"tmem.{s}") for s in ("alloc", "init", "sync"))
        b = ir.IRBuilder(init_bb)  # thread 0 of warp 0 (after the alloc): one arrival completes a phase
        # the fence makes the initialised mbarrier visible to the tensor core's arrivals (async proxy)
        b.asm(ir.FunctionType(ir.VoidType(), [I32]),
              "mbarrier.init.shared::cta.b64 [$0], 1;\nfence.mbarrier_init.release.cluster;", "r,~{memory}",
              [mbar], side_effect=True)
        b.branch(sync_bb)
        b = ir.IRBuilder(sync_bb)
        _call(lw, b, "llvm.nvvm.tcgen05.fence.before.thread.sync", [])
        _call(lw, b, "llvm.nvvm.barrier.cta.sync.aligned.all", [ir.Constant(I32, 0)])
        _call(lw, b, "llvm.nvvm.tcgen05.fence.after.thread.sync", [])
        addr = b.load(slot)
        tm = Tmem(alloc_bb, init_bb, sync_bb, slot, bar, mbar, addr, phase)
        lw.tmem = tm
    tm.ncols = max(tm.ncols, ncols)
    return tm


def _call(lw: NvLowering, b: ir.IRBuilder, name: str, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
    ret = ret or ir.VoidType()
    fn = lw.m.globals.get(name) or ir.Function(lw.m, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def finish_tmem(lw: NvLowering, body_bb: ir.Block) -> None:
    """At the end of the kernel (lw.b before its return): free the TMEM columns; and wire
    entry -> alloc (warp 0) -> init (its thread 0) -> sync -> body."""
    tm = lw.tmem
    assert tm is not None
    ncols = ir.Constant(I32, tm.ncols)
    b = lw.b
    # every thread's tcgen05.ld completed (wait.ld) before the barrier; then warp 0 frees
    _call(lw, b, "llvm.nvvm.tcgen05.fence.before.thread.sync", [])
    lw.barrier()

    def free() -> None:
        _call(lw, lw.b, "llvm.nvvm.tcgen05.fence.after.thread.sync", [])
        _call(lw, lw.b, "llvm.nvvm.tcgen05.dealloc.cg1", [lw.b.inttoptr(tm.addr, TMEM_PTR), ncols])

    lw.when(b.icmp_unsigned("==", lw.warp, ir.Constant(I32, 0)), free)
    e = lw.entry
    e.cbranch(e.icmp_unsigned("==", lw.warp, ir.Constant(I32, 0)), tm.alloc_bb, tm.sync_bb)
    a = ir.IRBuilder(tm.alloc_bb)
    _call(lw, a, "llvm.nvvm.tcgen05.alloc.shared.cg1", [tm.slot, ncols])
    _call(lw, a, "llvm.nvvm.tcgen05.relinq.alloc.permit.cg1", [])
    a.cbranch(a.icmp_unsigned("==", lw.lane, ir.Constant(I32, 0)), tm.init_bb, tm.sync_bb)
    ir.IRBuilder(tm.sync_bb).branch(body_bb)


def _wait(lw: NvLowering, tm: Tmem) -> None:
    """Wait (every thread) for the mbarrier phase the last commit completes, then flip the parity."""
    b = lw.b
    parity = b.load(tm.phase)
    wait_bb, done_bb = b.append_basic_block("tmem.wait"), b.append_basic_block("tmem.done")
    b.branch(wait_bb)
    b.position_at_end(wait_bb)
    asm = ("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n"
           "selp.u32 $0, 1, 0, p;\n}")
    ok = b.asm(ir.FunctionType(I32, [I32, I32]), asm, "=r,r,r,~{memory}", [tm.mbar, parity], side_effect=True)
    b.cbranch(b.icmp_unsigned("!=", ok, ir.Constant(I32, 0)), done_bb, wait_bb)
    b.position_at_end(done_bb)
    b.store(b.xor(parity, ir.Constant(I32, 1)), tm.phase)


# ----------------------------------------------------------------------------------------- dot


def tcgen05_tiles(lw: NvLowering, plan: Tcgen05Plan, a_tile: GPUTile, b_tile: GPUTile, acc_tile: GPUTile, m: int,
                  n: int, k: int, oe: T.ScalarType) -> GPUTile:
    """acc + a @ b for register tiles a [m, k], b [k, n] and acc [m, n] in `plan.layout`; the
    result in `plan.layout` with element type `oe`."""
    b = lw.b
    cur = [S.emit_cast(b, oe, plan.acc, v) for v in acc_tile.regs]
    _issue(lw, plan, a_tile, b_tile, m, n, k, None)
    d_vals = read_acc(lw, plan, n)
    b = lw.b
    out = [d if _is_zero(c) else b.fadd(c, d, flags=lw.fmf) for c, d in zip(cur, d_vals, strict=True)]
    return GPUTile(plan.layout, [S.emit_cast(b, plan.acc, oe, v) for v in out])


def tcgen05_resident(lw: NvLowering, plan: Tcgen05Plan, a_tile: GPUTile, b_tile: GPUTile, m: int, n: int, k: int,
                     first: ir.Value) -> GPUTile:
    """D += a @ b with D kept in tensor memory across the iterations of a loop (lower_for's
    `resident_accumulators`): the first MMA of the iteration where `first` (i1) holds overwrites D
    (the loop's initial accumulator is zero), every other one accumulates. The registers returned
    are undefined: the loop reads D back once, after its last iteration (read_acc)."""
    _issue(lw, plan, a_tile, b_tile, m, n, k, first)
    return GPUTile(plan.layout, [ir.Constant(F32, None)] * num_regs(plan.layout))


def _issue(lw: NvLowering, plan: Tcgen05Plan, a_tile: GPUTile, b_tile: GPUTile, m: int, n: int, k: int,
           first: ir.Value | None) -> None:
    """Stage a and b, issue the MMAs into D from thread 0 and wait (every thread) until they are
    complete. `first` None: the first MMA overwrites D; else it does so where `first` holds."""
    b = lw.b
    bits = plan.elem_bits
    es = bits // 8
    wa = _swizzle_width(k * es)
    sa, sb = operand_smem(plan, 0, m, n, k), operand_smem(plan, 1, m, n, k)
    b_off = -(-sa.nbytes // 1024) * 1024
    base = lw.scratch(b_off + sb.nbytes)
    assert lw.smem is not None
    lw.smem.align = 1024  # the swizzle atoms' phase is taken from address bits 7-9
    lw.barrier()  # the scratch area may still be read by an earlier op
    stage(lw, a_tile, base, 0, sa.offset, sa.fast_dim, bits)
    stage(lw, b_tile, base, b_off, sb.offset, sb.fast_dim, bits)
    lw.intrinsic("llvm.nvvm.fence.proxy.async.shared_cta", ir.VoidType(), [])
    lw.barrier()
    tm = _tmem(lw, plan.ncols)
    e = lw.entry
    a_addr = e.trunc(e.ptrtoint(base, I64), I32)
    b_addr = e.add(a_addr, ir.Constant(I32, b_off))
    a_desc = b.or_(_desc(lw, a_addr, 16, 8 * wa, _SWIZZLE_MODE[wa]), ir.Constant(I64, smem_desc_bits))
    if plan.b_mode == "kmajor":
        b_desc = _desc(lw, b_addr, 16, 8 * wa, _SWIZZLE_MODE[wa])
    else:
        b_desc = _desc(lw, b_addr, (k // 8) * 1024, 1024, 1)
    b_desc = b.or_(b_desc, ir.Constant(I64, smem_desc_bits))
    idesc = ir.Constant(I32, instr_desc(plan, m, n))
    kind = ir.Constant(I32, _KINDS[plan.kind][0])
    step = 32 // es  # elements of K per instruction (32 bytes)

    def issue() -> None:
        bb = lw.b
        _call(lw, bb, "llvm.nvvm.tcgen05.fence.after.thread.sync", [])
        d = bb.inttoptr(tm.addr, TMEM_PTR)
        for kk in range(0, k, step):
            blk, kin = divmod(kk * es, wa)  # column block of K-major operands, byte offset in it
            da = _desc_at(lw, a_desc, blk * m * wa + kin)
            db = _desc_at(lw, b_desc, blk * n * wa + kin if plan.b_mode == "kmajor" else (kk // 8) * 1024)
            enable: ir.Value = ir.Constant(I1, int(kk > 0 or first is not None))
            if kk == 0 and first is not None:
                enable = bb.not_(first)
            _call(lw, bb, "llvm.nvvm.tcgen05.mma.shared",
                  [d, da, db, idesc, enable, kind, ir.Constant(I32, 1), ir.Constant(I32, 0)])
        _call(lw, bb, "llvm.nvvm.tcgen05.commit.shared.cg1", [tm.bar])

    lw.when(b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0)), issue)
    _wait(lw, tm)


def read_acc(lw: NvLowering, plan: Tcgen05Plan, n: int) -> list[ir.Value]:
    """D from tensor memory into `plan.layout`'s registers (fp32), after the MMAs that wrote it
    completed (_issue waited for them)."""
    tm = lw.tmem
    assert tm is not None
    e = lw.entry
    b = lw.b
    _call(lw, b, "llvm.nvvm.tcgen05.fence.after.thread.sync", [])
    # this warp's 32 lanes (32 * (warp % 4)) and, with 8 warps, its warpgroup's half of the columns
    groups = lw.num_warps // 4
    per = n // groups
    lane0 = e.shl(e.and_(lw.warp, ir.Constant(I32, 3)), ir.Constant(I32, 21))  # (32 * (w % 4)) << 16
    col0 = e.mul(e.lshr(lw.warp, ir.Constant(I32, 2)), ir.Constant(I32, per)) if groups > 1 else None
    start = b.add(tm.addr, lane0 if col0 is None else e.or_(lane0, col0))
    chunk = min(LD_CHUNK, per)
    vty = ir.VectorType(I32, chunk)
    got: list[ir.Value] = []
    for c in range(0, per, chunk):
        ptr = b.inttoptr(b.add(start, ir.Constant(I32, c)) if c else start, TMEM_PTR)
        vec = _call(lw, b, f"llvm.nvvm.tcgen05.ld.32x32b.x{chunk}", [ptr, ir.Constant(I1, 0)], vty)
        got += [b.extract_element(vec, ir.Constant(I32, i)) for i in range(chunk)]
    _call(lw, b, "llvm.nvvm.tcgen05.wait.ld", [])
    # the loads are complete: the next MMA (after a barrier) may overwrite these columns
    _call(lw, b, "llvm.nvvm.tcgen05.fence.before.thread.sync", [])
    return [b.bitcast(v, F32) for v in got]


def _is_zero(v: ir.Value) -> bool:
    return isinstance(v, ir.Constant) and v.type == F32 and v.constant == 0.0


def resident_accumulators(lw: NvLowering, loop: Op, plan_mma: Callable[[NvLowering, Op], Any]) -> dict[int, Op]:
    """Carried values of the `for` op `loop` whose accumulation can stay in tensor memory, by index
    among the carried values: the fp32 result of a tcgen05 dot at the top level of the body, whose
    accumulator is the carried value itself, which nothing else reads (neither the carried value in
    the body nor the dot's result but the yield), starting from zeros; and the only dot under the
    body (the tensor memory holds one accumulator). The loop reads D back once, on its way out.
    `plan_mma` (mma.py, which plans tcgen05 dots through this module) gives each dot's plan."""
    if not knobs.tcgen05_resident() or not nv_target(lw.arch).tcgen05:
        return {}
    body = loop.regions[0]
    dots = [o for o in body.walk() if o.opcode == "dot"]
    if len(dots) != 1 or not any(o is dots[0] for o in body.ops):
        return {}
    d = dots[0]
    ys = body.ops[-1].operands
    uses: dict[Value, int] = {}
    for o in body.walk():
        for v in o.operands:
            uses[v] = uses.get(v, 0) + 1
    for k, y in enumerate(ys):
        arg = body.args[1 + k]
        if y is not d.result or d.operands[2] is not arg or uses.get(arg) != 1 or uses.get(y) != 1:
            continue
        if T.elem_of(y.type) != T.fp32 or len(T.shape_of(y.type)) != 2:
            return {}
        if not isinstance(plan_mma(lw, d), Tcgen05Plan) or not _zero_init(loop.operands[3 + k]):
            return {}
        return {k: d}
    return {}


def _zero_init(v: Value) -> bool:
    """`v` is a splat of the constant 0 (tl.zeros)."""
    op = v.op
    while op is not None and op.opcode in ("splat", "broadcast"):
        v = op.operands[0]
        op = v.op
    return op is not None and op.opcode == "constant" and op.attrs.get("value") == 0
