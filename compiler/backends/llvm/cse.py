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


def _value_key(v: ir.Value) -> Any:
    if isinstance(v, ir.Constant):
        c = v.constant
        if type(c) is int or type(c) is bool:
            return (v.type, type(c), c)
        if type(c) is float and c == c:  # -0.0 and 0.0 differ by their hex form; NaNs are not shared
            return (v.type, c.hex())
        return _NO
    if isinstance(v, (ir.Instruction, ir.Argument, ir.GlobalValue)):
        return id(v)  # alive as long as the module: ids are not reused
    return _NO  # constant expressions are new objects at each use


def _arg_key(a: Any) -> Any:
    if isinstance(a, ir.Value):
        return _value_key(a)
    if isinstance(a, (list, tuple)):
        parts = tuple(_arg_key(x) for x in a)
        return _NO if any(p is _NO for p in parts) else parts
    if a is None or isinstance(a, (str, int, ir.Type)):
        return a
    return _NO


def _shared(method: str) -> Callable[..., Any]:
    make = getattr(ir.IRBuilder, method)

    def emit(self: CseBuilder, *args: Any, name: str = "", **kwargs: Any) -> Any:
        block = self._block
        if self._anchor != len(block.instructions):
            return make(self, *args, name=name, **kwargs)
        key = _arg_key((method, args, tuple(sorted(kwargs.items()))))
        if key is _NO:
            return make(self, *args, name=name, **kwargs)
        seen = self.emitted.setdefault(id(block), {})
        earlier = seen.get(key)
        if earlier is None:
            earlier = seen[key] = []
        used = self.used
        for inst in earlier:
            if id(inst) in used:
                return inst
        inst = make(self, *args, name=name, **kwargs)
        earlier.append(inst)
        return inst

    emit.__name__ = method
    emit.__doc__ = make.__doc__
    return emit


_SHARED = ("add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "and_", "or_", "xor", "shl", "lshr", "ashr",
           "icmp_signed", "icmp_unsigned", "select", "sext", "zext", "trunc", "bitcast", "ptrtoint", "inttoptr",
           "gep", "extract_value", "extract_element", "insert_element")


class CseBuilder(ir.IRBuilder):
    """ir.IRBuilder that returns the block's earlier identical pure instruction once it has a
    user (module doc). `used`: the ids of the instructions used so far, shared by the builders of
    one function."""

    def __init__(self, block: ir.Block | None, used: set[int]) -> None:
        super().__init__(block)
        self.used = used
        self.emitted: dict[int, dict[Any, list[ir.Instruction]]] = {}

    def _insert(self, instr: ir.Instruction) -> None:
        super()._insert(instr)
        add = self.used.add
        for op in instr.operands:
            add(id(op))


for _m in _SHARED:
    setattr(CseBuilder, _m, _shared(_m))
