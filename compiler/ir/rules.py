"""The building blocks of the op table (ops.py): attribute kinds, operands, result-type rules and
operand checks.

A result rule has a short name (what the table says, what docs and error messages print) and a
check that returns what is wrong with an op's results, or None. Operand checks have the same form.
Neither raises: the verifier turns the message into an error located at the op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from .core import Block, Op
from .types import PointerType, ScalarType, TileType, Type, elem_of, i1, i32, shape_of, with_elem

__all__ = [
    "AttrKind", "ATTR_KINDS", "Attr", "Operand", "Rule", "Check",
    "same_as", "bool_of", "given", "none", "fixed", "pointee_of", "loop_carried", "same_as_operands",
    "reduced", "splat_of", "broadcast_of", "expand_dims_of", "reshape_of", "trans_of", "join_of",
    "split_of", "cat_of", "gather_of", "constant_of", "range_of", "bins", "math_result", "cast_of", "bitcast_of",
    "same_types", "int_offsets", "pointer_first", "bool_first", "scalar_ints", "slot_and_tile",
    "other_is_result", "pointee_typed", "pred_and_slot", "combine_region", "loop_body", "branches",
    "while_regions",
]


# ---------------------------------------------------------------------------------- attributes
@dataclass(frozen=True)
class AttrKind:
    """A kind of attribute value: its name in messages and the test a value must pass."""

    name: str
    accepts: Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v: Any) -> bool:
    return isinstance(v, tuple) and all(_int(x) for x in v)


def _hints(v: Any) -> bool:
    return isinstance(v, tuple) and all(
        isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and _ints(h[1]) for h in v)


ATTR_KINDS: dict[str, AttrKind] = {
    "int": AttrKind("int", _int),
    "bool": AttrKind("bool", lambda v: isinstance(v, bool)),
    "str": AttrKind("str", lambda v: isinstance(v, str)),
    "number": AttrKind("int, float or bool", lambda v: isinstance(v, (int, float))),
    "ints": AttrKind("tuple of ints", _ints),
    "hints": AttrKind("tuple of (name, tuple of ints) pairs", _hints),
}


@dataclass(frozen=True)
class Attr:
    """An attribute: `kind` is a key of ATTR_KINDS; an optional one may be absent or None (then it
    means `default`); `choices`, when given, lists the values allowed."""

    name: str
    kind: str
    required: bool = True
    default: Any = None
    choices: tuple[Any, ...] = ()
    doc: str = ""


@dataclass(frozen=True)
class Operand:
    """An operand slot. `when`: present only if that boolean attribute is true; `optional`: may be
    left off the end; `variadic`: zero or more (the last slot only)."""

    name: str
    when: str = ""
    optional: bool = False
    variadic: bool = False


# ---------------------------------------------------------------------------------- rules
Check = Callable[[Op], str | None]


@dataclass(frozen=True)
class Rule:
    """A named check on an op: `name` says the rule in words."""

    name: str
    check: Check


def _expect(name: str, types: Callable[[Op], Sequence[Type] | None]) -> Rule:
    """A rule giving the exact result types (None: the operands are too malformed to say)."""

    def check(op: Op) -> str | None:
        want = types(op)
        if want is None:
            return None
        got = [r.type for r in op.results]
        if len(got) != len(want):
            return f"expected {len(want)} result(s) ({name}), got {len(got)}"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            if g != w:
                return f"result {k} has type {g}, expected {w} ({name})"
        return None

    return Rule(name, check)


def _one(op: Op) -> Type | None:
    """The type of the op's single result, or None if it has not exactly one."""
    return op.results[0].type if len(op.results) == 1 else None


def _shaped(name: str, fits: Callable[[Op, Type], str | None]) -> Rule:
    """A rule on a single result: `fits(op, result type)` says what is wrong, or None."""

    def check(op: Op) -> str | None:
        t = _one(op)
        if t is None:
            return f"expected 1 result ({name}), got {len(op.results)}"
        why = fits(op, t)
        return None if why is None else f"result type {t}: {why} ({name})"

    return Rule(name, check)


def _operand(op: Op, k: int) -> Type | None:
    return op.operands[k].type if k < len(op.operands) else None


def same_as(k: int) -> Rule:
    return _expect(f"same as operand {k}", lambda op: None if _operand(op, k) is None else [op.operands[k].type])


def bool_of(k: int) -> Rule:
    return _expect(f"i1 of the shape of operand {k}",
                   lambda op: None if _operand(op, k) is None else [with_elem(op.operands[k].type, i1)])


def pointee_of(k: int) -> Rule:
    """What the pointer (tile) operand `k` points to, in its shape."""

    def types(op: Op) -> list[Type] | None:
        t = _operand(op, k)
        e = elem_of(t) if t is not None else None
        return [with_elem(t, e.elem)] if t is not None and isinstance(e, PointerType) else None

    return _expect(f"the pointee of operand {k}, in its shape", types)


def fixed(t: Type) -> Rule:
    return _expect(str(t), lambda op: [t])


def given(what: str = "given by the op") -> Rule:
    """Types the op states and nothing constrains here (checked by the op's own check, if any)."""
    return Rule(what, lambda op: None)


def none() -> Rule:
    return _expect("no results", lambda op: [])


def same_as_operands() -> Rule:
    return _expect("the types of the operands", lambda op: [v.type for v in op.operands])


def loop_carried(first: int) -> Rule:
    return _expect(f"the types of operands {first}..", lambda op: [v.type for v in op.operands[first:]])


def _reduced(op: Op) -> list[Type] | None:
    axis = op.attrs.get("axis")
    out: list[Type] = []
    for v in op.operands:
        s, e = shape_of(v.type), elem_of(v.type)
        if not isinstance(axis, int) or not 0 <= axis < len(s):
            return None
        rest = s[:axis] + s[axis + 1:]
        out.append(TileType(rest, e) if rest else e)
    return out


def reduced() -> Rule:
    return _expect("each operand without dimension `axis`", _reduced)


def splat_of() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        src = _operand(op, 0)
        if src is None or isinstance(src, TileType):
            return None
        return None if isinstance(t, TileType) and t.elem == src else f"not a tile of {src}"

    return _shaped("a tile of operand 0", fits)


def broadcast_of() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        src = _operand(op, 0)
        if src is None:
            return None
        s, r = shape_of(src), shape_of(t)
        if not isinstance(t, TileType) or elem_of(t) != elem_of(src):
            return f"not a tile of {elem_of(src)}"
        if len(r) != len(s) or any(a != b and a != 1 for a, b in zip(s, r, strict=True)):
            return f"{list(s)} does not broadcast to {list(r)}"
        return None

    return _shaped("operand 0 broadcast (dims of 1 widened)", fits)


def expand_dims_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        src, axis = _operand(op, 0), op.attrs.get("axis")
        if src is None or not isinstance(axis, int) or not 0 <= axis <= len(shape_of(src)):
            return None
        s = shape_of(src)
        return [TileType((*s[:axis], 1, *s[axis:]), elem_of(src))]

    return _expect("operand 0 with a dimension of 1 at `axis`", types)


def reshape_of() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        src = _operand(op, 0)
        if src is None:
            return None
        if elem_of(t) != elem_of(src) or prod(shape_of(t)) != prod(shape_of(src)):
            return f"not {prod(shape_of(src))} elements of {elem_of(src)}"
        return None

    return _shaped("operand 0's elements in another shape", fits)


def trans_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        src, perm = _operand(op, 0), op.attrs.get("perm")
        s = shape_of(src) if src is not None else ()
        if src is None or not isinstance(perm, tuple) or sorted(perm) != list(range(len(s))):
            return None
        return [TileType(tuple(s[p] for p in perm), elem_of(src))]

    return _expect("operand 0 with its dimensions permuted by `perm`", types)


def join_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        a = _operand(op, 0)
        return None if a is None else [TileType((*shape_of(a), 2), elem_of(a))]

    return _expect("operand 0's shape with a last dimension of 2", types)


def split_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        a = _operand(op, 0)
        s = shape_of(a) if a is not None else ()
        if a is None or not s or s[-1] != 2:
            return None
        half = TileType(s[:-1], elem_of(a)) if len(s) > 1 else elem_of(a)
        return [half, half]

    return _expect("two halves of operand 0 along its last dimension (of 2)", types)


def cat_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        a, b = _operand(op, 0), _operand(op, 1)
        if a is None or b is None or not shape_of(a) or not shape_of(b):
            return None
        sa, sb = shape_of(a), shape_of(b)
        return [TileType((sa[0] + sb[0], *sa[1:]), elem_of(a))]

    return _expect("operands 0 and 1 end to end along dimension 0", types)


def gather_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        src, idx = _operand(op, 0), _operand(op, 1)
        return None if src is None or idx is None else [TileType(shape_of(idx), elem_of(src))]

    return _expect("operand 0's element type in operand 1's shape", types)


def constant_of() -> Rule:
    """A scalar of the value's kind: a float for a float type, an int (or bool) for an integer."""

    def fits(op: Op, t: Type) -> str | None:
        v = op.attrs.get("value")
        if not isinstance(t, ScalarType):
            return "not a scalar"
        if isinstance(v, float) != t.is_float:
            return f"does not hold the value {v!r}"
        return None

    return _shaped("a scalar of the value's kind", fits)


def range_of() -> Rule:
    def types(op: Op) -> list[Type] | None:
        start, end = op.attrs.get("start"), op.attrs.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or end <= start:
            return None
        return [TileType((end - start,), i32)]

    return _expect("tile<(end - start) x i32>", types)


def bins() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        return None if isinstance(t, TileType) and len(t.shape) == 1 and t.elem == i32 else "not a 1-D i32 tile"

    return _shaped("a 1-D i32 tile of the bins", fits)


def math_result(results: Callable[[str], ScalarType | None]) -> Rule:
    """Operand 0's shape; its element type, or the fixed type `results(fn)` gives."""

    def types(op: Op) -> list[Type] | None:
        a, fn = _operand(op, 0), op.attrs.get("fn")
        if a is None or not isinstance(fn, str):
            return None
        r = results(fn)
        return [a if r is None else with_elem(a, r)]

    return _expect("operand 0's shape; its element type unless the function fixes one", types)


def cast_of() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        src = _operand(op, 0)
        return None if src is None or shape_of(t) == shape_of(src) else f"shape differs from {src}"

    return _shaped("operand 0's shape, another element type", fits)


def _bits(e: Any) -> int:
    return 64 if isinstance(e, PointerType) else int(e.bits)


def bitcast_of() -> Rule:
    def fits(op: Op, t: Type) -> str | None:
        src = _operand(op, 0)
        if src is None:
            return None
        if shape_of(t) != shape_of(src) or _bits(elem_of(t)) != _bits(elem_of(src)):
            return f"not {src}'s shape and element width"
        return None

    return _shaped("operand 0's shape and element width", fits)


# ---------------------------------------------------------------------------------- operand checks
def same_types(*ks: int) -> Check:
    """Operands `ks` have one type."""

    def check(op: Op) -> str | None:
        ts = [op.operands[k].type for k in ks if k < len(op.operands)]
        return None if all(t == ts[0] for t in ts) else f"operand types differ: {', '.join(map(str, ts))}"

    return check


def pointer_first(op: Op) -> str | None:
    """Operand 0 is a pointer (tile); a mask operand (has_mask) is i1 of its shape."""
    p = op.operands[0].type
    if not isinstance(elem_of(p), PointerType):
        return f"operand 0 is not a pointer: {p}"
    if op.attrs.get("has_mask"):
        k = 2 if op.opcode in ("store", "atomic_rmw") else 1
        if k < len(op.operands) and op.operands[k].type != with_elem(p, i1):
            return f"mask type {op.operands[k].type} != {with_elem(p, i1)}"
    return None


def int_offsets(op: Op) -> str | None:
    """addptr: a pointer (tile) plus integer offsets of the same shape."""
    p, o = op.operands[0].type, op.operands[1].type
    if not isinstance(elem_of(p), PointerType):
        return f"base is not a pointer: {p}"
    oe = elem_of(o)
    if not (isinstance(oe, ScalarType) and oe.is_int) or shape_of(o) != shape_of(p):
        return f"offset {o} does not match {p}"
    return None


def bool_first(op: Op) -> str | None:
    """select: operand 0 is i1 in the shape of the values it chooses between."""
    c, a = op.operands[0].type, op.operands[1].type
    if elem_of(c) != i1 or shape_of(c) != shape_of(a):
        return f"condition {c} does not match {a}"
    return None


def scalar_ints(*ks: int) -> Check:
    """Operands `ks` are scalar integers."""

    def check(op: Op) -> str | None:
        for k in ks:
            t = op.operands[k].type if k < len(op.operands) else None
            if t is not None and not (isinstance(t, ScalarType) and t.is_int):
                return f"operand {k} must be a scalar integer, got {t}"
        return None

    return check


def slot_and_tile(op: Op) -> str | None:
    """async_wait: a scalar slot index in, a tile out."""
    if not isinstance(op.operands[0].type, ScalarType) or not all(isinstance(r.type, TileType) for r in op.results):
        return f"slot {op.operands[0].type} -> {', '.join(str(r.type) for r in op.results)}: " \
               "expects a scalar slot and a tile result"
    return None


def other_is_result(op: Op) -> str | None:
    """load: the `other` operand (has_other) has the result's type."""
    if op.attrs.get("has_other") and op.results and op.operands[-1].type != op.results[0].type:
        return f"other type {op.operands[-1].type} != result type {op.results[0].type}"
    return None


def pointee_typed(*ks: int) -> Check:
    """Operands `ks` are what pointer operand 0 points to, in its shape."""

    def check(op: Op) -> str | None:
        p = op.operands[0].type
        e = elem_of(p)
        if not isinstance(e, PointerType):
            return None
        want = with_elem(p, e.elem)
        for k in ks:
            if k < len(op.operands) and op.operands[k].type != want:
                return f"operand {k} has type {op.operands[k].type}, expected {want} (the pointee of operand 0)"
        return None

    return check


def pred_and_slot(op: Op) -> str | None:
    """async_copy: a pointer tile, then (after the mask) an i1 predicate and a scalar slot index."""
    if not isinstance(op.operands[0].type, TileType):
        return f"source is not a pointer tile: {op.operands[0].type}"
    if len(op.operands) >= 2:
        pred, slot = op.operands[-2].type, op.operands[-1].type
        if pred != i1 or not isinstance(slot, ScalarType):
            return f"expects a predicate (i1) and a slot index after the pointers and mask, got {pred}, {slot}"
    return None


def _yields(block: Block, types: list[Any], what: str, terminator: str = "yield") -> str | None:
    term = block.ops[-1] if block.ops else None
    if term is None or term.opcode != terminator:
        return f"{what} does not end with {terminator}"
    got = [v.type for v in (term.operands[1:] if terminator == "condition" else term.operands)]
    if got != types:
        return f"{what} yields {got}, expected {types}"
    return None


def _arg_types(block: Block) -> list[Type]:
    return [a.type for a in block.args]


def combine_region(op: Op) -> str | None:
    """reduce, scan: the combine region takes two elements per operand and yields one per operand."""
    if len(op.regions) != 1:
        return None
    k, region = len(op.operands), op.regions[0]
    elems = [elem_of(v.type) for v in op.operands]
    if _arg_types(region) != elems + elems:
        return f"combine region takes {_arg_types(region)}, expected {elems + elems}"
    return _yields(region, elems, "combine region") if k else "expects at least one operand"


def loop_body(op: Op) -> str | None:
    """for: the body takes the induction variable (the bounds' type) and the carried values and
    yields the carried values."""
    if len(op.regions) != 1 or len(op.operands) < 3:
        return None
    body, inits = op.regions[0], [v.type for v in op.operands[3:]]
    args = _arg_types(body)
    if not args or args[0] != op.operands[0].type:
        return f"body's first argument (the induction variable) must have the bounds' type {op.operands[0].type}"
    if args[1:] != inits:
        return "loop-carried argument types differ from the initial values"
    return _yields(body, inits, "body")


def branches(op: Op) -> str | None:
    """if: an i1 condition; both regions yield the result types."""
    if op.operands and op.operands[0].type != i1:
        return f"condition must be i1, got {op.operands[0].type}"
    results = [r.type for r in op.results]
    for k, r in enumerate(op.regions):
        if r.args:
            return f"region {k} takes arguments"
        why = _yields(r, results, f"region {k}")
        if why:
            return why
    return None


def while_regions(op: Op) -> str | None:
    """while: the first region takes the carried values and ends with a condition (an i1, then the
    values forwarded: the after region's arguments and the results); the second yields the carried
    values for the next test."""
    if len(op.regions) != 2:
        return None
    before, after = op.regions
    inits, results = [v.type for v in op.operands], [r.type for r in op.results]
    if _arg_types(before) != inits:
        return f"first region takes {_arg_types(before)}, expected the carried types {inits}"
    why = _yields(before, results, "first region", "condition")
    if why:
        return why
    cond = before.ops[-1].operands[0].type if before.ops[-1].operands else None
    if cond != i1:
        return f"condition must be i1, got {cond}"
    if _arg_types(after) != results:
        return f"second region takes {_arg_types(after)}, expected the forwarded types {results}"
    return _yields(after, inits, "second region")
