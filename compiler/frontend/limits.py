"""The frontend's limits on compile-time work and values (docs/security.md gives the model), and the
checks the language's compile-time builtins share with it (static_print, static_assert)."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from typing import Any

from .. import errors as E
from ..language import core as lc

__all__ = ["LimitError", "Budget", "MAX_INT_BITS", "MAX_ITEMS", "MAX_UNROLL", "MAX_STEPS", "MAX_OPS",
           "MAX_INLINE_DEPTH", "MAX_AST_DEPTH", "too_deep", "leaves", "bounded_str_source"]

MAX_INT_BITS = 1024
"""Bits of a compile-time integer (constexpr arithmetic; kernels' integers are at most 64 bits)."""
MAX_ITEMS = 1 << 16
"""Characters of a compile-time string; leaves of a compile-time tuple or list (nested ones counted)."""
MAX_UNROLL = 1 << 16
"""Iterations of one `tl.static_range` loop (or loop over a compile-time tuple)."""
MAX_STEPS = 250_000
"""Syntax nodes the frontend may visit for one kernel, inlined calls and unrolled loops included (the
largest kernels of the test and compatibility suites, the W4A16 GEMVs, visit 50,000-100,000; a
call tree that doubles at each level reaches the limit in about two seconds)."""
MAX_OPS = 500_000
"""Tile IR ops one kernel may create."""
MAX_INLINE_DEPTH = 64
"""Nesting of inlined @jit calls."""
MAX_AST_DEPTH = 100
"""Nesting of the syntax tree of a kernel's source (expressions within statements within blocks)."""


class LimitError(E.CompilationError):
    """Compile-time work or a compile-time value beyond one of the frontend's limits."""


@dataclass
class Budget:
    """What one kernel's compilation has spent: nodes visited, ops created."""

    steps: int = 0

    def step(self, ops: int) -> str | None:
        """Count one visited node; the reason to stop when a limit is passed."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            return (f"compile-time work passed {MAX_STEPS:,} steps (unrolled loops, inlined @jit calls or "
                    "recursion produce too much code)")
        if ops > MAX_OPS:
            return f"the kernel creates more than {MAX_OPS:,} IR ops"
        return None


def too_deep(tree: Any) -> Any:
    """The first node of `tree` nested deeper than MAX_AST_DEPTH, or None (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_AST_DEPTH:
            return node
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def leaves(v: Any, cap: int = MAX_ITEMS + 1, _memo: dict[int, int] | None = None) -> int:
    """Leaves of a (possibly nested, possibly shared) tuple or list, counted up to `cap`."""
    if not isinstance(v, (tuple, list)):
        return 1
    memo = {} if _memo is None else _memo
    key = id(v)
    if key in memo:
        return memo[key]
    n = 0
    for x in v:
        n += leaves(x, cap, memo) if isinstance(x, (tuple, list)) else 1
        if n >= cap:
            break
    memo[key] = n
    return n


def bounded_str_source(value: Any) -> Any:
    """`value` as it may be turned into text: a sequence only when its text cannot be huge (nested
    tuples are counted), and modules, functions and other objects by their names alone (their
    default text holds addresses of the compiler's process and paths of its files)."""
    if isinstance(value, (tuple, list)) and leaves(value) > 4096:
        raise LimitError(f"cannot turn a sequence of {leaves(value):,} items into text; the limit is 4,096")
    return _text_safe(value)


def _text_safe(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str, lc.dtype, lc.block_type, lc.Tensor)):
        return v
    if isinstance(v, (tuple, list)):
        items = [_text_safe(x) for x in v]
        return v if all(a is b for a, b in zip(items, v, strict=True)) else type(v)(items)
    if isinstance(v, types.ModuleType):
        return "<module " + v.__name__.replace("compiler.triton_compat", "triton") + ">"
    name = getattr(v, "__name__", None)
    kind = "class" if isinstance(v, type) else "function" if callable(v) else type(v).__name__
    return f"<{kind} {name}>" if isinstance(name, str) else f"<{kind}>"
