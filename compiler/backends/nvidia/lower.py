"""Tile IR -> per-thread LLVM IR for NVPTX.

Every tile value is distributed over the threads of the program by a linear layout
(compiler.layouts): thread (lane, warp) holds register r = element L(r, lane, warp). Each value's
layout is planned before lowering (layout_plan.py, `assign_layouts`). An
elementwise op is applied register by register; operands in another layout are converted
(register gathers when the same thread already holds the element, else through shared memory).
Scalars are uniform: every thread holds the same value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

from ... import knobs
from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Block, Function, Op, Value
from ...ir.ops import ELEMENTWISE
from ...layouts import LANE, WARP, LinearLayout
from ...passes.axis_info import AxisInfo, analyze_axis_info
from ..llvm.cse import CseBuilder, CseRecord
from ..llvm.scalar import I1, I8, I32, I64
from .convert import convert, register_map
from .layout_plan import Layout, check_plan, plan_layouts
from .ops import lower_op
from .remat import rematerialize
from .tcgen05 import finish_tmem
from .tiles import GPTR, SPTR, GPUTile, SharedOperand, blocked_for, num_regs, nv_type
from .wgmma import wait_tiles

__all__ = ["GPUTile", "NvLowering", "GPTR", "SPTR"]

class NvLowering:
    """Lowers one Tile IR function into an NVPTX kernel in `module`."""

    def __init__(self, fn: Function, module: ir.Module, name: str, num_warps: int, arch: str = "sm_80",
                 debug: bool = False) -> None:
        self.fn = fn
        self.arch = arch
        self.debug = debug  # bounds-check global-memory accesses (bounds.py)
        self.m = module
        self.name = name
        self.num_warps = num_warps
        self.vals: dict[Value, Any] = {}
        self.axis: dict[Value, AxisInfo] = {}  # computed by build(), after the GPU passes changed fn
        self.vec_hint: dict[tuple[int, ...], int] = {}
        self.layout_cache: dict[tuple[int, ...], LinearLayout] = {}
        self.hw_cache: dict[LinearLayout, list[ir.Value]] = {}
        # (layout, shape) -> each register's offset from the thread's linear index (convert.py)
        self.register_offsets: dict[tuple[LinearLayout, tuple[int, ...]], list[int] | None] = {}
        self.loop_depth = 0  # loops around the op being lowered (convert.thread_offsets)
        self.split_addresses = True  # convert.thread_offsets may address by thread index + constants
        self.used_split = False  # ... and did (backend._cubin lowers again without it if ptxas spills)
        # regions of tl.extra.cuda.shared_memory, held for the whole program at the bottom of
        # shared memory (1024-byte aligned, in program order); everything else lies above them
        self.held: dict[Op, int] = {}
        held = 0
        for op in fn.walk():
            if op.opcode == "shared_alloc":
                self.held[op] = held
                held += -(-op.attrs["nbytes"] // 1024) * 1024
        self.held_bytes = held
        self.smem_bytes = held
        self.smem: ir.GlobalVariable | None = None
        self.scratch_floor = held  # bytes at the bottom of shared memory held by live pipeline buffers
        self.pipes: dict[int, Any] | None = None  # pipelined buffers (async_copy.plan_buffers)
        self._smem_addr: ir.Value | None = None
        self.pending: tuple[Value, Callable[[], GPUTile]] | None = None  # a deferred wait (defer)
        self.pending_issued: GPUTile | None = None  # the pending wgmma group's unwaited accumulators
        self.in_flight = True  # honour dots' in_flight marks (passes/pipeline.py); carry groups
        # wgmma results carried into the next iteration unwaited (control.lower_for): their
        # registers are the outputs of a group that may still run, completed by the next wait
        self.inflight: dict[Value, None] = {}
        self.carry: dict[Value, LinearLayout] = {}  # yielded values this loop body may carry so
        self.carried = False  # some group was carried across a back edge (a second lowering can stop it)
        self.complete: set[Value] = set()  # loop results whose in-flight group the loop's exit completed
        self.copy_barrier = False  # a carried group completed: barrier before refilling any slot
        self.staged_a: dict[Value, ir.Value] = {}  # loop-invariant wgmma A operands in shared memory
        # fp add/sub/mul may fuse into fma (as Triton and nvcc do by default): without `contract`
        # NVPTX emits mul.rn/add.rn, which also stops ptxas from fusing them.
        self.fmf: tuple[str, ...] = ("contract",)
        self.layouts: dict[Value, Layout] | None = None  # every tile value's layout (assign_layouts)
        self.uses_libdevice = False  # a math function calls libdevice (linked at emission)
        self.tmem: Any = None  # tcgen05.Tmem: the kernel's tensor memory, set up by its first tcgen05 dot
        # tcgen05 dots whose accumulator stays in tensor memory through the loop being lowered
        # (control.lower_for), each with the i1 that holds in the loop's first iteration
        self.resident: dict[Op, ir.Value] = {}

    # ------------------------------------------------------------------ layouts
    def canonical(self, shape: tuple[int, ...]) -> LinearLayout:
        hit = self.layout_cache.get(shape)
        if hit is not None:
            return hit
        numel = 1
        for s in shape:
            numel *= s
        # Never more elements per thread along the fast dim than the tile spreads over the program:
        # a 1024-element tile on 16 warps takes 2 per thread, not 4 per thread on 8 warps with the
        # other 8 warps holding duplicates (which would load and compute everything twice).
        per_thread = max(1, numel // (32 * self.num_warps))
        vec = min(self.vec_hint.get(shape, 4), shape[-1], per_thread)
        layout = blocked_for(shape, vec, self.num_warps)
        self.layout_cache[shape] = layout
        return layout

    def hw_coords(self, layout: LinearLayout) -> list[ir.Value]:
        """Per output dim, the coordinate contributed by this thread's lane and warp (i32)."""
        hit = self.hw_cache.get(layout)
        if hit is not None:
            return hit
        b = self.entry
        rank = len(layout.out_dims)
        acc: list[ir.Value | None] = [None] * rank
        for name, src in ((LANE, self.lane), (WARP, self.warp)):
            for d in range(rank):
                # bit k of `src` contributes v_k to dim d; a run of bits whose values are consecutive
                # powers of two is one field: ((src >> k0) & (2^n - 1)) << log2(v_k0)
                for k0, n, v0 in _bit_runs([basis[d] for basis in layout.bases(name)]):
                    if v0 & (v0 - 1):  # not a power of two (no such layout today): bit by bit
                        part: ir.Value = b.mul(b.and_(b.lshr(src, ir.Constant(I32, k0)), ir.Constant(I32, 1)),
                                               ir.Constant(I32, v0))
                    else:
                        part = b.lshr(src, ir.Constant(I32, k0)) if k0 else src
                        part = b.and_(part, ir.Constant(I32, (1 << n) - 1))
                        shift = v0.bit_length() - 1
                        part = b.shl(part, ir.Constant(I32, shift)) if shift else part
                    cur = acc[d]
                    acc[d] = part if cur is None else b.or_(cur, part)
        out = [a if a is not None else ir.Constant(I32, 0) for a in acc]
        self.hw_cache[layout] = out
        return out

    # ------------------------------------------------------------------ function
    def build(self) -> ir.Function:
        plan = self.assign_layouts()
        params = [nv_type(a.type) if a.type != T.i1 else I32 for a in self.fn.args]
        f = ir.Function(self.m, ir.FunctionType(ir.VoidType(), params), self.name)
        f.calling_convention = "ptx_kernel"
        self.f = f
        entry_bb = f.append_basic_block("entry")
        body_bb = f.append_basic_block("body")
        cse = CseRecord()  # repeated pure instructions, emitted once (llvm/cse.py)
        self.entry = CseBuilder(entry_bb, cse)
        self.b = CseBuilder(body_bb, cse)
        tid = self.sreg("tid.x", self.entry)
        self.tid = tid
        self.lane = self.entry.and_(tid, ir.Constant(I32, 31))
        self.warp = self.entry.lshr(tid, ir.Constant(I32, 5))
        self.pid = [self.sreg(f"ctaid.{a}", self.entry) for a in "xyz"]
        self.nprog = [self.sreg(f"nctaid.{a}", self.entry) for a in "xyz"]
        for a, p in zip(self.fn.args, f.args, strict=True):
            self.vals[a] = self.entry.trunc(p, I1) if a.type == T.i1 else p
        self.lower_block(self.fn.body)
        if knobs.verify_ir():
            check_plan(self, plan)
        if self.tmem is None:
            self.b.ret_void()
            self.entry.branch(body_bb)
        else:
            finish_tmem(self, body_bb)  # free the tensor memory; entry -> its allocation -> body
            self.b.ret_void()
        cse.settle(f)
        return f

    def sreg(self, name: str, b: ir.IRBuilder) -> ir.Value:
        fname = f"llvm.nvvm.read.ptx.sreg.{name}"
        fn = self.m.globals.get(fname) or ir.Function(self.m, ir.FunctionType(I32, []), fname)
        return b.call(fn, [])

    def results_type(self, elems: list[ir.Type]) -> ir.Type:
        """The struct type of a call with several results. A long one (wgmma's accumulators: up to
        128 floats, all of one type) is a named type of the module: its fields are spelled once in the IR text, not
        at every extractvalue that reads a result (otherwise two thirds of a 128x256 GEMM's IR text,
        half of LLVM's parse time). The generated code is the same either way."""
        if len(elems) < 16 or len(set(elems)) > 1:
            return ir.LiteralStructType(elems)
        name = f"results.{len(elems)}x{elems[0]}"
        ty = self.m.context.get_identified_type(name)
        if ty.is_opaque:
            ty.set_body(*elems)
        return ty

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        fn = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    def when(self, cond: ir.Value | None, body: Callable[[], None]) -> None:
        """Emit `body` under `cond` (an i1; None: unconditionally), continuing after it."""
        if cond is None:
            body()
            return
        b = self.b
        then_bb, end_bb = b.append_basic_block("when"), b.append_basic_block("when.end")
        b.cbranch(cond, then_bb, end_bb)
        b.position_at_end(then_bb)
        body()
        b.branch(end_bb)
        b.position_at_end(end_bb)

    def barrier(self) -> None:
        self.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [ir.Constant(I32, 0)])

    def scratch(self, nbytes: int) -> ir.Value:
        """The dynamic shared-memory scratch area (sized to the largest use), above the pipeline
        buffers that are live (`reserve`)."""
        floor = self.scratch_floor
        self.smem_bytes = max(self.smem_bytes, floor + nbytes)
        g = self._smem_global()
        return g.gep([ir.Constant(I32, 0), ir.Constant(I32, floor)]) if floor else g

    def _smem_global(self) -> ir.GlobalVariable:
        if self.smem is None:
            g = ir.GlobalVariable(self.m, ir.ArrayType(I8, 0), "__anvil_smem", addrspace=3)
            g.linkage = "external"
            g.align = 1024 if self.held_bytes else 16  # held regions are 1024-byte aligned
            self.smem = g
        return self.smem

    def reserve(self, nbytes: int) -> None:
        """Hold the bottom `nbytes` of shared memory (1024-byte aligned) until `release`."""
        self._smem_global().align = 1024
        self.scratch_floor = max(self.scratch_floor, -(-nbytes // 1024) * 1024)
        self.smem_bytes = max(self.smem_bytes, self.scratch_floor)

    def release(self) -> None:
        self.scratch_floor = self.held_bytes

    def scratch_base(self) -> ir.Value:
        """The shared-memory address (i32) of the bottom of the dynamic shared memory."""
        if self._smem_addr is None:
            e = self.entry
            self._smem_addr = e.trunc(e.ptrtoint(self._smem_global(), I64), I32)
        return self._smem_addr

    # ------------------------------------------------------------------ values
    def tile(self, v: Value, layout: LinearLayout | None = None) -> GPUTile:
        """`v` as a tile in `layout` (converting if needed; splatting scalars)."""
        x = self.vals[v]
        if isinstance(x, SharedOperand):
            raise UnsupportedError("internal: a pipelined shared-memory operand was used outside its dot")
        shape = T.shape_of(v.type)
        target = layout or (x.layout if isinstance(x, GPUTile) else self.canonical(shape))
        if not isinstance(x, GPUTile):
            return GPUTile(target, [x] * num_regs(target))
        if x.layout == target:
            return x
        if v.op is not None and v.op.opcode == "splat":  # the same value in every register
            return GPUTile(target, [x.regs[0]] * num_regs(target))
        m = register_map(x.layout, target, set())
        if m is not None:
            return GPUTile(target, [x.regs[i] for i in m])
        again = rematerialize(self, v, target)  # cheaper than a trip through shared memory
        if again is not None:
            return again
        return convert(self, x, target, T.elem_of(v.type))

    def layout(self, v: Value) -> LinearLayout:
        """The layout planned for the tile value `v` (layout_plan.py)."""
        assert self.layouts is not None, "assign_layouts runs before lowering"
        lay = self.layouts[v]
        assert isinstance(lay, LinearLayout), f"{v} lives in shared memory, not in registers"
        return lay

    def assign_layouts(self) -> dict[Value, Layout]:
        """Plan every tile value's layout (layout_plan.py), once, after the GPU passes changed fn:
        the axis analysis and vector widths the canonical layouts depend on first."""
        if self.layouts is None:
            self.axis = analyze_axis_info(self.fn)
            self.vec_hint = _vector_hints(self.fn, self.axis)
            self.layouts = plan_layouts(self)
        return self.layouts

    def scalar(self, v: Value) -> ir.Value:
        x = self.vals[v]
        if isinstance(x, GPUTile):
            raise UnsupportedError("internal: a tile was used where a scalar was expected")
        return x

    # ------------------------------------------------------------------ ops
    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            if op.opcode == "yield" and self._carry_pending(op):
                continue
            if self.pending is not None and (op.opcode not in _WINDOW or self.pending[0] in op.operands):
                self.flush()
            if self.inflight and (op.regions or any(o in self.inflight for o in op.operands)):
                self.wait_inflight()
            if op.opcode in ("yield", "condition"):
                continue
            lower_op(self, op)
        self.flush()

    def defer(self, v: Value, finish: Callable[[], GPUTile], issued: GPUTile | None = None) -> None:
        """`v` is computed by `finish()`, called before the first op that uses it or may disturb it
        (or at the end of the block): an asynchronous op's wait. lower_block lowers the elementwise
        ops and pipelined copies that follow first. `issued`: the fp32 accumulators of the wgmma
        group before its wait, which a loop may carry into its next iteration (control.lower_for)."""
        self.flush()
        self.pending = (v, finish)
        self.pending_issued = issued

    def flush(self) -> None:
        if self.pending is not None:
            v, finish = self.pending
            self.pending = self.pending_issued = None
            self.vals[v] = finish()

    def _carry_pending(self, yield_op: Op) -> bool:
        """At the end of a loop body: leave the pending wgmma group in flight when its result is
        only yielded, as one of the values this loop lets its next iteration complete."""
        issued = self.pending_issued
        if self.pending is None or issued is None or self.inflight:
            return False
        v = self.pending[0]
        if self.carry.get(v) != issued.layout or list(yield_op.operands).count(v) != 1:
            return False
        self.pending = self.pending_issued = None
        self.vals[v] = issued
        self.inflight[v] = None
        self.carried = True
        return True

    def take_inflight(self) -> list[tuple[Value, GPUTile]]:
        """The carried groups' values, for a wgmma wait that completes them (then `vals` is set)."""
        out = [(v, self.vals[v]) for v in self.inflight]
        self.inflight.clear()
        if out:
            self.copy_barrier = True
        return out

    def wait_inflight(self) -> None:
        """Complete the carried wgmma groups before their values are read (or a region is entered)."""
        if self.pending is not None:
            self.flush()  # a wgmma wait: it completes the carried groups too
        held = self.take_inflight()
        if held:
            for (v, t), done in zip(held, wait_tiles(self, [t.regs for _, t in held], 0), strict=True):
                self.vals[v] = GPUTile(t.layout, done)


# ops that may be lowered while a deferred wgmma group is in flight: they touch no shared memory
# the group reads (its operands are pipeline slots; these write other slots or scratch above them)
_WINDOW = ELEMENTWISE | {"async_copy", "assume"}


def _bit_runs(values: list[int]) -> list[tuple[int, int, int]]:
    """(first bit, length, value of the first bit) of each run of bits k, k+1, ... whose values are
    v, 2v, 4v, ... (v a power of two); zero values are skipped, other values are runs of one."""
    runs: list[tuple[int, int, int]] = []
    for k, v in enumerate(values):
        if not v:
            continue
        if runs and not v & (v - 1):
            k0, n, v0 = runs[-1]
            if k0 + n == k and not v0 & (v0 - 1) and v == v0 << n:
                runs[-1] = (k0, n + 1, v0)
                continue
        runs.append((k, 1, v))
    return runs


def _vector_hints(fn: Function, axis: dict[Value, AxisInfo]) -> dict[tuple[int, ...], int]:
    """Per tile shape, the widest vector (in elements) any load or store of that shape could use."""
    hints: dict[tuple[int, ...], int] = {}
    for op in fn.walk():
        if op.opcode not in ("load", "store", "async_copy"):
            continue
        p = op.operands[0]
        shape = T.shape_of(p.type)
        if not shape:
            continue
        pe = T.elem_of(p.type)
        assert isinstance(pe, T.PointerType)
        size = 8 if isinstance(pe.elem, T.PointerType) else max(1, pe.elem.bits // 8)
        info = axis.get(p)
        vec = max(1, 16 // size)
        if info is not None and info.contiguity:
            vec = min(vec, info.contiguity[-1], max(1, info.divisibility[-1] // size))
        hints[shape] = max(hints.get(shape, 1), vec)
    return hints


_ = (I64,)
