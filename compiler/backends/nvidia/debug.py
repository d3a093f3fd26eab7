"""device_print and device_assert on NVIDIA GPUs.

Printing goes through the CUDA `vprintf` system call: a format string (a constant in global
memory) and a buffer of the arguments laid out as a struct with natural alignment. Each element
is printed once (by its owning copy, scalars by thread 0) in the CPU backend's format:
`pid (x, y, z) idx (i, j) <prefix><value>`.

A failing device_assert does not trap (that would poison the CUDA context): the first failure
of a launch is recorded in the module global `__anvil_debug_err` (kind << 32 | location id,
program id x, y, z, detail; the layout of the CPU backend's error record) and the recording
thread prints the location and message. The runtime reads the record after a debug launch
(debug_host.py); `DEBUG_LOCS[symbol]` maps location ids (1-based) to source locations.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ..llvm import scalar as S
from ..llvm.scalar import I1, I8, I32, I64
from .debug_record import DEBUG_LOCS, ERR_GLOBAL, ERR_WORDS
from .ownership import owned_registers, owner_predicate
from .tiles import GPUTile, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_print", "lower_assert", "record_error", "vprintf", "DEBUG_LOCS", "ERR_GLOBAL", "ERR_WORDS"]

_PTR = ir.PointerType()


def _const_string(lw: NvLowering, text: str) -> ir.Value:
    """A NUL-terminated constant in global memory, as a generic pointer."""
    m = lw.m
    data = bytearray(text.encode() + b"\0")
    name = f"__anvil_str{sum(1 for g in m.globals if g.startswith('__anvil_str'))}"
    ty = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(m, ty, name, addrspace=1)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ty, data)
    return lw.b.addrspacecast(g, _PTR)


def vprintf(lw: NvLowering, fmt: str, args: list[ir.Value]) -> None:
    """printf(fmt, *args) from the current thread; args are i32, i64 or double."""
    b = lw.b
    m = lw.m
    fn = m.globals.get("vprintf") or ir.Function(m, ir.FunctionType(I32, [_PTR, _PTR]), "vprintf")
    f = _const_string(lw, fmt)
    if not args:
        b.call(fn, [f, ir.Constant(_PTR, None)])
        return
    sty = ir.LiteralStructType([a.type for a in args])
    buf = lw.entry.alloca(sty)
    for i, a in enumerate(args):
        b.store(a, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
    b.call(fn, [f, b.bitcast(buf, _PTR)])


def _printable(lw: NvLowering, et: T.ElemType, x: ir.Value, hexa: bool) -> tuple[ir.Value, str]:
    b = lw.b
    if isinstance(et, T.PointerType):
        return b.ptrtoint(x, I64), "0x%llx"
    if et.is_float:
        if et not in (T.fp32, T.fp64):
            x = S.emit_cast(b, et, T.fp32, x)
        if x.type != ir.DoubleType():
            x = b.fpext(x, ir.DoubleType())
        return x, "%a" if hexa else "%f"
    if x.type != I64:
        x = b.sext(x, I64) if et.is_signed else b.zext(x, I64)
    return x, "0x%llx" if hexa else ("%lld" if et.is_signed else "%llu")


def _escape(s: str) -> str:
    return s.replace("%", "%%")


def _print_one(lw: NvLowering, head: str, ids: list[ir.Value], et: T.ElemType, x: ir.Value, hexa: bool) -> None:
    """printf(head + <the value's conversion> + newline, *pid, *ids, value)."""
    val, spec = _printable(lw, et, x, hexa)
    vprintf(lw, f"{head}{spec}\n", [*lw.pid, *ids, val])


def lower_print(lw: NvLowering, op: Op) -> None:
    prefix = _escape(op.attrs["prefix"])
    hexa = bool(op.attrs["hex"])
    b = lw.b
    first = b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0))
    if not op.operands:
        lw.when(first, functools.partial(vprintf, lw, f"pid (%d, %d, %d) {prefix}\n", list(lw.pid)))
        return
    for v in op.operands:
        et = T.elem_of(v.type)
        x = lw.vals[v]
        if not isinstance(x, GPUTile):
            head = f"pid (%d, %d, %d) idx () {prefix}"
            lw.when(first, functools.partial(_print_one, lw, head, [], et, x, hexa))
            continue
        rank = len(T.shape_of(v.type))
        head = f"pid (%d, %d, %d) idx ({', '.join(['%d'] * rank)}) {prefix}"
        hw = lw.hw_coords(x.layout)
        owner = owner_predicate(lw, x.layout)
        for r in owned_registers(x.layout):
            rc = reg_coords(x.layout, r)
            ids = [b.or_(hw[d], ir.Constant(I32, rc[d])) if rc[d] else hw[d] for d in range(rank)]
            lw.when(owner, functools.partial(_print_one, lw, head, ids, et, x.regs[r], hexa))


def _err_record(lw: NvLowering) -> ir.GlobalVariable:
    g = lw.m.globals.get(ERR_GLOBAL)
    if g is None:
        ty = ir.ArrayType(I64, ERR_WORDS)
        g = ir.GlobalVariable(lw.m, ty, ERR_GLOBAL, addrspace=1)
        g.initializer = ir.Constant(ty, None)
        g.align = 8
    return g  # type: ignore[return-value]


def _loc_id(lw: NvLowering, op: Op) -> int:
    locs = DEBUG_LOCS.setdefault(lw.name, [])
    if op.loc in locs:
        return locs.index(op.loc) + 1
    locs.append(op.loc)
    return len(locs)


def record_error(lw: NvLowering, bad: ir.Value, kind: int, op: Op, detail: ir.Value, message: str | None,
                 message_args: list[ir.Value] | None = None, extra: ir.Value | None = None) -> None:
    """If `bad` (i1), record (kind, location, program id, detail[, extra]) unless a failure is
    already recorded, and print `message` (a printf format after the program id; None: print
    nothing) from the recording thread. `extra` goes to the spare word (bounds checks: the
    argument's position + 1)."""
    g = _err_record(lw)
    loc_id = _loc_id(lw, op)

    def record() -> None:
        b2 = lw.b
        words = b2.bitcast(g, ir.PointerType(I64, addrspace=1))
        slot = b2.gep(words, [ir.Constant(I64, 0)])
        res = b2.cmpxchg(slot, ir.Constant(I64, 0), ir.Constant(I64, kind << 32 | loc_id), "monotonic", "monotonic")

        def store() -> None:
            b3 = lw.b
            for i, val in enumerate([*lw.pid, detail, *([extra] if extra is not None else [])]):
                p = b3.gep(words, [ir.Constant(I64, i + 1)])
                b3.store(b3.zext(val, I64) if val.type != I64 else val, p)
            # make the record visible to the host after the kernel ends (st is weak otherwise)
            b3.fence("seq_cst")
            if message is not None:
                vprintf(lw, f"pid (%d, %d, %d) {message}\n", [*lw.pid, *(message_args or [])])

        lw.when(b2.extract_value(res, 1), store)

    lw.when(bad, record)


def lower_assert(lw: NvLowering, op: Op) -> None:
    c = op.operands[0]
    b = lw.b
    x = lw.vals[c]
    if isinstance(x, GPUTile):
        layout = x.layout
        bad: ir.Value = ir.Constant(I1, 0)
        for r in owned_registers(layout):
            bad = b.or_(bad, b.not_(x.regs[r]))
        owner = owner_predicate(lw, layout)
        if owner is not None:
            bad = b.and_(bad, owner)
    else:
        bad = b.and_(b.not_(x), b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0)))
    loc = op.loc
    msg = _escape(op.attrs["msg"] or "")
    text = f"{_escape(loc.file)}:{loc.line}:{loc.col}: device_assert failed" + (f": {msg}" if msg else "")
    record_error(lw, bad, 2, op, ir.Constant(I64, 0), text)
