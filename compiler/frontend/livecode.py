"""The statements of a body that can run, with `if` branches settled at compile time left out.

Loops are analysed before they are generated: which names the body reassigns (the loop-carried
values) and whether it can `break`, `continue` or `return`. A branch under an `if` whose test is a
compile-time constant (`if HAS_BIAS:`, `if b_ptr is not None:`, `elif MODE == "max":`) is never
generated, so it must not count either: Triton drops it before it looks at the loop.

A `Decide` callback settles a test: True or False when the test is a compile-time value that cannot
change while the loop runs, None when it is a runtime value or may change (then both branches count).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

__all__ = ["Decide", "never", "live_nodes", "assigned_names", "contains"]

Decide = Callable[[ast.expr], "bool | None"]


def never(test: ast.expr) -> bool | None:
    """A Decide that settles nothing (the purely syntactic view)."""
    return None


def _live_children(node: ast.AST, decide: Decide) -> Iterator[ast.AST]:
    if isinstance(node, ast.If):
        taken = decide(node.test)
        if taken is not None:
            yield from (node.body if taken else node.orelse)
            return
    yield from ast.iter_child_nodes(node)


def live_nodes(stmts: list[ast.stmt], decide: Decide,
               stop: Callable[[ast.AST], bool] = lambda n: False) -> Iterator[ast.AST]:
    """Every node of `stmts` that can run, in source order; the children of a node for which `stop`
    holds are not visited (the node itself is)."""
    stack: list[ast.AST] = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        if not stop(node):
            stack.extend(reversed(list(_live_children(node, decide))))


def assigned_names(stmts: list[ast.stmt], decide: Decide = never) -> list[str]:
    """Names bound anywhere in the live part of `stmts` (in order of first binding)."""
    seen: dict[str, None] = {}
    for node in live_nodes(stmts, decide):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            seen.setdefault(node.id, None)
    return list(seen)


def contains(stmts: list[ast.stmt], kinds: tuple[type, ...], into_loops: bool, decide: Decide = never) -> bool:
    """Whether the live part of `stmts` holds a node of `kinds` (not looking into nested functions,
    nor into nested loops unless `into_loops`)."""
    def stop(node: ast.AST) -> bool:
        return isinstance(node, (ast.FunctionDef, ast.Lambda)) or (
            not into_loops and isinstance(node, (ast.For, ast.While)))

    return any(isinstance(n, kinds) for n in live_nodes(stmts, decide, stop))
