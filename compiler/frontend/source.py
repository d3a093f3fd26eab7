"""The source of a kernel function: its parsed AST, lines, globals and parameters."""

from __future__ import annotations

import ast
import hashlib
import io
import textwrap
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompilationError, UnsupportedError
from ..ir.core import Location
from .limits import MAX_AST_DEPTH, LimitError, too_deep

__all__ = ["FunctionSource", "parse_function", "is_constexpr_annotation"]


# the key, in a source text module's names, of the names it bound to modules kernels cannot use
# (numpy, torch): not an identifier, so no kernel can name it
UNKNOWN_IMPORTS = "<imports of modules kernels cannot use>"


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
    text_module: bool = False  # source text (compile_source): its globals are read by the strict rule only
    compile_time: bool = False  # a constexpr_function of source text: evaluated at compile time, never emitted

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
    tree = parse_text(dedented, filename, first_line, lines)
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
    for i, p in enumerate(a.args):
        if p.arg in params[:i]:
            raise UnsupportedError(f"parameter {p.arg!r} appears twice in {fdef.name}()",
                                   Location(filename, first_line + p.lineno - 1, p.col_offset + indent + 1),
                                   lines[p.lineno - 1] if p.lineno - 1 < len(lines) else "",
                                   "give every parameter its own name")
    defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults, strict=True))
    annotations = {p.arg: p.annotation for p in a.args if p.annotation is not None}
    return FunctionSource(fdef.name, filename, first_line, lines, fdef, indent, globals, text, params,
                          defaults, annotations)


def parse_text(text: str, filename: str, first_line: int = 1, lines: list[str] | None = None) -> ast.Module:
    """`ast.parse`, with every failure a located error and the tree's nesting bounded."""
    lines = text.splitlines() if lines is None else lines
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as e:
        line = e.lineno or 1
        loc = Location(filename, first_line + line - 1, e.offset or 1)
        raise CompilationError(f"syntax error: {e.msg}", loc, e.text or "",
                               "the kernel source must be valid Python") from None
    except (RecursionError, MemoryError):
        line = _busiest_line(text)
        raise LimitError(f"the source nests too deeply to parse (more than {MAX_AST_DEPTH} levels)",
                         Location(filename, first_line + line - 1, 1), lines[line - 1] if line <= len(lines) else "",
                         "split long expressions into several assignments") from None
    except ValueError as e:
        raise CompilationError(f"the source is not valid Python text ({e})", Location(filename, first_line, 1),
                               hint="send plain UTF-8 Python source") from None
    deep = too_deep(tree)
    if deep is not None:
        line = getattr(deep, "lineno", 1)
        loc = Location(filename, first_line + line - 1, getattr(deep, "col_offset", 0) + 1)
        raise LimitError(f"the source nests more than {MAX_AST_DEPTH} levels deep here", loc,
                         lines[line - 1] if 0 < line <= len(lines) else "",
                         "split long expressions into several assignments")
    return tree


def _busiest_line(text: str) -> int:
    """The line whose logical line has the most tokens (where a parse ran too deep), 1 if unknown."""
    counts: dict[int, int] = {}
    start = 1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL):
                start = tok.end[0] + 1
            else:
                counts[start] = counts.get(start, 0) + 1
    except (tokenize.TokenError, SyntaxError, MemoryError):
        pass
    return max(counts, key=lambda k: counts[k]) if counts else 1


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
