"""The stable text form of Tile IR (golden tests, error messages, what agents read)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import Block, Function, Op, Value

__all__ = ["print_function"]

# per value, a note printed after its type (a backend's layout), or None
Annotate = Callable[[Value], str | None]


class _Namer:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0

    def name(self, v: Value) -> str:
        key = id(v)
        if key not in self.names:
            base = v.name if v.name and v.name.isidentifier() else ""
            if base and base not in self.used:
                n = base
            else:
                n = str(self.counter)
                self.counter += 1
            self.used.add(n)
            self.names[key] = "%" + n
        return self.names[key]


def _attr(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    return str(v)


def _typed(v: Value, note: Annotate | None) -> str:
    extra = note(v) if note is not None else None
    return f"{v.type} {extra}" if extra else str(v.type)


def _op(op: Op, namer: _Namer, indent: str, out: list[str], note: Annotate | None) -> None:
    res = ", ".join(namer.name(r) for r in op.results)
    lhs = f"{res} = " if res else ""
    attrs = {k: v for k, v in op.attrs.items() if v is not None}
    attr_s = " {" + ", ".join(f"{k}={_attr(v)}" for k, v in sorted(attrs.items())) + "}" if attrs else ""
    operands = ", ".join(namer.name(o) for o in op.operands)
    types = ", ".join(_typed(r, note) for r in op.results)
    tail = f" : {types}" if types else ""
    body = " ".join(x for x in (op.opcode, operands) if x)
    line = f"{indent}{lhs}{body}{attr_s}".rstrip()
    if not op.regions:
        out.append(line + tail)
        return
    out.append(line + " {")
    for i, r in enumerate(op.regions):
        if i:
            out.append(f"{indent}}} {{")
        _block(r, namer, indent + "  ", out, note)
    out.append(f"{indent}}}{tail}")


def _block(b: Block, namer: _Namer, indent: str, out: list[str], note: Annotate | None) -> None:
    if b.args:
        out.append(indent[:-2] + "^(" + ", ".join(f"{namer.name(a)}: {_typed(a, note)}" for a in b.args) + "):")
    for op in b.ops:
        _op(op, namer, indent, out, note)


def print_function(fn: Function, note: Annotate | None = None) -> str:
    """`fn` as text; `note(v)`, where given, is printed after the type of each value it names."""
    namer = _Namer()
    args = []
    for a, attrs in zip(fn.args, fn.arg_attrs, strict=True):
        extra = " {" + ", ".join(f"{k}={v}" for k, v in sorted(attrs.items())) + "}" if attrs else ""
        args.append(f"{namer.name(a)}: {a.type}{extra}")
    out = [f"func @{fn.name}({', '.join(args)}) {{"]
    for op in fn.body.ops:
        _op(op, namer, "  ", out, note)
    out.append("}")
    return "\n".join(out) + "\n"
