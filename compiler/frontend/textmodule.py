"""Kernels from source text: a module's functions and constants, read without executing it."""

from __future__ import annotations

import ast
import importlib
from typing import Any

from .. import errors as E
from ..ir.core import Location
from ..runtime.function import register_source_lines
from ..runtime.jit import JITFunction
from .closed import LimitError, module_export
from .constants import NotConstant, decorator_name, module_constant
from .source import UNKNOWN_IMPORTS, parse_text

__all__ = ["load_text_module", "compile_source", "MODULE_MAP"]

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
# Decorators of helpers evaluated at compile time: `@triton.constexpr_function` (Triton 3.6) and a
# constexpr wrapped around a def (`@tl.constexpr`). Their bodies are evaluated by the frontend's
# closed-world evaluator (compiletime.py), never executed.
_COMPILE_TIME_NAMES = ("constexpr_function", "constexpr")


def _module(name: str) -> Any:
    target = MODULE_MAP.get(name)
    return importlib.import_module(target) if target else None


def load_text_module(text: str, filename: str) -> dict[str, Any]:
    """Parse `text` and return its @jit functions by name (each sees the module's names)."""

    tree = parse_text(text, filename)
    register_source_lines(filename, text)
    lines = text.splitlines()
    ns: dict[str, Any] = {}
    # names bound to modules kernels cannot use (numpy, torch, ...): a kernel naming one is told so
    unknown: dict[str, str] = {}
    ns[UNKNOWN_IMPORTS] = unknown
    funcs: dict[str, JITFunction] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                mod = _module(a.name)
                if a.asname:
                    if mod is not None:
                        ns[a.asname] = mod
                    else:
                        unknown[a.asname] = a.name
                else:
                    top = _module(a.name.split(".")[0])
                    if top is not None:
                        ns[a.name.split(".")[0]] = top
                    else:
                        unknown[a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                sub = _module(f"{node.module}.{a.name}")
                if sub is not None:
                    ns[a.asname or a.name] = sub
                    continue
                mod = _module(node.module)
                ok, value = module_export(mod, a.name) if mod is not None else (False, None)
                if ok:  # only what a kernel could read as `module.name` (closed.py)
                    ns[a.asname or a.name] = value
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                continue
            try:
                value = module_constant(node.value, ns)
            except LimitError as e:
                loc = Location(filename, node.lineno, node.col_offset + 1)
                raise LimitError(e.message, loc, lines[node.lineno - 1] if node.lineno <= len(lines) else "",
                                 e.hint) from None
            except (NotConstant, ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
                continue  # not a constant: left undefined, so a kernel using it gets a clear error
            for t in targets:
                if isinstance(t, ast.Name):
                    ns[t.id] = value
        elif isinstance(node, ast.FunctionDef):
            names = [decorator_name(d) for d in node.decorator_list]
            jit = any(n in _JIT_NAMES or n.endswith(".jit") for n in names)
            compile_time = not jit and any(n.split(".")[-1] in _COMPILE_TIME_NAMES for n in names)
            if not (jit or compile_time):
                continue
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            end = node.end_lineno or node.lineno
            seg = "\n".join(lines[start - 1:end]) + "\n"
            fn = JITFunction(text=seg, name=node.name, filename=filename, first_line=start, globals=ns,
                             compile_time=compile_time)
            ns[node.name] = fn
            if jit:
                funcs[node.name] = fn
    return funcs


def compile_source(source: str, kernel: str | None = None, *, filename: str = "<kernel>") -> JITFunction:
    """A kernel from source text. The text is parsed, never executed: imports of `triton`,
    `triton.language`, `compiler`, `compiler.language` and `math` are understood; other
    `@jit` functions in the text can be called; module-level constants must be literals."""
    funcs = load_text_module(source, filename)
    if not funcs:
        raise E.UnsupportedError("the source defines no @jit / @triton.jit function", None, "",
                                 "decorate the kernel with @triton.jit (or @jit)")
    if kernel is None:
        if len(funcs) > 1:
            raise E.ArgumentError(f"the source defines several kernels ({', '.join(funcs)}); "
                                  "say which one (kernel_name=... in the tools, kernel=... in compile_source)")
        return next(iter(funcs.values()))
    if kernel not in funcs:
        raise E.ArgumentError(f"no @jit function named {kernel!r} in the source "
                              f"(found: {', '.join(funcs) or 'none'})")
    return funcs[kernel]
