"""The source of a kernel function: its parsed AST, lines, globals and parameters."""

from __future__ import annotations

import ast
import hashlib
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnsupportedError
from ..ir.core import Location

__all__ = ["FunctionSource", "parse_function", "is_constexpr_annotation"]


@dataclass(eq=False)
class FunctionSource:
    """A parsed kernel function. `globals` resolves free names (never executed for source text)."""

    name: str
    filename: str
    first_line: int
    lines: list[str]
    tree: ast.FunctionDef
    indent: int
    globals: Mapping[str, Any]
    text: str
    params: list[str] = field(default_factory=list)
    defaults: dict[str, ast.expr] = field(default_factory=dict)
    annotations: dict[str, ast.expr] = field(default_factory=dict)

    def loc(self, node: ast.AST, inlined_at: Location | None = None) -> Location:
        line = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0)
        return Location(self.filename, self.first_line + line - 1, col + self.indent + 1, self.name, inlined_at)

    def source_line(self, loc: Location) -> str:
        i = loc.line - self.first_line
        return self.lines[i] if 0 <= i < len(self.lines) else ""

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def parse_function(text: str, filename: str, first_line: int, globals: Mapping[str, Any],
                   name: str | None = None) -> FunctionSource:
    """Parse the text of one function definition (decorators allowed; never executed)."""
    lines = text.splitlines()
    dedented = textwrap.dedent(text)
    indent = 0
    for orig in lines:
        if orig.strip():
            indent = len(orig) - len(orig.lstrip())
            break
    tree = ast.parse(dedented)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name is not None:
        fns = [f for f in fns if f.name == name]
    if not fns:
        raise UnsupportedError(f"no function definition{f' named {name!r}' if name else ''} in the source",
                               Location(filename, first_line, 1))
    fdef = fns[0]
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise UnsupportedError("kernels take plain positional parameters only (no *args, **kwargs, "
                               "keyword-only or positional-only parameters)",
                               Location(filename, first_line + fdef.lineno - 1, fdef.col_offset + 1),
                               lines[fdef.lineno - 1] if fdef.lineno - 1 < len(lines) else "")
    params = [p.arg for p in a.args]
    defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults, strict=True))
    annotations = {p.arg: p.annotation for p in a.args if p.annotation is not None}
    return FunctionSource(fdef.name, filename, first_line, lines, fdef, indent, globals, text, params,
                          defaults, annotations)


def is_constexpr_annotation(node: ast.expr, globals: Mapping[str, Any]) -> bool:
    """True if an annotation names `constexpr` (ours, Triton's, or as a string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1] == "constexpr"
    if isinstance(node, ast.Attribute):
        return node.attr == "constexpr"
    if isinstance(node, ast.Name):
        if node.id == "constexpr":
            return True
        obj = globals.get(node.id)
        return getattr(obj, "__name__", "") == "constexpr"
    return False
