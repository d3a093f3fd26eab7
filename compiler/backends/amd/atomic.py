"""Atomics on AMDGPU global memory: `atomicrmw` and `cmpxchg` with the AMDGPU synchronization
scopes and the op's memory order, which LLVM's AMDGPU memory model turns into global_atomic_*
instructions with the cache writebacks and invalidations the order needs at that scope.

Scopes: Triton's `gpu` is the agent (one GPU), `cta` the workgroup, `sys` the system (LLVM's
default scope, written without `syncscope`). Orders: relaxed -> monotonic, acquire, release,
acq_rel (the default).

Floating-point read-modify-writes carry `!amdgpu.no.fine.grained.memory` (the tensors are device
allocations, not fine-grained host-coherent memory, so the hardware float atomics are correct) and,
for fadd, `!amdgpu.ignore.denormal.mode` (as Triton and HIP's unsafe-fp-atomics do: fp32 add
then selects global_atomic_add_f32 on gfx942 instead of a compare-and-swap loop). bf16 values
travel as i16 (compiler/backends/llvm/bf16.py) and are reinterpreted as LLVM's `bfloat` for the
atomic. Integer kinds need no metadata.

A tile atomic runs once per element: copies of an element (registers or threads that repeat
another's element, a tile smaller than the program) are predicated off; an in-thread copy takes
the old value of the register it repeats, a thread copy receives nothing defined (as the NVIDIA
backend). A scalar atomic runs in thread 0 and, when its old value is used, is broadcast to every
thread through LDS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ..llvm.scalar import I16, I32
from .convert import lds_load, lds_store
from .memory import _vec
from .tiles import GPUTile, amd_type, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_atomic_rmw", "lower_atomic_cas", "SYNCSCOPE", "ORDER"]

SYNCSCOPE = {"gpu": "agent", "cta": "workgroup", "sys": ""}
ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


class _BFloat(ir.Type):
    """LLVM's `bfloat` (llvmlite has no such type): only used to reinterpret bf16 bits."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


BF16 = _BFloat()


def _ordering(op: Op, order: str) -> str:
    """The ordering text of an atomic: llvmlite prints it verbatim after the operands, which is
    where LLVM's grammar puts `syncscope("...")`."""
    scope = SYNCSCOPE.get(op.attrs.get("scope") or "gpu", "agent")
    return f'syncscope("{scope}") {order}' if scope else order


def _empty_md(lw: AmdLowering) -> ir.MDValue:
    md = getattr(lw, "_atomic_md", None)
    if md is None:
        md = lw.m.add_metadata([])
        lw._atomic_md = md  # type: ignore[attr-defined]
    return md


def _rmw(lw: AmdLowering, op: Op, kind: str, elem: T.ElemType, p: ir.Value, v: ir.Value) -> ir.Value:
    b = lw.b
    order = _ordering(op, ORDER.get(op.attrs["sem"], "acq_rel"))
    is_float = isinstance(elem, T.ScalarType) and elem.is_float
    if elem == T.bf16:
        v = b.bitcast(v, BF16)
    inst = b.atomic_rmw(kind, p, v, order)
    if is_float:
        inst.set_metadata("amdgpu.no.fine.grained.memory", _empty_md(lw))
        if kind == "fadd":
            inst.set_metadata("amdgpu.ignore.denormal.mode", _empty_md(lw))
    return b.bitcast(inst, I16) if elem == T.bf16 else inst


def _cas(lw: AmdLowering, op: Op, elem: T.ElemType, p: ir.Value, c: ir.Value, v: ir.Value) -> ir.Value:
    b = lw.b
    order = ORDER.get(op.attrs["sem"], "acq_rel")
    fail = "acquire" if order in ("acq_rel", "acquire") else "monotonic"
    ety = amd_type(elem)
    if isinstance(ety, ir.IntType):
        return b.extract_value(b.cmpxchg(p, c, v, _ordering(op, order), fail), 0)
    it = ir.IntType(elem.bits)  # type: ignore[union-attr]
    old = b.extract_value(b.cmpxchg(p, b.bitcast(c, it), b.bitcast(v, it), _ordering(op, order), fail), 0)
    return b.bitcast(old, ety)


def _guarded(lw: AmdLowering, pred: ir.Value | None, make: Callable[[], ir.Value], ety: ir.Type) -> ir.Value:
    """`make()` under `pred` (the lanes with pred off leave EXEC); their result is undefined."""
    b = lw.b
    if pred is None:
        return make()
    pre = b.block
    then_bb, end_bb = b.append_basic_block("at"), b.append_basic_block("at.end")
    b.cbranch(pred, then_bb, end_bb)
    b.position_at_end(then_bb)
    v = make()
    done = b.block
    b.branch(end_bb)
    b.position_at_end(end_bb)
    phi = b.phi(ety)
    phi.add_incoming(v, done)
    phi.add_incoming(ir.Constant(ety, None), pre)
    return phi


def _used(lw: AmdLowering, v: Value) -> bool:
    users = getattr(lw, "_used_values", None)
    if users is None:
        users = {o for op in lw.fn.walk() for o in op.operands}
        lw._used_values = users  # type: ignore[attr-defined]
    return v in users


def _scalar(lw: AmdLowering, op: Op, make: Callable[[], ir.Value], ety: ir.Type, elem: T.ElemType,
            mask: ir.Value | None) -> None:
    """Thread 0 performs the atomic; its old value reaches every thread through LDS when used."""
    b = lw.b
    first = b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0))
    old = _guarded(lw, first if mask is None else b.and_(first, mask), make, ety)
    if not _used(lw, op.result):
        lw.vals[op.result] = old
        return
    base = lw.lds(8, op)
    zero = ir.Constant(I32, 0)
    lw.barrier()  # earlier readers of the scratch area are done
    lw.when(first, lambda: lds_store(lw, base, zero, old, elem))
    lw.barrier()
    lw.vals[op.result] = lds_load(lw, base, zero, elem)


def _per_element(lw: AmdLowering, op: Op, ptr_v: Value, mask_v: Value | None, elem: T.ElemType,
                 make: Callable[[int, list[GPUTile]], list[ir.Value]], others: list[Value], width: int = 1) -> None:
    """`make(r, tiles)` performs the atomic of registers r .. r + width - 1 (consecutive elements
    of this thread, one access) and returns their old values."""
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    tiles = [ptr] + [lw.tile(o, layout) for o in others]
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    owner = lw.owner(layout)
    ety = amd_type(elem)
    b = lw.b
    first_of: dict[tuple[int, ...], int] = {}
    regs: list[ir.Value] = []
    for r0 in range(0, num_regs(layout), width):
        c = reg_coords(layout, r0)
        if c in first_of:  # an in-thread copy: the old values of the registers it repeats
            regs += regs[first_of[c]:first_of[c] + width]
            continue
        first_of[c] = r0
        m = mask.regs[r0] if mask is not None else None
        pred = owner if m is None else (m if owner is None else b.and_(owner, m))
        if width == 1:
            regs.append(_guarded(lw, pred, lambda r0=r0: make(r0, tiles)[0], ety))  # type: ignore[misc]
            continue

        def packed(r0: int = r0, vty: ir.VectorType = ir.VectorType(ety, width)) -> ir.Value:
            v: ir.Value = ir.Constant(vty, None)
            for i, x in enumerate(make(r0, tiles)):
                v = b.insert_element(v, x, ir.Constant(I32, i))
            return v

        pv = _guarded(lw, pred, packed, ir.VectorType(ety, width))
        regs += [b.extract_element(pv, ir.Constant(I32, i)) for i in range(width)]
    lw.vals[op.result] = GPUTile(layout, regs)


def _packed_fadd(lw: AmdLowering, op: Op, elem: T.ElemType, p: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
    """fadd of two consecutive fp16 or bf16 elements as one `<2 x half>` / `<2 x bfloat>` atomic
    (global_atomic_pk_add_f16 / _bf16): the pair is 4-byte aligned (memory._vec proved it)."""
    b = lw.b
    lane_ty = BF16 if elem == T.bf16 else amd_type(elem)
    vty = ir.VectorType(lane_ty, 2)
    v: ir.Value = ir.Constant(vty, None)
    for i, x in enumerate(vals):
        v = b.insert_element(v, b.bitcast(x, BF16) if elem == T.bf16 else x, ir.Constant(I32, i))
    inst = b.atomic_rmw("fadd", p, v, _ordering(op, ORDER.get(op.attrs["sem"], "acq_rel")))
    inst.set_metadata("amdgpu.no.fine.grained.memory", _empty_md(lw))
    inst.set_metadata("amdgpu.ignore.denormal.mode", _empty_md(lw))
    outs = [b.extract_element(inst, ir.Constant(I32, i)) for i in range(2)]
    return [b.bitcast(o, I16) for o in outs] if elem == T.bf16 else outs


def lower_atomic_rmw(lw: AmdLowering, op: Op) -> None:
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if op.attrs["has_mask"] else None
    elem = T.elem_of(op.result.type)
    kind = op.attrs["kind"]
    if not isinstance(ptr_v.type, T.TileType):
        p, v = lw.scalar(ptr_v), lw.scalar(val_v)
        m = lw.scalar(mask_v) if mask_v is not None else None
        _scalar(lw, op, lambda: _rmw(lw, op, kind, elem, p, v), amd_type(elem), elem, m)
        return
    if kind == "fadd" and elem in (T.fp16, T.bf16) and _vec(lw, lw.tile(ptr_v).layout, ptr_v, mask_v, elem) >= 2:
        _per_element(lw, op, ptr_v, mask_v, elem,
                     lambda r, t: _packed_fadd(lw, op, elem, t[0].regs[r], t[1].regs[r:r + 2]), [val_v], 2)
        return
    _per_element(lw, op, ptr_v, mask_v, elem, lambda r, t: [_rmw(lw, op, kind, elem, t[0].regs[r], t[1].regs[r])],
                 [val_v])


def lower_atomic_cas(lw: AmdLowering, op: Op) -> None:
    ptr_v, cmp_v, val_v = op.operands
    elem = T.elem_of(op.result.type)
    if not isinstance(ptr_v.type, T.TileType):
        p, c, v = lw.scalar(ptr_v), lw.scalar(cmp_v), lw.scalar(val_v)
        _scalar(lw, op, lambda: _cas(lw, op, elem, p, c, v), amd_type(elem), elem, None)
        return
    _per_element(lw, op, ptr_v, None, elem,
                 lambda r, t: [_cas(lw, op, elem, t[0].regs[r], t[1].regs[r], t[2].regs[r])], [cmp_v, val_v])
