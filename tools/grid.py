"""Launch grids: ints, or small integer expressions over the launch's scalars, constexprs and
tensor shapes.

``["cdiv(n, BLOCK)", 4]`` becomes ``[8, 4]`` when ``n = 1000`` and ``BLOCK = 128``;
``"cdiv(a_ptr.shape[0], BM)"`` reads a tensor argument's shape. The expressions are interpreted
over a whitelist (integers, names, `name.shape[i]`, + - * // % and cdiv, max, min,
next_power_of_2), never executed.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tools.errors import ToolInputError


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_FUNCS: dict[str, Callable[..., int]] = {
    "cdiv": cdiv,
    "max": max,
    "min": min,
    "next_power_of_2": next_power_of_2,
}
_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_LIMIT = 1 << 62


def _eval(node: ast.AST, names: Mapping[str, Any], shapes: Mapping[str, Sequence[int]], text: str) -> int:
    def fail(what: str) -> ToolInputError:
        col = getattr(node, "col_offset", 0)
        return ToolInputError(f"grid entry {text!r}: {what} (column {col + 1}). {_HELP}")

    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        value = node.value
    elif isinstance(node, ast.Name):
        if node.id not in names:
            raise fail(f"unknown name {node.id!r}; available: {', '.join(sorted(names)) or '(none)'}")
        value = names[node.id]
        if not isinstance(value, int) or isinstance(value, bool):
            raw: object = value
            given = f"{raw!r}: pass {int(raw)} (an int) in args for an i32 size" if (
                isinstance(raw, float) and raw.is_integer()) else repr(raw)
            raise fail(f"{node.id!r} is not an integer (it is {given})")
    elif (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, ast.Name)
    ):
        tensor = node.value.value.id
        shape = shapes.get(tensor)
        if shape is None:
            raise fail(f"{tensor!r} is not a tensor argument; tensors: {', '.join(shapes) or '(none)'}")
        index = _eval(node.slice, names, shapes, text)  # an integer expression, e.g. 0 or -1
        if not -len(shape) <= index < len(shape):
            raise fail(f"{tensor} has {len(shape)} dimension(s); shape[{index}] is out of range")
        value = int(shape[index])
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left, names, shapes, text), _eval(node.right, names, shapes, text)
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and right == 0:
            raise fail("division by zero")
        value = _OPS[type(node.op)](left, right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = -_eval(node.operand, names, shapes, text)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and not node.keywords
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in _FUNCS
    ):
        fname = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if isinstance(node.func, ast.Attribute) and not (
            isinstance(node.func.value, ast.Name) and node.func.value.id in ("triton", "tl", "anvil", "compiler")
        ):
            raise fail("only cdiv, max, min, next_power_of_2 (optionally as triton.cdiv) can be called")
        args = [_eval(a, names, shapes, text) for a in node.args]
        if fname == "cdiv" and (len(args) != 2 or args[1] == 0):
            raise fail("cdiv takes two integers, the second non-zero")
        try:
            value = _FUNCS[fname](*args)
        except (TypeError, ValueError) as exc:
            raise fail(str(exc)) from None
    else:
        raise fail("unsupported syntax")
    if abs(value) > _LIMIT:
        raise fail("value too large")
    return value


_HELP = ("Grid entries are ints or expressions like 'cdiv(n, BLOCK)' over scalar args and constexprs, and tensor "
         "args' shapes ('cdiv(x_ptr.shape[0], BLOCK)').")


def evaluate_grid(
    grid: list[int | str] | int | str, names: Mapping[str, Any], *, max_programs: int,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> list[int]:
    """Resolve a grid to 1-3 non-negative ints; refuse grids beyond ``max_programs`` program instances.
    ``shapes``: the tensor arguments' shapes, which entries may read as ``name.shape[i]``."""
    entries = grid if isinstance(grid, list) else [grid]
    if not 1 <= len(entries) <= 3:
        raise ToolInputError(f"grid has {len(entries)} entries; give 1 to 3 (programs along axes 0, 1, 2).")
    dims: list[int] = []
    for entry in entries:
        if isinstance(entry, bool):
            raise ToolInputError(f"grid entry {entry!r} is not an integer. {_HELP}")
        if isinstance(entry, int):
            value = entry
        else:
            if len(entry) > 200:
                raise ToolInputError("grid entry longer than 200 characters.")
            try:
                tree = ast.parse(entry.strip(), mode="eval")
            except SyntaxError:
                raise ToolInputError(f"grid entry {entry!r} is not a valid expression. {_HELP}") from None
            value = _eval(tree.body, names, shapes or {}, entry)
        if value < 0:
            raise ToolInputError(f"grid entry {entry!r} is {value}; programs per axis must be >= 0.")
        dims.append(value)
    total = math.prod(dims)
    if total > max_programs:
        raise ToolInputError(
            f"grid {dims} has {total} program instances; the limit is {max_programs}. Use larger blocks."
        )
    return dims
