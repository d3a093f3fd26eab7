"""Kernels from source text: a module's functions and constants, read without executing it."""

from __future__ import annotations

import ast
import importlib
import math
from typing import Any

from .. import errors as E
from ..ir.core import Location

__all__ = ["load_text_module", "MODULE_MAP"]

# What imports in kernel source text resolve to (everything else stays undefined).
MODULE_MAP = {
    "triton": "compiler.triton_compat",
    "triton.language": "compiler.language",
    "triton.language.math": "compiler.language.math",
    "triton.language.extra": "compiler.language.extra",
    "triton.language.extra.libdevice": "compiler.language.extra.libdevice",
    "triton.language.extra.cuda": "compiler.language.extra.cuda",
    "triton.language.extra.cuda.libdevice": "compiler.language.extra.libdevice",
    "compiler": "compiler",
    "compiler.language": "compiler.language",
    "compiler.language.math": "compiler.language.math",
    "compiler.language.extra": "compiler.language.extra",
    "compiler.language.extra.libdevice": "compiler.language.extra.libdevice",
    "math": "math",
}
_JIT_NAMES = {"jit", "triton.jit", "compiler.jit", "tl.jit"}


def _module(name: str) -> Any:
    target = MODULE_MAP.get(name)
    return importlib.import_module(target) if target else None


def _decorator_name(d: ast.expr) -> str:
    if isinstance(d, ast.Call):
        d = d.func
    parts = []
    while isinstance(d, ast.Attribute):
        parts.append(d.attr)
        d = d.value
    if isinstance(d, ast.Name):
        parts.append(d.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr, ns: dict[str, Any]) -> Any:
    """A module-level constant: a literal, a constexpr(literal), or arithmetic on known constants."""
    if isinstance(node, ast.Call) and _decorator_name(node.func).split(".")[-1] == "constexpr" and node.args:
        return _literal(node.args[0], ns)
    if isinstance(node, ast.Name) and node.id in ns and isinstance(ns[node.id], (int, float, bool, str)):
        return ns[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        base = ns.get(node.value.id)
        if base is math:
            return getattr(math, node.attr)
        if base is not None and getattr(base, "__name__", "").startswith("compiler.language"):
            return getattr(base, node.attr)
    if isinstance(node, ast.BinOp):
        import operator as op

        ops = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.FloorDiv: op.floordiv,
               ast.Div: op.truediv, ast.Pow: op.pow, ast.LShift: op.lshift, ast.Mod: op.mod}
        f = ops.get(type(node.op))
        if f is not None:
            return f(_literal(node.left, ns), _literal(node.right, ns))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand, ns)
    return ast.literal_eval(node)


def load_text_module(text: str, filename: str) -> dict[str, Any]:
    """Parse `text` and return its @jit functions by name (each sees the module's names)."""
    from ..runtime.jit import JITFunction, register_source_lines

    try:
        tree = ast.parse(text, filename)
    except SyntaxError as e:
        loc = Location(filename, e.lineno or 0, e.offset or 0)
        raise E.CompilationError(f"syntax error: {e.msg}", loc, e.text or "",
                                 "the kernel source must be valid Python") from None
    register_source_lines(filename, text)
    lines = text.splitlines()
    ns: dict[str, Any] = {}
    funcs: dict[str, JITFunction] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                mod = _module(a.name)
                if a.asname:
                    if mod is not None:
                        ns[a.asname] = mod
                else:
                    top = _module(a.name.split(".")[0])
                    if top is not None:
                        ns[a.name.split(".")[0]] = top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                sub = _module(f"{node.module}.{a.name}")
                if sub is not None:
                    ns[a.asname or a.name] = sub
                    continue
                mod = _module(node.module)
                if mod is not None and hasattr(mod, a.name):
                    ns[a.asname or a.name] = getattr(mod, a.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                continue
            try:
                value = _literal(node.value, ns)
            except (ValueError, TypeError, SyntaxError, KeyError, AttributeError, ZeroDivisionError):
                continue  # not a constant: left undefined, so a kernel using it gets a clear error
            for t in targets:
                if isinstance(t, ast.Name):
                    ns[t.id] = value
        elif isinstance(node, ast.FunctionDef):
            if not any(_decorator_name(d) in _JIT_NAMES or _decorator_name(d).endswith(".jit")
                       for d in node.decorator_list):
                continue
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            end = node.end_lineno or node.lineno
            seg = "\n".join(lines[start - 1:end]) + "\n"
            fn = JITFunction(text=seg, name=node.name, filename=filename, first_line=start, globals=ns)
            ns[node.name] = fn
            funcs[node.name] = fn
    return funcs
