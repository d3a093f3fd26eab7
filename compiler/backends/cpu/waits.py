"""Loops in which a program may wait for another program, and the launch record they report to.

On a GPU the programs of a launch run at the same time, so a program may wait in a loop for
memory another program writes: a lock (`while tl.atomic_cas(lock, 0, 1) == 1: pass`), a flag a
later program sets (a stream-K fix-up), a barrier. The CPU backend finds such loops in the Tile
IR: a `while` that reads memory through an atomic or a volatile load (`for` loops run a count
fixed on entry; one with `break` is a `while` by then). A kernel with one is launched by
runtime/waiting.py, which runs its programs concurrently; the code generated here tells it which
programs are waiting:

- a loop iteration *writes* when it stores, or when an atomic changes memory (a failed
  compare-and-swap, `atomic_add(p, 0)` or `atomic_max` below the current value change nothing);
- after POLLS consecutive iterations that write nothing the program counts itself as waiting
  (the record's WAITING slot, and WAIT_LOC names the loop), then sleeps between polls (SLEEP_US,
  growing), and leaves the count when an iteration writes or the loop ends;
- a waiting program whose record has ABORT set returns at once (the launch then fails).

The launch record is an array of int64 slots, one per launch: the debug error report (slots
0-4: kind and location, program id, detail), then the slots below. The grid function of such a
kernel claims program ids from NEXT instead of running a fixed range, and counts finished
programs in DONE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.core import Function, Op
from ..llvm.scalar import I1, I32, I64

if TYPE_CHECKING:
    from .lower import Lowering

__all__ = ["RECORD_SLOTS", "NEXT", "DONE", "WAITING", "ABORT", "WAIT_LOC", "POLLS", "waiting_loops", "WaitLoop",
           "begin", "iteration_start", "iteration_end", "finish", "note_write", "rmw_changes", "cas_changes"]

NEXT, DONE, WAITING, ABORT, WAIT_LOC = 5, 6, 7, 8, 9
RECORD_SLOTS = 10
POLLS = 256
"""Consecutive iterations without a write after which a program counts as waiting."""
SLEEP_US = 50
"""Microseconds a waiting program first sleeps between polls (other programs get the cores); the
sleep doubles every SLEEP_DOUBLES polls up to SLEEP_US << SLEEP_MAX_SHIFT (1.6 ms), so that hundreds
of waiting programs leave the cores to the few that work."""
SLEEP_DOUBLES = 32
SLEEP_MAX_SHIFT = 5


def _reads_shared(op: Op) -> bool:
    return op.opcode in ("atomic_rmw", "atomic_cas") or (op.opcode == "load" and bool(op.attrs.get("volatile")))


def waiting_loops(fn: Function) -> set[int]:
    """The ids of the `while` ops of `fn` that read memory through an atomic or a volatile load."""
    return {id(op) for op in fn.walk() if op.opcode == "while" and any(_reads_shared(o) for o in op.walk())}


@dataclass
class WaitLoop:
    """The state of one waiting loop in the generated code: its polls without a write, and whether
    the current iteration wrote."""

    polls: ir.Value  # i64 slot
    wrote: ir.Value  # i1 slot
    loc_id: int


def _slot(lw: Lowering, k: int) -> ir.Value:
    return lw.b.gep(lw.err, [ir.Constant(I64, k)], source_etype=I64)


def begin(lw: Lowering, op: Op) -> WaitLoop:
    """Before the loop: no polls yet. The loop's writes are noted from here on."""
    eb = lw.entry_builder
    w = WaitLoop(eb.alloca(I64), eb.alloca(I1), lw.loc_id(op))
    lw.b.store(ir.Constant(I64, 0), w.polls)
    lw.waits.append(w)
    return w


def iteration_start(lw: Lowering, w: WaitLoop) -> None:
    lw.b.store(ir.Constant(I1, 0), w.wrote)


def iteration_end(lw: Lowering, w: WaitLoop) -> None:
    """At the latch: count a poll without a write (from POLLS on, as waiting: sleep, and return if
    the launch is aborted), or start counting again after a write."""
    b = lw.b
    polls = b.load(w.polls, typ=I64)
    wrote_bb, idle_bb, join_bb = (b.append_basic_block(n) for n in ("wait.wrote", "wait.idle", "wait.next"))
    b.cbranch(b.load(w.wrote, typ=I1), wrote_bb, idle_bb)
    b.position_at_end(wrote_bb)
    _leave(lw, polls)
    b.store(ir.Constant(I64, 0), w.polls)
    b.branch(join_bb)
    b.position_at_end(idle_bb)
    n = b.add(polls, ir.Constant(I64, 1))
    b.store(n, w.polls)
    poll_bb, abort_bb = b.append_basic_block("wait.poll"), b.append_basic_block("wait.abort")
    b.cbranch(b.icmp_unsigned(">=", n, ir.Constant(I64, POLLS)), poll_bb, join_bb)
    b.position_at_end(poll_bb)
    with b.if_then(b.icmp_unsigned("==", n, ir.Constant(I64, POLLS))):
        b.atomic_rmw("add", _slot(lw, WAITING), ir.Constant(I64, 1), "seq_cst")
        b.atomic_rmw("xchg", _slot(lw, WAIT_LOC), ir.Constant(I64, w.loc_id), "monotonic")
    shift = b.lshr(b.sub(n, ir.Constant(I64, POLLS)), ir.Constant(I64, SLEEP_DOUBLES.bit_length() - 1))
    capped = b.select(b.icmp_unsigned("<", shift, ir.Constant(I64, SLEEP_MAX_SHIFT)), shift,
                      ir.Constant(I64, SLEEP_MAX_SHIFT))
    b.call(_usleep(lw), [b.trunc(b.shl(ir.Constant(I64, SLEEP_US), capped), I32)])
    aborted = b.load_atomic(_slot(lw, ABORT), "monotonic", 8, typ=I64)
    b.cbranch(b.icmp_unsigned("!=", aborted, ir.Constant(I64, 0)), abort_bb, join_bb)
    b.position_at_end(abort_bb)
    b.ret_void()  # the program ends here; the launch reports why
    b.position_at_end(join_bb)


def finish(lw: Lowering, w: WaitLoop) -> None:
    """After the loop: a program that was counted as waiting no longer is."""
    lw.waits.remove(w)
    _leave(lw, lw.b.load(w.polls, typ=I64))


def _leave(lw: Lowering, polls: ir.Value) -> None:
    b = lw.b
    with b.if_then(b.icmp_unsigned(">=", polls, ir.Constant(I64, POLLS))):
        b.atomic_rmw("sub", _slot(lw, WAITING), ir.Constant(I64, 1), "seq_cst")


def note_write(lw: Lowering, changed: ir.Value | None = None) -> None:
    """The code being emitted writes memory (when `changed`, an i1, holds): every waiting loop it
    runs in has a writing iteration."""
    b = lw.b
    for w in lw.waits:
        if changed is None:
            b.store(ir.Constant(I1, 1), w.wrote)
        else:
            b.store(b.or_(b.load(w.wrote, typ=I1), changed), w.wrote)


def _as_int(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    if isinstance(v.type, ir.IntType):
        return v
    bits = {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(v.type)]
    return b.bitcast(v, ir.IntType(bits))


def rmw_changes(b: ir.IRBuilder, kind: str, old: ir.Value, x: ir.Value) -> ir.Value:
    """Whether `atomic_<kind>(p, x)` that found `old` at p changed memory (i1)."""
    if kind in ("fadd", "fmax", "fmin"):
        if kind == "fadd":
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.fcmp_unordered(">" if kind == "fmax" else "<", x, old)
    o, v = _as_int(b, old), _as_int(b, x)
    zero = ir.Constant(v.type, 0)
    if kind in ("add", "xor"):
        return b.icmp_unsigned("!=", v, zero)
    if kind == "xchg":
        return b.icmp_unsigned("!=", o, v)
    if kind == "and":
        return b.icmp_unsigned("!=", b.and_(o, v), o)
    if kind == "or":
        return b.icmp_unsigned("!=", b.or_(o, v), o)
    if kind in ("max", "min"):
        return b.icmp_signed(">" if kind == "max" else "<", v, o)
    if kind in ("umax", "umin"):
        return b.icmp_unsigned(">" if kind == "umax" else "<", v, o)
    return ir.Constant(I1, 1)


def cas_changes(b: ir.IRBuilder, old: ir.Value, cmp: ir.Value, val: ir.Value) -> ir.Value:
    """Whether a compare-and-swap of `cmp` for `val` that found `old` changed memory (integers; i1)."""
    return b.and_(b.icmp_unsigned("==", old, cmp), b.icmp_unsigned("!=", cmp, val))


def _usleep(lw: Lowering) -> ir.Function:
    f = lw.m.globals.get("usleep")
    if f is None:
        f = ir.Function(lw.m, ir.FunctionType(I32, [I32]), "usleep")
    return f  # type: ignore[return-value]
