"""An IRBuilder that emits each pure integer / pointer instruction once per basic block.

The lowering computes a tile's per-register index arithmetic one register at a time, and the same
expression recurs: a layout's hardware coordinates, a divisor's zero and overflow guards, an
offset added to every row. Half of the instructions of a tensor-core kernel's LLVM IR were exact
repeats of an earlier one in the same block, which LLVM's first EarlyCSE then deleted. `CseBuilder`
hands back the earlier instruction instead of creating the repeat, so the IR is built, printed and
parsed at about half the size, and LLVM's pipeline is left with what its EarlyCSE would have left:
the generated code is the same (scripts/ptx_fingerprint.py checks it).

EarlyCSE walks a block in order, deletes an instruction nothing uses, and replaces a repeat of an
earlier surviving instruction by it; so the survivor of a set of repeats is the first one that has
a user. The builder follows that: it reuses an earlier instance only once something has used it
(every instruction it inserts marks its operands used, in a set its builders share); before that,
it emits the repeat (a user that it does not see, such as a phi's incoming value, only costs a
repeat that LLVM then removes as before).

Only instructions without side effects or flags set after creation are shared (integer and
pointer arithmetic, comparisons, selects, casts, GEPs, aggregate and vector element access), only
within one block and only while the builder appends at the block's end. Floating-point arithmetic
is never shared: the lowering adds fast-math flags to an instruction after the builder made it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

__all__ = ["CseBuilder"]

_NO = object()  # an argument the cache cannot key on: the call is not shared
_BY_ID, _CONSTANT, _PLAIN, _SEQUENCE = range(4)
_KINDS: dict[type, int | None] = {}  # how an argument of each Python type is keyed


def _kind(t: type) -> int | None:
    if issubclass(t, (ir.Instruction, ir.Argument, ir.GlobalValue)):
        k: int | None = _BY_ID  # alive as long as the module: ids are not reused
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
    """The earlier instruction under `key` that has a user, else a new one (`make(self, *args, **kwargs)`)."""
    earlier = self.seen.get(key)
    if earlier is None:
        earlier = self.seen[key] = []
    else:
        used = self.used
        for inst in earlier:
            if id(inst) in used:
                return inst
    inst = make(self, *args, **kwargs)
    earlier.append(inst)
    return inst


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


class CseBuilder(ir.IRBuilder):
    """ir.IRBuilder that returns the block's earlier identical pure instruction once it has a
    user (module doc). `used`: the ids of the instructions used so far, shared by the builders of
    one function."""

    def __init__(self, block: ir.Block | None, used: set[int]) -> None:
        super().__init__(block)
        self.used = used
        self.seen: dict[Any, list[ir.Instruction]] = {}  # (block id, method, arguments' keys) -> instances

    def _insert(self, instr: ir.Instruction) -> None:
        super()._insert(instr)
        self.used.update(map(id, instr.operands))


for _m in _BINOPS:
    setattr(CseBuilder, _m, _shared_binop(_m))
for _m in _SHARED:
    setattr(CseBuilder, _m, _shared(_m))
