"""The NVIDIA lowering table: one function per Tile IR op (register by register)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...ir.ops import ELEMENTWISE_COMPUTE
from ..llvm import scalar as S
from ..llvm.scalar import I1, I32, I64
from .lower import GPUTile, constant_runs, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from ...layouts import LinearLayout
    from .lower import NvLowering

__all__ = ["lower_op", "LOWER"]


def lower_op(lw: NvLowering, op: Op) -> None:
    fn = LOWER.get(op.opcode)
    if fn is None:
        if op.opcode in ELEMENTWISE_COMPUTE:
            return _elementwise(lw, op)
        raise UnsupportedError(f"{op.opcode} is not supported by the NVIDIA backend yet", op.loc,
                               hint="run on CPU tensors (the CPU backend supports it)")
    fn(lw, op)


def _scalar_op(lw: NvLowering, op: Op, args: list[ir.Value]) -> ir.Value:
    b = lw.b
    oc = op.opcode
    if oc == "math":
        from .math import emit_gpu_math

        return emit_gpu_math(lw, op.attrs["fn"], T.elem_of(op.operands[0].type), args)  # type: ignore[arg-type]
    if oc == "addptr":
        pe = T.elem_of(op.operands[0].type)
        assert isinstance(pe, T.PointerType)
        off = args[1]
        oe = T.elem_of(op.operands[1].type)
        if off.type != I64:
            off = b.sext(off, I64) if isinstance(oe, T.ScalarType) and oe.is_signed else b.zext(off, I64)
        return b.gep(args[0], [off], source_etype=nv_type(pe.elem) if isinstance(pe.elem, T.ScalarType) else I64)
    if oc in ("pow", "atan2", "hypot"):
        et = T.elem_of(op.result.type)
        if isinstance(et, T.ScalarType) and et.is_float:
            from .math import libdevice_call

            return libdevice_call(lw, oc, et, args)
    if oc == "div" and T.elem_of(op.result.type) == T.fp32:
        return lw.intrinsic("llvm.nvvm.div.full", S.F32, args)
    if oc == "cast":
        from .math import emit_gpu_cast

        r = emit_gpu_cast(lw, T.elem_of(op.operands[0].type), T.elem_of(op.result.type), args[0],
                          op.attrs.get("rounding"))
        if r is not None:
            return r
    from ..cpu.elementwise import emit_scalar_op

    return emit_scalar_op(lw, op, args)  # type: ignore[arg-type]


def _elementwise(lw: NvLowering, op: Op) -> None:
    r = op.results[0]
    if not isinstance(r.type, T.TileType):
        lw.vals[r] = _scalar_op(lw, op, [lw.scalar(o) for o in op.operands])
        return
    layout = lw.result_layout(op)
    ins = [lw.tile(o, layout) for o in op.operands]
    lw.vals[r] = GPUTile(layout, elementwise_regs(lw, op, layout, lambda i: [t.regs[i] for t in ins]))


def elementwise_regs(lw: NvLowering, op: Op, layout: LinearLayout,
                     args: Callable[[int], list[ir.Value]]) -> list[ir.Value]:
    """The registers of elementwise `op`'s result in `layout`, `args(i)` the operands of register
    i; computed once per run of equal values (comparisons against multiples of the run)."""
    rep = constant_runs(lw.axis.get(op.results[0]), layout) if op.opcode in ("cmp", "and", "or") else None
    regs: list[ir.Value] = []
    for i in range(num_regs(layout)):
        regs.append(regs[rep[i]] if rep is not None and rep[i] != i else _scalar_op(lw, op, args(i)))
    return regs


def _constant(lw: NvLowering, op: Op) -> None:
    t = op.result.type
    assert isinstance(t, T.ScalarType)
    lw.vals[op.result] = S.const(t, op.attrs["value"])


def _pid(lw: NvLowering, op: Op) -> None:
    lw.vals[op.result] = lw.pid[op.attrs["axis"]]


def _nprog(lw: NvLowering, op: Op) -> None:
    lw.vals[op.result] = lw.nprog[op.attrs["axis"]]


def _make_range(lw: NvLowering, op: Op) -> None:
    shape = T.shape_of(op.result.type)
    layout = lw.canonical(shape)
    hw = lw.hw_coords(layout)[0]
    start = op.attrs["start"]
    b = lw.b
    base = b.add(hw, ir.Constant(I32, start)) if start else hw
    regs = [b.add(base, ir.Constant(I32, reg_coords(layout, r)[0])) for r in range(num_regs(layout))]
    lw.vals[op.result] = GPUTile(layout, regs)


def _splat(lw: NvLowering, op: Op) -> None:
    layout = lw.canonical(T.shape_of(op.result.type))
    lw.vals[op.result] = GPUTile(layout, [lw.scalar(op.operands[0])] * num_regs(layout))


def _expand_dims(lw: NvLowering, op: Op) -> None:
    x = lw.vals[op.operands[0]]
    ax = op.attrs["axis"]
    shape = T.shape_of(op.result.type)
    if not isinstance(x, GPUTile):
        lw.vals[op.result] = GPUTile(lw.canonical(shape), [x] * num_regs(lw.canonical(shape)))
        return
    from ...layouts import LinearLayout, dim_names

    lay = x.layout
    bases = {name: [(*b[:ax], 0, *b[ax:]) for b in rows] for name, rows in lay.in_dims}
    names = dim_names(len(shape))
    new = LinearLayout.from_bases(bases, dict(zip(names, shape, strict=True)))
    lw.vals[op.result] = GPUTile(new, list(x.regs))


def _broadcast(lw: NvLowering, op: Op) -> None:
    from .remat import lower_broadcast

    lower_broadcast(lw, op)


def _reshape(lw: NvLowering, op: Op) -> None:
    from .reshape import lower_reshape

    lower_reshape(lw, op)


def _trans(lw: NvLowering, op: Op) -> None:
    from ...layouts import LinearLayout, dim_names

    x = lw.tile(op.operands[0])
    perm = op.attrs["perm"]
    shape = T.shape_of(op.result.type)
    bases = {name: [tuple(b[p] for p in perm) for b in rows] for name, rows in x.layout.in_dims}
    new = LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))
    lw.vals[op.result] = GPUTile(new, list(x.regs))


def _memory(name: str) -> Callable[[NvLowering, Op], None]:
    def f(lw: NvLowering, op: Op) -> None:
        from . import memory

        getattr(memory, name)(lw, op)

    return f


def _control(name: str) -> Callable[[NvLowering, Op], None]:
    def f(lw: NvLowering, op: Op) -> None:
        from . import control

        getattr(control, name)(lw, op)

    return f


def _reduce(lw: NvLowering, op: Op) -> None:
    from .reduce import lower_reduce

    lower_reduce(lw, op)


def _dot(lw: NvLowering, op: Op) -> None:
    from .dot import lower_dot

    lower_dot(lw, op)


def _scan(lw: NvLowering, op: Op) -> None:
    from .scan import lower_scan

    lower_scan(lw, op)


def _lazy(module: str, name: str) -> Callable[[NvLowering, Op], None]:
    """The lowering `name` of module `module` (imported at first use)."""
    def f(lw: NvLowering, op: Op) -> None:
        import importlib

        getattr(importlib.import_module(f"{__package__}.{module}"), name)(lw, op)

    return f


def _noop(lw: NvLowering, op: Op) -> None:
    return None


def _barrier(lw: NvLowering, op: Op) -> None:
    lw.barrier()


def _shared_alloc(lw: NvLowering, op: Op) -> None:
    """tl.extra.cuda.shared_memory: the address of the region NvLowering placed for this op."""
    offset = lw.held[op]
    base = lw.scratch_base()
    lw.vals[op.result] = lw.entry.add(base, ir.Constant(I32, offset)) if offset else base


LOWER: dict[str, Callable[[NvLowering, Op], None]] = {
    "constant": _constant,
    "program_id": _pid,
    "num_programs": _nprog,
    "shared_alloc": _shared_alloc,
    "make_range": _make_range,
    "splat": _splat,
    "expand_dims": _expand_dims,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "trans": _trans,
    "load": _memory("lower_load"),
    "store": _memory("lower_store"),
    "atomic_rmw": _memory("lower_atomic_rmw"),
    "atomic_cas": _memory("lower_atomic_cas"),
    "for": _control("lower_for"),
    "if": _control("lower_if"),
    "while": _control("lower_while"),
    "reduce": _reduce,
    "scan": _scan,
    "dot": _dot,
    "assume": _noop,
    "barrier": _barrier,
    "join": _lazy("shape_ops", "lower_join"),
    "split": _lazy("shape_ops", "lower_split"),
    "cat": _lazy("shape_ops", "lower_cat"),
    "gather": _lazy("shape_ops", "lower_gather"),
    "histogram": _lazy("histogram", "lower_histogram"),
    "sort": _lazy("sort", "lower_sort"),
    "print": _lazy("debug", "lower_print"),
    "assert": _lazy("debug", "lower_assert"),
    "inline_asm": _lazy("inline_asm", "lower_inline_asm"),
    "async_copy": _lazy("async_copy", "lower_async_copy"),
    "async_wait": _lazy("async_copy", "lower_async_wait"),
    "async_drain": _lazy("async_copy", "lower_async_drain"),
}

_ = (I1,)
