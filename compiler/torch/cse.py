"""Common-subexpression elimination of an AOTAutograd joint graph, before it is split into forward
and backward.

The min-cut partitioner runs such a pass itself, but the one it calls loads inductor's pattern
matcher (and with it most of inductor: about a second) on its first use, for two small helpers that
number the graph's mutation regions. A backend that is not inductor would pay that second on its
first training graph. `cse_joint` is the same elimination written for this backend: the backend
runs it, then the partitioner with its own pass turned off.

Two nodes are one value when they call the same op on the same arguments (after earlier
eliminations) within one mutation region (the nodes between two ops that write memory). Left as
they are: placeholders and outputs, random ops (two draws are two values), allocations (`empty`,
`empty_like`, ...: fresh storage each), nodes whose storage a graph output shares (outputs that
alias stay distinct tensors), and any node with an argument that cannot be compared exactly.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef

__all__ = ["cse_joint"]

_UNKEYED = object()  # an argument that cannot be compared exactly: the node keeps its own value


def _writes(node: fx.Node) -> bool:
    """Whether the node may write memory (it starts a new mutation region)."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return bool(target._schema.is_mutable)
    if node.kwargs.get("out") is not None:
        return True
    # pure: indexing, arithmetic of sizes (dynamic shapes), torch.sym_max, ...; any other callable (a
    # higher-order op, a Python function) may write
    pure = target is operator.getitem or getattr(target, "__module__", None) in _PURE_MODULES \
        or getattr(target, "__name__", "").startswith("sym_")
    return not pure


_PURE_MODULES = ("_operator", "operator", "math", "builtins")


def _fresh(node: fx.Node) -> bool:
    """Random ops and allocations: equal calls give distinct values."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return True
    return target.overloadpacket.__name__.startswith(("empty", "new_empty"))


def _key(value: Any, env: dict[fx.Node, fx.Node]) -> Any:
    """A hashable, exact key of an argument with the graph's earlier eliminations applied."""
    if isinstance(value, fx.Node):
        return env[value]
    if isinstance(value, bool | int | str | torch.dtype | torch.device | torch.layout | torch.memory_format) \
            or value is None:
        return (type(value), value)
    if isinstance(value, float):  # -0.0 == 0.0 and nan != nan: compare the bits
        return (float, value.hex()) if not math.isnan(value) else _UNKEYED
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return (type(value), value.node)
    if isinstance(value, list | tuple):
        parts = tuple(_key(v, env) for v in value)
        return _UNKEYED if any(p is _UNKEYED for p in parts) else (type(value), parts)
    if isinstance(value, dict):
        items = tuple((k, _key(v, env)) for k, v in sorted(value.items()))
        return _UNKEYED if any(p is _UNKEYED for _, p in items) else (dict, items)
    return _UNKEYED


def _storage(node: fx.Node) -> StorageWeakRef | None:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return StorageWeakRef(val.untyped_storage())
    except (NotImplementedError, RuntimeError):
        return None


def _unbacked(node: fx.Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        # deferred: start-up cost: torch's symbolic shapes load with torch.compile, before a backend runs
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

        return bool(free_unbacked_symbols(val))
    return False


def cse_joint(graph: fx.Graph) -> fx.Graph:
    """A copy of `graph` in which each repeated computation refers to its first occurrence."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    out_storages = {s for s in (_storage(n) for n in output.all_input_nodes) if s is not None}
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    seen: dict[Any, fx.Node] = {}
    region = 0
    for node in graph.nodes:
        writes = node.op == "call_function" and _writes(node)
        if writes:
            region += 1
        key: Any = _UNKEYED
        if node.op == "call_function" and not writes and not _fresh(node) and not _unbacked(node) \
                and _storage(node) not in out_storages:
            args = _key(node.args, env)
            kwargs = _key(node.kwargs, env)
            if args is not _UNKEYED and kwargs is not _UNKEYED:
                key = (node.target, region, args, kwargs)
        if key is not _UNKEYED:
            hit = seen.get(key)
            if hit is not None:
                env[node] = hit
                continue
        env[node] = new.node_copy(node, lambda x: env[x])
        if key is not _UNKEYED:
            seen[key] = env[node]
    return new
