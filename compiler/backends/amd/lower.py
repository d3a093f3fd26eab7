"""Tile IR -> per-thread LLVM IR for AMDGPU (wave64).

A program is one workgroup of `num_warps` wavefronts of 64 lanes. Every tile value is distributed
over the workgroup's threads by a linear layout (compiler.layouts): thread (lane, wave) holds
register r = element L(r, lane, wave). Elementwise ops apply register by register; an operand in
another layout is gathered from the thread's own registers when the thread already holds the
elements, else moved through LDS (convert.py). Scalars are uniform: every thread holds the same
value.

The LDS (addrspace 3) this kernel uses is one static scratch area, reused by every conversion and
reduction and sized to the largest: `lds_bytes`, the code object's group segment size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Block, Function, Op, Value
from ...layouts import LANE, WARP, LinearLayout, fill_blocked
from ...passes.axis_info import AxisInfo, analyze_axis_info
from ..llvm.scalar import I1, I8, I32, I64
from . import dot
from .convert import convert
from .ops import lower_op
from .tiles import CPTR, LDS_LIMIT, LDS_SYMBOL, WAVE, GPUTile, amd_type, num_regs, unsupported

__all__ = ["AmdLowering"]


class AmdLowering:
    """Lowers one Tile IR function into an `amdgpu_kernel` in `module`."""

    def __init__(self, fn: Function, module: ir.Module, name: str, num_warps: int, arch: str) -> None:
        self.fn = fn
        self.m = module
        self.name = name
        self.num_warps = num_warps
        self.arch = arch
        self.vals: dict[Value, Any] = {}
        self.axis: dict[Value, AxisInfo] = {}
        self.vec_hint: dict[tuple[int, ...], int] = {}
        self.layout_cache: dict[tuple[int, ...], LinearLayout] = {}
        self.hw_cache: dict[LinearLayout, list[ir.Value]] = {}
        self.lds_bytes = 0
        # layouts values should be created in, ahead of their use (dot.plan: MFMA accumulators)
        self.prefer: dict[Value, LinearLayout] = {}
        # the ops using each value (a reshape picks its result's layout by them)
        self.users: dict[Value, list[Op]] = {}
        self._lds: ir.GlobalVariable | None = None
        # fp add/sub/mul may fuse into fma, as hipcc and Triton do by default
        self.fmf: tuple[str, ...] = ("contract",)

    # ------------------------------------------------------------------ layouts
    def canonical(self, shape: tuple[int, ...]) -> LinearLayout:
        hit = self.layout_cache.get(shape)
        if hit is not None:
            return hit
        numel = 1
        for s in shape:
            numel *= s
        # never more elements per thread along the fast dim than the tile spreads over the program
        per_thread = max(1, numel // (WAVE * self.num_warps))
        vec = min(self.vec_hint.get(shape, 4), shape[-1], per_thread)
        layout = fill_blocked(shape, vec, self.num_warps, WAVE)
        self.layout_cache[shape] = layout
        return layout

    def hw_coords(self, layout: LinearLayout) -> list[ir.Value]:
        """Per output dim, the coordinate this thread's lane and wave contribute (i32, in the entry
        block). Bases combine by XOR (a linear layout over GF(2)); in a blocked layout they are
        distinct powers of two, and LLVM turns the XORs into ORs of bit fields."""
        hit = self.hw_cache.get(layout)
        if hit is not None:
            return hit
        b = self.entry
        out: list[ir.Value] = []
        for d in range(len(layout.out_dims)):
            acc: ir.Value | None = None
            for name, src in ((LANE, self.lane), (WARP, self.warp)):
                for k, basis in enumerate(layout.bases(name)):
                    v = basis[d]
                    if not v:
                        continue
                    bit = b.and_(b.lshr(src, ir.Constant(I32, k)) if k else src, ir.Constant(I32, 1))
                    part = b.shl(bit, ir.Constant(I32, v.bit_length() - 1)) if not v & (v - 1) \
                        else b.mul(bit, ir.Constant(I32, v))
                    acc = part if acc is None else b.xor(acc, part)
            out.append(acc if acc is not None else ir.Constant(I32, 0))
        self.hw_cache[layout] = out
        return out

    def owner(self, layout: LinearLayout) -> ir.Value | None:
        """The predicate of the threads that own their elements of `layout`: lanes and waves whose
        bits map to nothing hold copies of another thread's elements (a tile smaller than the
        program); only the thread with those bits zero writes. None: every thread owns its own."""
        b = self.entry
        pred: ir.Value | None = None
        for name, src in ((LANE, self.lane), (WARP, self.warp)):
            mask = sum(1 << k for k, basis in enumerate(layout.bases(name)) if not any(basis))
            if mask:
                z = b.icmp_unsigned("==", b.and_(src, ir.Constant(I32, mask)), ir.Constant(I32, 0))
                pred = z if pred is None else b.and_(pred, z)
        return pred

    # ------------------------------------------------------------------ function
    def build(self) -> ir.Function:
        self.axis = analyze_axis_info(self.fn)
        for op in self.fn.walk():
            for o in op.operands:
                self.users.setdefault(o, []).append(op)
        self.vec_hint = _vector_hints(self.fn, self.axis)
        if any(op.opcode == "dot" for op in self.fn.walk()):
            dot.plan(self)
        params = [amd_type(a.type) if a.type != T.i1 else I32 for a in self.fn.args]
        f = ir.Function(self.m, ir.FunctionType(ir.VoidType(), params), self.name)
        f.calling_convention = "amdgpu_kernel"
        for a, name in zip(f.args, self.fn.arg_names, strict=True):
            a.name = name
            if isinstance(a.type, ir.PointerType):
                a.add_attribute("noundef")
        self.f = f
        entry_bb = f.append_basic_block("entry")
        body_bb = f.append_basic_block("body")
        self.entry = ir.IRBuilder(entry_bb)
        self.b = ir.IRBuilder(body_bb)
        e = self.entry
        tid = self._call(e, "llvm.amdgcn.workitem.id.x", I32, [])
        self.tid = tid
        self.lane = e.and_(tid, ir.Constant(I32, WAVE - 1))
        # the wave index is uniform across a wave: readfirstlane keeps it (and what derives from
        # it) in scalar registers
        self.warp = self._call(e, "llvm.amdgcn.readfirstlane.i32", I32, [e.lshr(tid, ir.Constant(I32, 6))])
        self.pid = [self._call(e, f"llvm.amdgcn.workgroup.id.{a}", I32, []) for a in "xyz"]
        self._nprog: list[ir.Value] | None = None
        for a, p in zip(self.fn.args, f.args, strict=True):
            self.vals[a] = e.trunc(p, I1) if a.type == T.i1 else p
        self.lower_block(self.fn.body)
        self.b.ret_void()
        e.branch(body_bb)
        return f

    def num_programs(self, axis: int) -> ir.Value:
        """The grid's size along `axis`, in workgroups: the hidden_block_count_{x,y,z} words at the
        start of the implicit kernel arguments (code object v5)."""
        if self._nprog is None:
            e = self.entry
            base = self._call(e, "llvm.amdgcn.implicitarg.ptr", CPTR, [])
            self._nprog = []
            for k in range(3):
                p = e.gep(base, [ir.Constant(I64, 4 * k)], source_etype=I8) if k else base
                v = e.load(p, typ=I32)
                v.align = 4
                self._nprog.append(v)
        return self._nprog[axis]

    def _call(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        fn = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(ret, [a.type for a in args]), name)
        return b.call(fn, args)

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        return self._call(self.b, name, ret, args)

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
        """A workgroup barrier that also orders LDS accesses (as HIP's __syncthreads)."""
        self.b.fence("release", "workgroup")
        self.intrinsic("llvm.amdgcn.s.barrier", ir.VoidType(), [])
        self.b.fence("acquire", "workgroup")

    def lds(self, nbytes: int, op: Op | None) -> ir.Value:
        """The LDS scratch area, at least `nbytes` long (its final size is the largest request)."""
        self.lds_bytes = max(self.lds_bytes, -(-nbytes // 16) * 16)
        if self.lds_bytes > LDS_LIMIT:
            raise unsupported(f"a layout conversion or reduction needing {self.lds_bytes} bytes of LDS (the limit "
                              f"is {LDS_LIMIT})", op, self.arch, "use smaller blocks")
        if self._lds is None:
            # sized in `finish_module` once every use is known; accesses address it by byte offset
            g = ir.GlobalVariable(self.m, ir.ArrayType(I8, 0), LDS_SYMBOL, addrspace=3)
            g.linkage = "external"
            g.align = 16
            self._lds = g
        return self._lds

    # ------------------------------------------------------------------ values
    def tile(self, v: Value, layout: LinearLayout | None = None) -> GPUTile:
        """`v` as a tile in `layout` (converting if needed; splatting scalars)."""
        x = self.vals[v]
        shape = T.shape_of(v.type)
        target = layout or (x.layout if isinstance(x, GPUTile) else self.canonical(shape))
        if not isinstance(x, GPUTile):
            return GPUTile(target, [x] * num_regs(target))
        if x.layout == target:
            return x
        if v.op is not None and v.op.opcode == "splat":  # the same value in every register
            return GPUTile(target, [x.regs[0]] * num_regs(target))
        return convert(self, x, target, T.elem_of(v.type), v.op)

    def scalar(self, v: Value) -> ir.Value:
        x = self.vals[v]
        if isinstance(x, GPUTile):
            raise UnsupportedError("internal: a tile was used where a scalar was expected")
        return x

    def result_layout(self, op: Op) -> LinearLayout:
        """Elementwise results keep their operands' layout when they all agree; otherwise the
        layout of the first operand that is not a broadcast or splat (so the cheap ones move)."""
        shape = T.shape_of(op.results[0].type)
        tiles = [(o, self.vals[o]) for o in op.operands if isinstance(self.vals.get(o), GPUTile)]
        layouts = {t.layout for _, t in tiles}
        if len(layouts) == 1:
            lay = layouts.pop()
            if lay.out_shape == shape:
                return lay
        for o, t in tiles:
            if t.layout.out_shape == shape and (o.op is None or o.op.opcode not in ("broadcast", "splat")):
                return t.layout
        return self.canonical(shape)

    # ------------------------------------------------------------------ ops
    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            if op.opcode in ("yield", "condition"):
                continue
            lower_op(self, op)


def _vector_hints(fn: Function, axis: dict[Value, AxisInfo]) -> dict[tuple[int, ...], int]:
    """Per tile shape, the widest vector (in elements, at most 16 bytes) a load or store of that
    shape could use, from the pointers' contiguity and divisibility."""
    hints: dict[tuple[int, ...], int] = {}
    for op in fn.walk():
        if op.opcode not in ("load", "store"):
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
