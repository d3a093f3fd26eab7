"""Module-level constants of kernel source text (and the defaults of a kernel's parameters): what
`X = 2 ** 10`, `BLOCK = tl.constexpr(64)` or `N = math.pi` evaluate to, by the closed-world rules."""

from __future__ import annotations

import ast
import operator
from typing import Any

from .closed import bounded_binary, check_value, module_export

__all__ = ["NotConstant", "decorator_name", "module_constant"]


def decorator_name(d: ast.expr) -> str:
    """A decorator's dotted name: `triton.jit`, and `tl.constexpr` for `tl.constexpr(...)`."""
    if isinstance(d, ast.Call):
        d = d.func
    parts = []
    while isinstance(d, ast.Attribute):
        parts.append(d.attr)
        d = d.value
    if isinstance(d, ast.Name):
        parts.append(d.id)
    return ".".join(reversed(parts))


_CONST_BINOPS: dict[type, tuple[str, Any]] = {
    ast.Add: ("add", operator.add), ast.Sub: ("sub", operator.sub), ast.Mult: ("mul", operator.mul),
    ast.FloorDiv: ("floordiv", operator.floordiv), ast.Div: ("truediv", operator.truediv),
    ast.Pow: ("pow", operator.pow), ast.LShift: ("shl", operator.lshift), ast.RShift: ("shr", operator.rshift),
    ast.Mod: ("mod", operator.mod), ast.BitAnd: ("and", operator.and_), ast.BitOr: ("or", operator.or_),
    ast.BitXor: ("xor", operator.xor),
}


class NotConstant(Exception):
    """A module-level value that is not a compile-time constant: the name is left undefined."""


def module_constant(node: ast.expr, ns: dict[str, Any]) -> Any:
    """A module-level constant: a literal, a constexpr(literal), a tuple of constants, an exported name of
    a language module or `math`, or bounded arithmetic on known constants (closed.py's rules)."""
    if isinstance(node, ast.Call):
        if decorator_name(node.func).split(".")[-1] == "constexpr" and len(node.args) == 1 and not node.keywords:
            return module_constant(node.args[0], ns)
        raise NotConstant
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bytes, complex)):
            raise NotConstant
        return check_value(node.value)
    if isinstance(node, ast.Name):
        v = ns.get(node.id)
        if isinstance(v, (int, float, bool, str, tuple)) or v is None and node.id in ns:
            return v
        raise NotConstant
    if isinstance(node, ast.Tuple):
        return check_value(tuple(module_constant(e, ns) for e in node.elts))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        base = ns.get(node.value.id)
        ok, value = module_export(base, node.attr) if base is not None else (False, None)
        if ok:
            return value
        raise NotConstant
    if isinstance(node, ast.BinOp) and type(node.op) in _CONST_BINOPS:
        name, fn = _CONST_BINOPS[type(node.op)]
        return bounded_binary(name, fn, module_constant(node.left, ns), module_constant(node.right, ns))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        v = module_constant(node.operand, ns)
        if isinstance(node.op, ast.Invert):
            if not isinstance(v, int):
                raise NotConstant
            return ~v
        if not isinstance(v, (int, float)):
            raise NotConstant
        return -v if isinstance(node.op, ast.USub) else +v
    raise NotConstant
