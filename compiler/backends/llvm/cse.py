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

Only instructions without side effects or flags set after creation are shared (integer and
pointer arithmetic, comparisons, selects, casts, GEPs, aggregate and vector element access), only
within one block and only while the builder appends at the block's end. Floating-point arithmetic
is never shared: the lowering adds fast-math flags to an instruction after the builder made it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

__all__ = ["CseBuilder", "CseRecord", "Repeat"]

_NO = object()  # an argument the cache cannot key on: the call is not shared
_BY_ID, _CONSTANT, _PLAIN, _SEQUENCE, _REPEAT = range(5)
_KINDS: dict[type, int | None] = {}  # how an argument of each Python type is keyed


def _kind(t: type) -> int | None:
    if issubclass(t, (ir.Instruction, ir.Argument, ir.GlobalValue)):
        k: int | None = _BY_ID  # alive as long as the module: ids are not reused
    elif t is Repeat:
        k = _REPEAT  # keyed as the instruction it repeats (what EarlyCSE replaces it by)
    elif issubclass(t, ir.Constant):
        k = _CONSTANT
    elif issubclass(t, (list, tuple)):
        k = _SEQUENCE
    elif t is type(None) or issubclass(t, (str, int, ir.Type)):
        k = _PLAIN
    else:  # constant expressions (new objects at each use) and anything else
        k = None
    _KINDS[t] = k
    return k


def _key(a: Any) -> Any:
    t = type(a)
    k = _KINDS[t] if t in _KINDS else _kind(t)
    if k == _BY_ID:
        return id(a)
    if k == _PLAIN:
        return a
    if k == _REPEAT:
        return id(a.of)
    if k == _CONSTANT:
        c = a.constant
        if type(c) is int or type(c) is bool:
            return (a.type, type(c), c)
        if type(c) is float and c == c:  # -0.0 and 0.0 differ by their hex form; NaNs are not shared
            return (a.type, c.hex())
        return _NO
    if k == _SEQUENCE:
        parts = tuple([_key(x) for x in a])
        for p in parts:
            if p is _NO:
                return _NO
        return parts
    return _NO


def _reuse(self: CseBuilder, key: Any, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A Repeat of the earlier instruction under `key`, else a new one (`make(self, *args, **kwargs)`)."""
    first = self.record.seen.get(key)
    if first is None:
        first = self.record.seen[key] = make(self, *args, **kwargs)
        return first
    block = self._block
    rep = Repeat(first, block.instructions[-1] if block.instructions else None, len(self.record.order), args)
    self.record.order.append(rep)
    reps = self.record.repeats.get(id(first))
    if reps is None:
        self.record.repeats[id(first)] = (first, [rep])
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


def _shared(method: str) -> Callable[..., Any]:
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, *args: Any, name: str = "", **kwargs: Any) -> Any:
        block = self._block
        if self._anchor != len(block.instructions):
            return make(self, *args, name=name, **kwargs)
        key = _key(args)
        if kwargs and key is not _NO:
            more = _key(tuple(sorted(kwargs.items())))
            key = _NO if more is _NO else (key, more)
        if key is _NO:
            return make(self, *args, name=name, **kwargs)
        return _reuse(self, (id(block), method, key), make, *args, name=name, **kwargs)

    emit.__name__ = method
    emit.__doc__ = make.__doc__
    return emit


def _shared_binop(method: str) -> Callable[..., Any]:
    """`_shared` for a two-operand instruction (the most frequent), with less to key."""
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> Any:
        block = self._block
        if self._anchor == len(block.instructions):
            a = id(lhs) if _KINDS.get(type(lhs)) == _BY_ID else _key(lhs)
            b = id(rhs) if _KINDS.get(type(rhs)) == _BY_ID else _key(rhs)
            if a is not _NO and b is not _NO:
                key = (id(block), method, a, b, tuple(flags)) if flags else (id(block), method, a, b)
                return _reuse(self, key, make, lhs, rhs, name=name, flags=flags)
        return make(self, lhs, rhs, name=name, flags=flags)

    emit.__name__ = method
    emit.__doc__ = make.__doc__
    return emit


_BINOPS = ("add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "and_", "or_", "xor", "shl", "lshr", "ashr")
_SHARED = ("icmp_signed", "icmp_unsigned", "select", "sext", "zext", "trunc", "bitcast", "ptrtoint", "inttoptr",
           "gep", "extract_value", "extract_element", "insert_element")


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
        used: set[int] = set()
        for block in fn.blocks:
            for inst in block.instructions:
                used.update(map(id, inst.operands))
                if isinstance(inst, ir.PhiInstr):
                    used.update(id(v) for v, _ in inst.incomings)
        for rep in self.order:  # a repeat stands for an instruction that uses its operands
            for a in rep.args:
                if isinstance(a, (list, tuple)):
                    used.update(map(id, a))
                else:
                    used.add(id(a))
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


for _m in _BINOPS:
    setattr(CseBuilder, _m, _shared_binop(_m))
for _m in _SHARED:
    setattr(CseBuilder, _m, _shared(_m))
