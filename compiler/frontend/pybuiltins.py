"""The Python builtins kernel code may call, on compile-time values (the closed world of closed.py).

Each is looked up by name only when the kernel does not define the name, and called only when
`codegen.CodeGenerator.call` finds it by identity in PY_BUILTIN_IDS. Builtins that would reach
outside the closed world are refused by name with a located error.
"""

from __future__ import annotations

import ast
import builtins as py
from typing import Any

from .. import errors as E
from ..language.builtins import device_print
from ..language.core import Tensor
from .closed import LimitError, bounded_str_source, check_value, is_closed, leaves
from .values import _unwrap as unwrap

__all__ = ["PY_BUILTINS", "PY_BUILTIN_IDS", "REFUSED_BUILTINS", "python_builtin"]

# The Python builtins kernel code may call (by identity), each on compile-time values only.
PY_BUILTINS: dict[str, Any] = {name: getattr(py, name) for name in (
    "len", "min", "max", "int", "float", "bool", "abs", "print", "isinstance", "tuple", "list", "range",
    "getattr", "hasattr", "enumerate", "zip", "str", "round")}
PY_BUILTIN_IDS = frozenset(id(f) for f in PY_BUILTINS.values())
# Builtins that would reach outside the closed world of compile-time values (closed.py).
REFUSED_BUILTINS = frozenset((
    "type", "setattr", "delattr", "vars", "globals", "locals", "eval", "exec", "compile", "open", "__import__",
    "breakpoint", "input", "dir", "id", "object", "super", "memoryview", "bytearray", "bytes", "help", "exit",
    "quit", "classmethod", "staticmethod", "property", "iter", "next", "map", "filter", "format", "repr",
    "ascii", "chr", "ord", "hash", "callable", "issubclass", "sorted", "reversed", "sum", "pow", "divmod",
    "any", "all", "set", "frozenset", "dict", "slice", "__build_class__", "__builtins__", "__loader__",
    "__spec__"))


def python_builtin(gen: Any, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """`fn(*args)` for one of PY_BUILTINS in kernel code `gen` is generating, on compile-time values
    (tensors only where noted)."""
    if fn is py.print:
        prefix = args[0] if args and isinstance(args[0], str) else ""
        rest = args[1:] if prefix else args
        return device_print(prefix, *rest, _sem=gen.sem)
    if kwargs:
        raise gen.error(E.UnsupportedError, node, f"{fn.__name__}() takes no keyword arguments in kernels")
    if fn is py.getattr or fn is py.hasattr:
        if len(args) not in ((2, 3) if fn is py.getattr else (2,)) or not isinstance(args[1], str):
            raise gen.error(E.ArgumentError, node, f"{fn.__name__}(value, 'name') takes a constant name")
        if args[1].startswith("_"):
            raise gen.error(E.UnsupportedError, node, f"attribute {args[1]!r} is not accessible in kernels",
                             "names starting with '_' are private to the compiler")
        try:
            value = gen.attribute(args[0], args[1], node)
        except E.CompilationError:
            if fn is py.hasattr:
                return False
            if len(args) == 3:
                return args[2]
            raise
        return True if fn is py.hasattr else value
    if fn is py.isinstance:
        classes = args[1] if len(args) == 2 and isinstance(args[1], tuple) else args[1:]
        if len(args) != 2 or not all(isinstance(c, type) and is_closed(c) or c in (int, float, bool, str, tuple,
                                                                                   list) for c in classes):
            raise gen.error(E.ArgumentError, node, "isinstance(value, cls) takes a language class (tl.tensor, "
                             "tl.constexpr, tl.dtype, ...) or int, float, bool, str, tuple, list")
        return py.isinstance(args[0], args[1])
    if any(_is_tensor(a) for a in args):
        if fn is py.len:
            return args[0].shape[0] if args[0].shape else 1
        if fn in (py.min, py.max) and len(args) == 2:
            return gen.sem.minmax("min" if fn is py.min else "max", args[0], args[1])
        raise gen.error(E.ConstexprError, node, f"{fn.__name__}() needs compile-time arguments",
                         "use the tl.* function for tensors")
    args = [_unwrap(a) for a in args]
    if fn is py.round and len(args) == 2 and isinstance(args[1], int) and abs(args[1]) > 400:
        raise gen.error(LimitError, node, f"round() to {args[1]} digits; the limit is 400")
    if fn is py.str:
        args = [bounded_str_source(a) for a in args]
    if fn is py.enumerate or fn is py.zip:
        if any(not isinstance(a, (tuple, list, str)) for a in args):
            raise gen.error(E.UnsupportedError, node, f"{fn.__name__}() takes compile-time tuples in kernels")
        if sum(leaves(a) if not isinstance(a, str) else len(a) for a in args) * 2 > 1 << 16:
            raise gen.error(LimitError, node, f"{fn.__name__}() over too many items")
        return check_value(tuple(fn(*args)))
    return check_value(fn(*args))


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _unwrap(x: Any) -> Any:
    return unwrap(x)
