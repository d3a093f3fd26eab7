"""Pipelined operand copies (passes/pipeline.py's ops): `cp.async` from global memory straight into
shared-memory slots laid out as the consuming wgmma reads them, so the tensor core takes its
operands from there with no trip through registers.

- Each pipelined operand (a `buffer`) gets `stages` slots of the layout `wgmma.operand_smem`
  gives for its role in the dot; the buffers of a kernel sit at the bottom of the dynamic shared
  memory (1024-byte aligned), and while they are live (from the first copy to `async_drain`)
  every other use of shared memory goes above them (`lw.scratch_floor`).
- `async_copy`: per thread, runs of consecutive elements along the operand's contiguous dimension
  become one `cp.async` of 4, 8 or 16 bytes (16: `.cg`, bypassing L1), with the mask as the
  source size (0: the copy writes zeros, the `other` of the load it replaces). When axis info
  cannot prove such runs (or the operand's contiguous dimension in global memory is not the one
  in the slot, a transposing copy), the tile goes through registers instead (a vectorized load,
  then shared stores, fp32 rounded to tf32 on the way as the staging of unpipelined dots does):
  correct for any layout, only slower. Copies of an iteration past the loop's end
  are not issued (a uniform branch); the group is committed either way, so group counts stay exact.
  The load's eviction_policy does not go with the copies: `.L2::cache_hint` on them (a createpolicy
  register made once or per copy alike) ran into "an illegal instruction" on the H200 for masked
  4-byte copies of rows not a multiple of the block (ptxas 13.0, sm_90a; benchmarks/notes/NOTES-gpu.md,
  session 15), while the same PTX forms run in a CUDA probe. `.cg` does not allocate in L1,
  `.ca` takes the default.
- `async_wait`: `cp.async.wait_group` (the S-2 younger groups may stay in flight), a proxy fence so
  the tensor core (async proxy) sees the data, and a barrier: every thread's copies have landed
  and every warp has finished the dot that read the slot about to be overwritten.
- Private buffers (a `tl.range(..., num_stages=S)` loop's loads, `private`): the tile in the
  canonical layout of its shape; a thread's run q of `vec` registers sits at
  (q * threads + thread) * vec * size bytes in the slot, so a warp's copies and reads touch
  consecutive words (no bank conflicts). The mask and the iteration's predicate become the
  source size (0: zeros, nothing read), so no branch splits the copies. The wait reads the runs
  back with `ld.shared` and no barrier: each thread reads only what its own copies wrote, after
  its own `cp.async.wait_group`, and the slot a copy refills was read two iterations before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ... import knobs
from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Function, Op, Value
from ...layouts import REGISTER, LinearLayout
from ...passes.axis_info import analyze_axis_info
from ..llvm.scalar import I8, I32, I64
from ..nvidia_targets import nv_target
from .convert import convert
from .memory import _vec, access_width, load_tile
from .mma import plan_mma
from .staging import runs, stage
from .tiles import GPUTile, SharedOperand, blocked_for, num_regs, nv_type
from .wgmma import WgmmaPlan, operand_smem, register_a_layout, wait_tied

if TYPE_CHECKING:
    from .lower import NvLowering
    from .wgmma import SmemOperand

__all__ = ["private_budget", "PipeBuffer", "plan_buffers", "private_sizer", "mark_kmajor_b",
           "reads_shared", "pipeline_stages", "lower_async_copy", "lower_async_wait", "lower_async_drain",
           "pipe_buffer", "carried_copy_layouts"]

# shared memory kept free of a loop's private slots for the scratch of the kernel's reductions
# and layout conversions (on sm_90a's 227 KB the slots may take 160 KB)
_SCRATCH_RESERVE = 67 * 1024


def private_budget(arch: str) -> int:
    """Bytes of shared memory the private slots of a loop may take on `arch`: its limit per block
    (compiler/backends/nvidia_targets.py) less the reserve for scratch."""
    return max(0, nv_target(arch).max_shared_bytes - _SCRATCH_RESERVE)


@dataclass(frozen=True)
class PipeBuffer:
    base: int  # byte offset in the dynamic shared memory
    slot_bytes: int  # 1024-aligned (private: 128-aligned)
    smem: SmemOperand | None  # None: a private buffer
    elem: T.ScalarType
    layout: LinearLayout | None = None  # a private buffer's register layout
    vec: int = 1  # a private buffer's elements per run
    end: int = 0  # a private buffer's loop: the bytes its buffers take (base: offset in a stage,
    # slot_bytes: the bytes of one stage of all of them)


def private_sizer(lw: NvLowering, fn: Function) -> Callable[[Op], int]:
    """For passes/pipeline.py: the bytes of one slot of a load staged per thread, 0 when it should
    not be (booleans, pointers, sub-byte types; runs under 4 bytes, which cp.async cannot copy).
    Runs before lowering, so the layout is estimated from the shape (the canonical layout's
    elements per thread) and the runs from axis info of the function as it is."""
    axis: dict[Value, Any] | None = None
    threads = 32 * lw.num_warps

    def size(load: Op) -> int:
        nonlocal axis
        elem = T.elem_of(load.result.type)
        if not knobs.pipeline() or not isinstance(elem, T.ScalarType) or elem.bits < 8 or elem == T.i1:
            return 0
        shape = T.shape_of(load.result.type)
        numel = 1
        for d in shape:
            numel *= d
        esize = elem.bits // 8
        axis = axis if axis is not None else analyze_axis_info(fn)
        mask = load.operands[1] if load.attrs.get("has_mask") else None
        if access_width(axis, load.operands[0], mask, esize, min(shape[-1], max(1, numel // threads))) * esize < 4:
            return 0
        return -(-max(numel, threads) * esize // 128) * 128

    return size


def mark_kmajor_b(fn: Function) -> None:
    """Mark the dots whose B operand is loaded with K contiguous in global memory (`b_kmajor`): a
    16-bit B is then stored K-major, so its copies move 16-byte runs instead of single elements."""
    axis = None
    for op in fn.walk():
        if op.opcode != "dot" or len(T.shape_of(op.result.type)) != 2:
            continue
        src, kdim = op.operands[1].op, 0
        if src is not None and src.opcode == "trans" and tuple(src.attrs.get("perm", ())) == (1, 0):
            src, kdim = src.operands[0].op, 1
        if src is None or src.opcode != "load":
            continue
        axis = axis if axis is not None else analyze_axis_info(fn)
        info = axis.get(src.operands[0])
        if info is not None and len(info.contiguity) == 2 and info.contiguity[kdim] > 1 \
                and info.contiguity[1 - kdim] == 1:
            op.attrs["b_kmajor"] = True


def reads_shared(lw: NvLowering, dot: Op, operand: int) -> bool:
    """Whether the lowering of `dot` reads operand A (0) or B (1) straight from shared memory (a
    wgmma dot): passes/pipeline.py may then copy it there asynchronously."""
    return knobs.pipeline() and len(T.shape_of(dot.result.type)) == 2 and isinstance(plan_mma(lw, dot), WgmmaPlan)


def pipeline_stages(lw: NvLowering, fn: Function, wanted: int) -> int:
    """`wanted` stages, or fewer if the slots of the largest pipelined dot would not fit in shared memory."""
    per_stage = staged = 0
    for op in fn.walk():
        if op.opcode != "dot" or op.parent is None or not reads_shared(lw, op, 0):
            continue
        plan = plan_mma(lw, op)
        assert isinstance(plan, WgmmaPlan)
        (m, k), n = T.shape_of(op.operands[0].type), T.shape_of(op.operands[1].type)[-1]
        sizes = [-(-operand_smem(plan, r, m, n, k).nbytes // 1024) * 1024 for r in (0, 1)]
        copied = [_loaded(op.operands[r]) for r in (0, 1)]
        per_stage = max(per_stage, sum(sz for sz, c in zip(sizes, copied, strict=True) if c))
        # operands from registers are staged above the slots, except a register A wgmma reads as is
        a_regs = register_a_layout(plan, m, k) is not None
        staged = max(staged, sum(sz for r, (sz, c) in enumerate(zip(sizes, copied, strict=True))
                                 if not c and not (r == 0 and a_regs)))
    if not per_stage:
        return wanted
    return min(wanted, (nv_target(lw.arch).max_shared_bytes - 1024 - staged - lw.held_bytes) // per_stage)


def _loaded(v: Value) -> bool:
    """`v` is a loaded tile, or its transpose: a candidate for a pipelined copy."""
    d = v.op
    if d is not None and d.opcode == "trans":
        d = d.operands[0].op
    return d is not None and d.opcode == "load"


def _uses(lw: NvLowering) -> dict[Value, list[tuple[Op, int]]]:
    uses: dict[Value, list[tuple[Op, int]]] = {}
    for op in lw.fn.walk():
        for k, v in enumerate(op.operands):
            uses.setdefault(v, []).append((op, k))
    return uses


def plan_buffers(lw: NvLowering) -> dict[int, PipeBuffer]:
    """Shared-memory placement of every pipelined buffer of the function (from its consumer dot).
    The buffers of one loop lie one after the other from the bottom; another loop's reuse the same
    bytes (a loop's buffers are dead after its async_drain, and pipelined loops do not nest)."""
    out: dict[int, PipeBuffer] = {}
    uses: dict[Value, list[tuple[Op, int]]] | None = None
    tops: dict[int, int] = {}  # per loop (the for op holding the waits): bytes placed so far
    privates: dict[int, list[Op]] = {}  # per loop, its private waits
    for op in lw.fn.walk():
        if op.opcode != "async_wait":
            continue
        loop = id(op.parent.parent) if op.parent is not None else 0
        top = tops.get(loop, lw.held_bytes)  # above tl.extra.cuda.shared_memory's regions
        if op.attrs.get("private"):
            privates.setdefault(loop, []).append(op)
            continue
        uses = uses if uses is not None else _uses(lw)
        (dot, role), = uses[op.result]
        plan = plan_mma(lw, dot)
        if not isinstance(plan, WgmmaPlan) or dot.opcode != "dot" or role > 1:
            raise UnsupportedError("internal: a pipelined operand does not feed a wgmma dot", op.loc)
        (m, k), n = T.shape_of(dot.operands[0].type), T.shape_of(dot.operands[1].type)[-1]
        so = operand_smem(plan, role, m, n, k)
        slot = -(-so.nbytes // 1024) * 1024
        elem = T.elem_of(op.result.type)
        assert isinstance(elem, T.ScalarType)
        out[op.attrs["buffer"]] = PipeBuffer(top, slot, so, elem)
        tops[loop] = top + slot * op.attrs["stages"]
    if privates:
        out.update(_plan_private(lw, privates))
    return out


def _plan_private(lw: NvLowering, privates: dict[int, list[Op]]) -> dict[int, PipeBuffer]:
    """A loop's private buffers stage by stage: stage s holds every buffer's slot at the same
    offset from s * (bytes of a stage), so one address per iteration serves all the copies and
    reads, each buffer an immediate offset from it."""
    vecs = _private_vecs(lw)
    out: dict[int, PipeBuffer] = {}
    for waits in privates.values():
        placed = []
        stage = 0
        for op in waits:
            elem = T.elem_of(op.result.type)
            assert isinstance(elem, T.ScalarType)
            layout = lw.canonical(T.shape_of(op.result.type))
            placed.append((op, elem, layout, stage))
            stage += -(-num_regs(layout) * 32 * lw.num_warps * elem.bits // 8 // 128) * 128
        for op, elem, layout, at in placed:
            buf = op.attrs["buffer"]
            out[buf] = PipeBuffer(at, stage, None, elem, layout, vecs.get(buf, 1), stage * op.attrs["stages"])
    return out


def _private_vecs(lw: NvLowering) -> dict[int, int]:
    """Per private buffer, the elements per run every copy into it can move at once (the widest
    vector all its copies' addresses and masks allow: the prologue's and the loop's alike)."""
    out: dict[int, int] = {}
    for op in lw.fn.walk():
        if op.opcode != "async_copy" or not op.attrs.get("private"):
            continue
        elem = T.elem_of(T.elem_of(op.operands[0].type).elem)  # type: ignore[union-attr]
        layout = lw.canonical(T.shape_of(op.operands[0].type))
        mask_v = op.operands[1] if op.attrs["has_mask"] else None
        v = _vec(lw, layout, op.operands[0], mask_v, elem)
        out[op.attrs["buffer"]] = min(out.get(op.attrs["buffer"], v), v)
    return out


def pipe_buffer(lw: NvLowering, op: Op) -> PipeBuffer:
    """The buffer `op` (an async_copy or async_wait) uses, as planned (nothing reserved)."""
    return _buffer(lw, op, reserve=False)


def _buffer(lw: NvLowering, op: Op, reserve: bool = True) -> PipeBuffer:
    if lw.pipes is None:
        lw.pipes = plan_buffers(lw)
    buf = lw.pipes[op.attrs["buffer"]]
    if reserve:
        lw.reserve(lw.held_bytes + buf.end if buf.end else buf.base + buf.slot_bytes * op.attrs["stages"])
    return buf


def _slot_addr(lw: NvLowering, buf: PipeBuffer, slot: ir.Value) -> ir.Value:
    b = lw.b
    base = lw.scratch_base()
    off = b.add(ir.Constant(I32, buf.base), b.mul(b.zext(slot, I32) if slot.type != I32 else slot,
                                                  ir.Constant(I32, buf.slot_bytes)))
    return b.add(base, off)


def _run(layout: LinearLayout, dim: int) -> int:
    """Consecutive elements along `dim` held in consecutive registers of a thread."""
    k = 0
    regb = layout.bases(REGISTER)
    rank = len(layout.out_dims)
    while k < len(regb) and regb[k] == tuple((1 << k) if d == dim else 0 for d in range(rank)):
        k += 1
    return 1 << k


def _copy_vec(lw: NvLowering, layout: LinearLayout, ptr_v: Value, mask_v: Value | None, dim: int,
              esize: int) -> int:
    vec = min(_run(layout, dim), max(1, 16 // esize))
    info = lw.axis.get(ptr_v)
    if info is None or len(info.contiguity) != 2:
        return 1
    vec = min(vec, info.contiguity[dim], max(1, info.divisibility[dim] // esize))
    if mask_v is not None:
        minfo = lw.axis.get(mask_v)
        vec = min(vec, minfo.constancy[dim] if minfo is not None and len(minfo.constancy) == 2 else 1)
    vec = max(1, vec & -vec)
    return vec if vec * esize in (4, 8, 16) else 0


def copy_layout(lw: NvLowering, op: Op) -> LinearLayout | None:
    """The layout the addresses of `op` (an async_copy) should be in when the tile is contiguous in
    global memory along the slot's fast dim but that is not the last dim (which every default
    layout already runs along): runs of up to 16 bytes along it. None: any layout will do."""
    buf = _buffer(lw, op, reserve=False)
    if buf.smem is None:
        return None
    fast = 1 - buf.smem.fast_dim if op.attrs["transposed"] else buf.smem.fast_dim
    ptr_v = op.operands[0]
    info = lw.axis.get(ptr_v)
    if fast == 1 or info is None or len(info.contiguity) != 2 or info.contiguity[fast] < 2:
        return None
    shape = T.shape_of(ptr_v.type)
    vec = min(info.contiguity[fast], max(1, 128 // buf.elem.bits), shape[fast])
    return blocked_for(shape, vec, lw.num_warps, fast)


def carried_copy_layouts(lw: NvLowering) -> dict[Value, LinearLayout]:
    """Loop-carried address tiles that feed copies wanting another layout (copy_layout), with that
    layout: the loop carries them in it, instead of converting them every iteration."""
    out: dict[Value, LinearLayout] = {}
    for op in lw.fn.walk():
        if op.opcode != "async_copy":
            continue
        wanted = copy_layout(lw, op)
        v: Value | None = op.operands[0]
        while wanted is not None and v is not None:
            d = v.op
            if d is None:  # a block argument: carried by its loop
                out.setdefault(v, wanted)
                break
            v = d.operands[0] if d.opcode == "addptr" else None
    return out


def _private_base(lw: NvLowering, buf: PipeBuffer, slot: ir.Value) -> tuple[ir.Value, int, int]:
    """(shared address A, offset O, step): this thread's run q of the private buffer's slot `slot`
    is at A + O + q * step. A is the same for every buffer of the loop with runs of the same size
    (the same instructions, merged by LLVM); the constants become immediate offsets."""
    b = lw.b
    run = buf.vec * buf.elem.bits // 8
    s = b.zext(slot, I32) if slot.type != I32 else slot
    stage = b.add(lw.scratch_base(), b.add(ir.Constant(I32, lw.held_bytes), b.mul(s, ir.Constant(I32, buf.slot_bytes))))
    return b.add(stage, b.mul(lw.tid, ir.Constant(I32, run))), buf.base, run * 32 * lw.num_warps


def _const_offset(ptr: ir.Value) -> tuple[ir.Value, int]:
    """`ptr` as (base, constant byte offset): getelementptrs by constants (or extensions of
    constants) are peeled off, so that the offset can be an immediate of the instruction."""
    off = 0
    while isinstance(ptr, ir.GEPInstr) and len(ptr.indices) == 1 and ptr.opname == "getelementptr":
        idx = ptr.indices[0]
        if isinstance(idx, ir.CastInstr) and idx.opname in ("sext", "zext") and isinstance(idx.operands[0],
                                                                                          ir.Constant):
            idx = idx.operands[0]
        ety = ptr.source_etype
        if not isinstance(idx, ir.Constant) or not isinstance(idx.constant, int) \
                or not isinstance(ety, (ir.IntType, ir.FloatType, ir.HalfType, ir.DoubleType)):
            break
        size = ety.width // 8 if isinstance(ety, ir.IntType) else {ir.HalfType: 2, ir.FloatType: 4,
                                                                    ir.DoubleType: 8}[type(ety)]
        off += idx.constant * size
        ptr = ptr.pointer
    if not -(1 << 31) <= off < (1 << 31):
        return ptr, 0
    return ptr, off


def _lower_private_copy(lw: NvLowering, op: Op, buf: PipeBuffer) -> None:
    layout = buf.layout
    assert layout is not None
    b = lw.b
    ptr_v = op.operands[0]
    mask_v = op.operands[1] if op.attrs["has_mask"] else None
    pred = lw.scalar(op.operands[-2])
    nbytes = buf.vec * buf.elem.bits // 8
    n = num_regs(layout)
    base, off, step = _private_base(lw, buf, lw.scalar(op.operands[-1]))
    if nbytes >= 4:
        ptr = lw.tile(ptr_v, layout)
        mask = lw.tile(mask_v, layout) if mask_v is not None else None
        for q, r0 in enumerate(range(0, n, buf.vec)):
            on = b.and_(pred, mask.regs[r0]) if mask is not None else pred
            _cp_async(lw, base, ptr.regs[r0], on, nbytes, off + q * step)
    else:  # runs under 4 bytes: loaded into registers and stored (correct, not asynchronous)
        def through_registers() -> None:
            tile = load_tile(lw, ptr_v, mask_v, None, buf.elem)
            if tile.layout != layout:
                tile = convert(lw, tile, layout, buf.elem)
            regs = tile.regs
            ety = nv_type(buf.elem)
            for q, r0 in enumerate(range(0, n, buf.vec)):
                vty = ir.VectorType(ety, buf.vec)
                v: ir.Value = ir.Constant(vty, None)
                for i in range(buf.vec):
                    v = b.insert_element(v, regs[r0 + i], ir.Constant(I32, i))
                b.store(v, _shared_ptr(lw, base, off + q * step, vty)).align = nbytes

        lw.when(pred, through_registers)
    if op.attrs["commit"]:
        lw.intrinsic("llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])


def _lower_private_wait(lw: NvLowering, op: Op, buf: PipeBuffer) -> None:
    assert buf.layout is not None
    b = lw.b
    if op.attrs["sync"]:
        lw.intrinsic("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [ir.Constant(I32, max(0, op.attrs["pending"]))])
    base, off, step = _private_base(lw, buf, lw.scalar(op.operands[0]))
    ety = nv_type(buf.elem)
    vty = ir.VectorType(ety, buf.vec)
    regs: list[ir.Value] = []
    for q in range(num_regs(buf.layout) // buf.vec):
        v = b.load(_shared_ptr(lw, base, off + q * step, vty))
        v.align = buf.vec * buf.elem.bits // 8
        regs.extend(b.extract_element(v, ir.Constant(I32, i)) for i in range(buf.vec))
    lw.vals[op.result] = GPUTile(buf.layout, regs)


def lower_async_copy(lw: NvLowering, op: Op) -> None:
    buf = _buffer(lw, op)
    if buf.smem is None:
        _lower_private_copy(lw, op, buf)
        return
    ptr_v = op.operands[0]
    mask_v = op.operands[1] if op.attrs["has_mask"] else None
    pred_v, slot_v = op.operands[-2:]
    esize = buf.elem.bits // 8
    # a transposed copy writes source element (i, j) where the operand's (j, i) goes
    flip = bool(op.attrs["transposed"])
    fast = 1 - buf.smem.fast_dim if flip else buf.smem.fast_dim
    offset = buf.smem.offset
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    wanted = copy_layout(lw, op)
    if wanted is not None and _run(layout, fast) == 1:
        ptr = lw.tile(ptr_v, wanted)
        layout = ptr.layout
    mask = lw.tile(mask_v, layout) if mask_v is not None else None

    def place(bb: ir.IRBuilder, i: ir.Value, j: ir.Value) -> ir.Value:
        return offset(bb, j, i) if flip else offset(bb, i, j)

    vec = _copy_vec(lw, layout, ptr_v, mask_v, fast, esize)
    slot = _slot_addr(lw, buf, lw.scalar(slot_v))

    def copies() -> None:
        if not vec:  # through registers: a vectorized load, then stores in the slot's layout
            tile = load_tile(lw, ptr_v, mask_v, None, buf.elem)
            ptr8 = lw.b.inttoptr(lw.b.zext(slot, I64), ir.PointerType(ir.IntType(8), addrspace=3))
            stage(lw, tile, ptr8, 0, place, fast, buf.elem.bits)
            # generic-proxy stores, read by wgmma's async proxy after the waiter's barrier
            lw.intrinsic("llvm.nvvm.fence.proxy.async.shared_cta", ir.VoidType(), [])
            return

        b = lw.b
        for r0, i, j in runs(lw, layout, vec):
            dst = b.add(slot, place(b, i, j))
            _cp_async(lw, dst, ptr.regs[r0], mask.regs[r0] if mask is not None else None, vec * esize)

    if lw.inflight:  # a carried group may still read the slot this copy refills
        lw.wait_inflight()
    if lw.copy_barrier:  # every warpgroup done with the carried groups (and so with their slots)
        lw.copy_barrier = False
        lw.barrier()
    lw.when(lw.scalar(pred_v), copies)
    if op.attrs["commit"]:
        lw.intrinsic("llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])


def _shared_ptr(lw: NvLowering, base: ir.Value, off: int, ty: ir.Type) -> ir.Value:
    """A shared-memory pointer to `ty` at the i32 address `base` plus `off` bytes (a constant
    getelementptr, which becomes the instruction's immediate offset)."""
    b = lw.b
    p = b.inttoptr(b.zext(base, I64), ir.PointerType(I8, addrspace=3))
    if off:
        p = b.gep(p, [ir.Constant(I64, off)], source_etype=I8)
    return b.bitcast(p, ir.PointerType(ty, addrspace=3))


def _cp_async(lw: NvLowering, dst: ir.Value, src: ir.Value, mask: ir.Value | None, nbytes: int,
              dst_off: int = 0) -> None:
    """One cp.async of `nbytes` from `src` to the shared address `dst` + `dst_off`; a constant
    offset of `src` (getelementptrs by constants) goes into the instruction's address too. No L2
    cache policy (see the module docstring)."""
    b = lw.b
    kind = "cg" if nbytes == 16 else "ca"
    src, src_off = _const_offset(src)
    d = f"[$0+{dst_off}]" if dst_off else "[$0]"
    s_ = f"[$1+{src_off}]" if src_off else "[$1]"  # "+-8" for a negative offset, as LLVM writes it
    args: list[ir.Value] = [dst, src]
    text, cons = f"cp.async.{kind}.shared.global {d}, {s_}, {nbytes}", "r,l"
    if mask is not None:  # the source size: 0 where the mask is off (cp.async fills zeros)
        args.append(b.select(mask, ir.Constant(I32, nbytes), ir.Constant(I32, 0)))
        text, cons = text + f", ${len(args) - 1}", cons + ",r"
    b.asm(ir.FunctionType(ir.VoidType(), [a.type for a in args]), text + ";", cons + ",~{memory}", args,
          side_effect=True)


def lower_async_wait(lw: NvLowering, op: Op) -> None:
    buf = _buffer(lw, op)
    if buf.smem is None:
        _lower_private_wait(lw, op, buf)
        return
    if op.attrs["sync"]:
        pending = max(0, op.attrs["pending"])
        # cp.async writes need no proxy fence before wgmma reads them (the register-staged
        # fallback fences after its stores): the wait and the barrier make them visible
        lw.intrinsic("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [ir.Constant(I32, pending)])
        lw.barrier()
    lw.vals[op.result] = SharedOperand(_slot_addr(lw, buf, lw.scalar(op.operands[0])))


def lower_async_drain(lw: NvLowering, op: Op) -> None:
    """After a pipelined loop: no copy in flight, the slots free again, and the dot groups its last
    iteration left in flight complete (the operands, passed through to the results)."""
    lw.wait_inflight()
    lw.copy_barrier = False  # the barrier below
    for v, r in zip(op.operands, op.results, strict=True):
        t = lw.tile(v)
        # completed on the loop's way out already (control.lower_for), or waited for here
        lw.vals[r] = t if v in lw.complete else GPUTile(t.layout, wait_tied(lw, t.regs, 0))
    lw.intrinsic("llvm.nvvm.cp.async.wait.all", ir.VoidType(), [])
    lw.barrier()
    lw.release()
