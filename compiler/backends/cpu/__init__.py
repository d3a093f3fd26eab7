"""The CPU backend: Tile IR -> LLVM IR (loop nests) -> native code loaded in process.

backend.py lists the stages (the contract of compiler/backends/contract.py); this module builds
the LLVM module and loads machine code.

The compiled entry point is a *grid function*: it runs program ids [start, end) of the grid
in a loop, so the runtime can split a launch across threads (ctypes releases the GIL). The grid
function of a kernel whose programs may wait for each other (waits.py) instead claims program ids
below `end` one at a time from the launch record, so that every thread runs the next program not
yet started (runtime/waiting.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from ...ir import types as T
from ...ir.core import Function, Location
from ..llvm.scalar import I32, I64, PTR, llvm_type
from . import waits
from .engine import host, jit_engine, target_machine
from .lower import Lowering

__all__ = ["CPUBinary", "CPUKernel", "build_module", "load_binary", "ctype_of"]


@dataclass
class CPUBinary:
    """The CPU backend's view of a kernel's artifacts (backend.py builds it): what loading and
    launching read."""

    name: str
    symbol: str
    llir: str
    obj: bytes | None
    arena_bytes: int
    locs: list[Location]
    arg_types: list[T.Type]
    debug: bool
    timings: dict[str, float] = field(default_factory=dict)
    arg_names: list[str] = field(default_factory=list)
    loc_args: list[int | None] = field(default_factory=list)  # per loc: the tensor argument of an access
    waits: bool = False  # programs may wait for each other: launched by runtime/waiting.py
    # for the tools' messages (compiler/runtime/compiled.py): accesses without a mask whose address depends on
    # the program id, and notes on slow lowerings (scalar library calls in vector loops)
    unmasked: list[dict[str, object]] = field(default_factory=list)
    notes: list[dict[str, object]] = field(default_factory=list)


def ctype_of(t: T.Type) -> Any:
    if isinstance(t, T.PointerType):
        return ctypes.c_void_p
    assert isinstance(t, T.ScalarType)
    if t.is_float:
        if t == T.fp64:
            return ctypes.c_double
        return ctypes.c_float
    if t.is_bool:
        return ctypes.c_int32
    return {(8, True): ctypes.c_int8, (16, True): ctypes.c_int16, (32, True): ctypes.c_int32,
            (64, True): ctypes.c_int64, (8, False): ctypes.c_uint8, (16, False): ctypes.c_uint16,
            (32, False): ctypes.c_uint32, (64, False): ctypes.c_uint64}[(t.bits, t.is_signed)]


def build_module(fn: Function, symbol: str, debug: bool, locs: list[Location],
                 loc_args: list[int | None]) -> tuple[str, int, bool]:
    """The LLVM IR of `fn`'s grid function `symbol` (before optimisation), the bytes of its
    per-thread arena, and whether its programs claim their ids (waits.py). `locs` and `loc_args`
    receive the source location (and tensor argument) of each check the code reports by number."""
    m = ir.Module(name=symbol)
    m.triple = host().triple
    lw = Lowering(fn, m, symbol + "_kernel", debug, locs, loc_args)
    kernel = lw.build()
    arg_types = [llvm_type(a.type) if a.type != T.i1 else I32 for a in fn.args]
    gty = ir.FunctionType(ir.VoidType(), arg_types + [I64, I64, I32, I32, I32, PTR, PTR])
    g = ir.Function(m, gty, symbol)
    n = len(fn.args)
    args = list(g.args[:n])
    start, end, gx, gy, gz, err, bounds = g.args[n:]
    entry = g.append_basic_block("entry")
    loop = g.append_basic_block("grid")
    done = g.append_basic_block("done")
    b = ir.IRBuilder(entry)
    arena: ir.Value = ir.Constant(PTR, None)
    if lw.arena_bytes:
        malloc = ir.Function(m, ir.FunctionType(PTR, [I64]), "malloc")
        arena = b.call(malloc, [ir.Constant(I64, lw.arena_bytes)])
    claims = bool(lw.waiting)
    if claims:  # program ids from the record's counter, until none is left or the launch is aborted
        claim = g.append_basic_block("claim")
        b.branch(claim)
        b.position_at_end(claim)
        p = b.atomic_rmw("add", _record(b, err, waits.NEXT), ir.Constant(I64, 1), "seq_cst")
        aborted = b.load_atomic(_record(b, err, waits.ABORT), "monotonic", 8, typ=I64)
        b.cbranch(b.and_(b.icmp_signed("<", p, end), b.icmp_unsigned("==", aborted, ir.Constant(I64, 0))),
                  loop, done)
    else:
        b.cbranch(b.icmp_signed("<", start, end), loop, done)
    b.position_at_end(loop)
    if not claims:
        p = b.phi(I64)
        p.add_incoming(start, entry)
    gx64, gy64 = b.zext(gx, I64), b.zext(gy, I64)
    x = b.trunc(b.urem(p, gx64), I32)
    rest = b.udiv(p, gx64)
    y = b.trunc(b.urem(rest, gy64), I32)
    z = b.trunc(b.udiv(rest, gy64), I32)
    b.call(kernel, [*args, x, y, z, gx, gy, gz, arena, err, bounds])
    if claims:
        b.atomic_rmw("add", _record(b, err, waits.DONE), ir.Constant(I64, 1), "seq_cst")
        b.branch(claim)
    else:
        nxt = b.add(p, ir.Constant(I64, 1))
        p.add_incoming(nxt, loop)  # type: ignore[union-attr]
        b.cbranch(b.icmp_signed("<", nxt, end), loop, done)
    b.position_at_end(done)
    if lw.arena_bytes:
        free = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR]), "free")
        b.call(free, [arena])
    b.ret_void()
    return str(m), lw.arena_bytes, claims


def _record(b: ir.IRBuilder, record: ir.Value, slot: int) -> ir.Value:
    return b.gep(record, [ir.Constant(I64, slot)], source_etype=I64)


class CPUKernel:
    """A loaded grid function callable through ctypes (the GIL is released while it runs)."""

    def __init__(self, binary: CPUBinary, addr: int) -> None:
        self.binary = binary
        argtypes = [ctype_of(t) for t in binary.arg_types]
        argtypes += [ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                     ctypes.c_void_p, ctypes.c_void_p]
        self.cfunc = ctypes.CFUNCTYPE(None, *argtypes)(addr)


def load_binary(binary: CPUBinary) -> CPUKernel:
    addr = getattr(binary, "_addr", None)
    if addr is None:
        mod = optimize_parsed(binary.llir)
        addr, _ = jit_engine().add(mod, binary.symbol, binary.symbol, binary.obj)
        binary._addr = addr  # type: ignore[attr-defined]
    return CPUKernel(binary, addr)


def optimize_parsed(text: str) -> Any:
    mod = llvm.parse_assembly(text)
    mod.triple = host().triple
    mod.data_layout = str(target_machine().target_data)
    return mod
