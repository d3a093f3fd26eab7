"""An IRBuilder that emits each pure integer / pointer instruction once per basic block.

The lowering computes a tile's per-register index arithmetic one register at a time, and the same
expression recurs: a layout's hardware coordinates, a divisor's zero and overflow guards, an
offset added to every row. Half of the instructions of a tensor-core kernel's LLVM IR were exact
repeats of an earlier one in the same block, which LLVM's first EarlyCSE then deleted. `CseBuilder`
hands back the earlier instruction instead of creating the repeat, so the IR is built, printed and
parsed at about half the size, and LLVM's pipeline is left with what its EarlyCSE would have left:
the generated code is the same (scripts/ptx_fingerprint.py checks it).

EarlyCSE walks a block in order, deletes an instruction nothing uses, and replaces a repeat of an
earlier surviving instruction by it: the survivor of a set of repeats is the first one that has a
user. The builder hands out each repeat as a `Repeat`, a stand-in that prints as the first
instance; `CseRecord.settle`, once the function is complete, moves the first instance to the place
of the first repeat used when nothing used the first instance itself. The IR is then exactly what
EarlyCSE would have made of the repeats.

Only instructions without side effects or flags set after creation are shared (the integer
arithmetic that repeats in practice, integer compares, selects, sign and zero extensions), only
within one block and only while the builder appends at the block's end. Floating-point arithmetic
is never shared: the lowering adds fast-math flags to an instruction after the builder made it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

from llvmlite import ir

__all__ = ["CseBuilder", "CseRecord", "Repeat"]

_NO = object()  # an argument the cache cannot key on: the call is not shared
_BY_ID: set[type] = set()  # instruction, argument and global classes: keyed by identity
_OTHER: set[type] = set()  # constant expressions (new objects at each use) and the like: not keyed


def _vk(v: Any) -> Any:
    """The key of an operand: its identity (a Repeat: the instruction's), a constant's type and
    value, else _NO."""
    t = type(v)
    if t in _BY_ID:
        return id(v)
    if t is Repeat:
        return id(v.of)  # what EarlyCSE replaces the repeat by
    if t is ir.Constant:
        c = v.constant
        if type(c) is int or type(c) is bool:
            return (v.type, type(c), c)
        if type(c) is float and c == c:  # -0.0 and 0.0 differ by their hex form; NaNs are not shared
            return (v.type, c.hex())
        return _NO
    if t in _OTHER:
        return _NO
    if issubclass(t, (ir.Instruction, ir.Argument, ir.GlobalValue)):  # alive with the module: ids are not reused
        _BY_ID.add(t)
        return id(v)
    _OTHER.add(t)
    return _NO


def _reuse(self: CseBuilder, key: Any, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A Repeat of the earlier instruction under `key`, else a new one (`make(self, *args, **kwargs)`)."""
    record = self.record
    first = record.seen.get(key)
    if first is None:
        first = record.seen[key] = make(self, *args, **kwargs)
        return first
    instructions = self._block.instructions
    rep = Repeat(first, instructions[-1] if instructions else None, len(record.order), args)
    record.order.append(rep)
    reps = record.repeats.get(id(first))
    if reps is None:
        record.repeats[id(first)] = (first, [rep])
    else:
        reps[1].append(rep)
    return rep


class Repeat:
    """A repeat of the instruction `of` in its block: prints as `of`, and reads as it (type,
    attributes, isinstance). `after`: the instruction the repeat would have followed."""

    __slots__ = ("of", "after", "seq", "args")

    def __init__(self, of: ir.Instruction, after: ir.Instruction | None, seq: int, args: tuple[Any, ...]) -> None:
        self.of = of
        self.after = after
        self.seq = seq  # handed out in this order
        self.args = args  # the builder call's arguments: the values that the repeat uses

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(repeat, ir.GEPInstr) etc. answer as for the instruction
        return type(self.of)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.of, name)

    def get_reference(self) -> str:
        return self.of.get_reference()  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return str(self.of)


def _binop(method: str) -> Callable[..., Any]:
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> Any:
        block = self._block
        if self._anchor == len(block.instructions):
            a = id(lhs) if type(lhs) in _BY_ID else _vk(lhs)
            b = id(rhs) if type(rhs) in _BY_ID else _vk(rhs)
            if a is not _NO and b is not _NO:
                key = (id(block), method, a, b, tuple(flags)) if flags else (id(block), method, a, b)
                return _reuse(self, key, make, lhs, rhs, name=name, flags=flags)
        return make(self, lhs, rhs, name=name, flags=flags)

    return _named(emit, make)


def _icmp(method: str) -> Callable[..., Any]:
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, cmpop: str, lhs: ir.Value, rhs: ir.Value, name: str = "") -> Any:
        block = self._block
        if self._anchor == len(block.instructions):
            a = id(lhs) if type(lhs) in _BY_ID else _vk(lhs)
            b = id(rhs) if type(rhs) in _BY_ID else _vk(rhs)
            if a is not _NO and b is not _NO:
                return _reuse(self, (id(block), method, cmpop, a, b), make, cmpop, lhs, rhs, name=name)
        return make(self, cmpop, lhs, rhs, name=name)

    return _named(emit, make)


def _select() -> Callable[..., Any]:
    make = ir.IRBuilder.select

    def emit(self: CseBuilder, cond: ir.Value, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> Any:
        block = self._block
        if self._anchor == len(block.instructions) and not flags:
            c, a, b = _vk(cond), _vk(lhs), _vk(rhs)
            if c is not _NO and a is not _NO and b is not _NO:
                return _reuse(self, (id(block), "select", c, a, b), make, cond, lhs, rhs, name=name)
        return make(self, cond, lhs, rhs, name=name, flags=flags)

    return _named(emit, make)


def _cast(method: str) -> Callable[..., Any]:
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, value: ir.Value, typ: ir.Type, name: str = "") -> Any:
        block = self._block
        if self._anchor == len(block.instructions):
            a = _vk(value)
            if a is not _NO:
                return _reuse(self, (id(block), method, a, typ), make, value, typ, name=name)
        return make(self, value, typ, name=name)

    return _named(emit, make)


def _named(emit: Callable[..., Any], make: Callable[..., Any]) -> Callable[..., Any]:
    emit.__name__ = make.__name__
    emit.__doc__ = make.__doc__
    return emit


class CseRecord:
    """What the CseBuilders of one function share: the first instance of each keyed instruction
    and the repeats handed out of it."""

    def __init__(self) -> None:
        self.seen: dict[Any, ir.Instruction] = {}  # (block id, method, arguments' keys) -> first instance
        self.repeats: dict[int, tuple[ir.Instruction, list[Repeat]]] = {}  # by the first instance's id
        self.order: list[Repeat] = []

    def settle(self, fn: ir.Function) -> None:
        """Place each repeated instruction as EarlyCSE would leave it (module doc): where it is if
        anything uses it, else at its first repeat that is used (and where it is if none is)."""
        if not self.repeats:
            return
        used = {id(op) for block in fn.blocks for inst in block.instructions for op in inst.operands}
        for block in fn.blocks:
            for inst in block.instructions:  # a block's phis lead it
                if not isinstance(inst, ir.PhiInstr):
                    break
                used.update(id(v) for v, _ in inst.incomings)
        # a repeat stands for an instruction that uses its operands (its arguments are values, a
        # compare's predicate and a cast's type: ids that no instruction has)
        used.update(map(id, chain.from_iterable([rep.args for rep in self.order])))
        moves: dict[int, tuple[ir.Block, list[Repeat]]] = {}
        for first, reps in self.repeats.values():
            if id(first) in used:
                continue
            for rep in reps:
                if id(rep) in used:
                    if rep.after is not first:
                        moves.setdefault(id(first.parent), (first.parent, []))[1].append(rep)
                    break
        for block, moved in moves.values():
            gone = {id(rep.of) for rep in moved}
            at: dict[int, list[ir.Instruction]] = {}
            for rep in sorted(moved, key=lambda r: r.seq):
                at.setdefault(id(rep.after), []).append(rep.of)
            order = list(at.get(id(None), []))
            for inst in block.instructions:
                if id(inst) not in gone:
                    order.append(inst)
                order += at.get(id(inst), [])
            block.instructions[:] = order


class CseBuilder(ir.IRBuilder):
    """ir.IRBuilder that hands out the block's earlier identical pure instruction (module doc).
    `record`: shared by the builders of one function; `record.settle(fn)` once it is complete."""

    def __init__(self, block: ir.Block | None, record: CseRecord) -> None:
        super().__init__(block)
        self.record = record


# the instructions that repeat in practice (a shared one costs a lookup at every call, each repeat
# saves making, printing and parsing an instruction): GEPs, shifts left, xor, sub and divisions
# seldom do
for _m in ("add", "mul", "srem", "and_", "or_", "lshr"):
    setattr(CseBuilder, _m, _binop(_m))
for _m in ("icmp_signed", "icmp_unsigned"):
    setattr(CseBuilder, _m, _icmp(_m))
for _m in ("sext", "zext"):
    setattr(CseBuilder, _m, _cast(_m))
CseBuilder.select = _select()  # type: ignore[method-assign]
