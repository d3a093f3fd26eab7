"""An FX graph -> fusion groups: chains of elementwise ops, and row reductions with the
elementwise work before and after them, each to become one kernel.

Greedy, in graph order. A fusable node joins the open group of one of its operands when its shape
fits that group's domain S: elementwise on S (`full` values), or, once the group reduces over
S's last dim, elementwise on S[:-1] + (1,) (`row` values, one per row). Otherwise it starts a
group of its own. A group closes when a node outside it uses one of its values: it then runs just
before that node, so everything it reads is computed before it and everything reading it after.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx as fx

from ..fusion.graph import COL, FULL, ROW, Group, Kind, Op, Ref
from .lowering import Lowered, convert, dtype_name

__all__ = ["FxGroup", "partition"]


def _same(a: Any, b: Any) -> bool:
    """Two sizes that are provably equal (symbolic sizes compared without adding guards)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        # deferred: start-up cost: torch's symbolic shapes import sympy (about 0.7 s); the server imports this module
        from torch.fx.experimental.symbolic_shapes import statically_known_true

        return bool(statically_known_true(a == b))
    except Exception:  # noqa: BLE001  (sizes of unknown kinds compare as different)
        return False


def _same_shape(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


def _drop_ones(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(s for s in shape if not (isinstance(s, int) and s == 1))


@dataclass
class FxGroup:
    """One fusion group of an FX graph, and what the runtime needs to run it."""

    domain: tuple[Any, ...]  # S, symbolic sizes allowed
    nodes: list[fx.Node] = field(default_factory=list)
    inputs: list[fx.Node] = field(default_factory=list)  # external tensors the kernel loads, in order
    kinds: dict[fx.Node, str] = field(default_factory=dict)
    # per input: how its shape lines up with the domain: (leading size-1 dims to add, and whether a
    # trailing one is added: inputs of ops on per-row values of shape S[:-1])
    pads: dict[fx.Node, tuple[int, bool]] = field(default_factory=dict)
    lowered: dict[fx.Node, Lowered] = field(default_factory=dict)
    reduces: bool = False
    closed: bool = False
    over_rows: bool = False  # a cols group: its reductions run over every dim but the last

    @property
    def row_shape(self) -> tuple[Any, ...]:
        return self.domain[:-1]

    def kind_of(self, shape: tuple[Any, ...]) -> str | None:
        """The kind a value of `shape` has in this group, or None if it does not fit."""
        if _same_shape(shape, self.domain):
            return FULL
        if self.over_rows:
            last = self.domain[-1:]
            fits = len(shape) <= len(self.domain) and _same_shape(shape[-1:], last)
            return COL if fits and _same_shape(_drop_ones(shape[:-1]), ()) else None
        if self.reduces and _same_shape(_drop_ones(shape), _drop_ones(self.row_shape)) and (
                len(shape) in (len(self.domain), len(self.domain) - 1)):
            return ROW
        return None

    def outputs(self) -> list[fx.Node]:
        """Members read outside the group (or returned by the graph)."""
        members = set(self.nodes)
        return [n for n in self.nodes if any(u not in members for u in n.users)]

    def to_group(self, outputs: list[fx.Node]) -> Group:
        """The plain graph the emitter reads."""
        g = Group("cols" if self.over_rows else "rows" if self.reduces else "pointwise")
        index = {n: i for i, n in enumerate(self.nodes)}
        input_index = {n: k for k, n in enumerate(self.inputs)}
        for n in self.inputs:
            g.inputs.append((dtype_name(n.meta["val"].dtype) or "", self._reads_as(n)))
        for n in self.nodes:
            low = self.lowered[n]
            args: list[Any] = []
            for a in low.args:
                if isinstance(a, fx.Node):
                    args.append(Ref(index[a]) if a in index else Ref(input_index[a], input=True))
                else:
                    args.append(a)
            g.ops.append(Op(low.name, tuple(args), dtype_name(n.meta["val"].dtype) or "", self.kinds[n]))  # type: ignore[arg-type]
        g.outputs = [index[n] for n in outputs]
        return g

    def _reads_as(self, n: fx.Node) -> Kind:
        """COL for an input of a cols group read only per column (after the walk over the rows)."""
        if not self.over_rows:
            return FULL
        for u in self.nodes:
            if n in self.lowered[u].args and (self.lowered[u].reduce or self.kinds[u] == FULL):
                return FULL
        return COL


def _pad_for(group: FxGroup, arg: fx.Node, out_shape: tuple[Any, ...]) -> tuple[int, bool] | None:
    """How tensor operand `arg` lines up with the domain when read by an op of shape `out_shape`
    (torch broadcasting: trailing dims aligned), or None if it does not broadcast to it."""
    val = arg.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    shape = tuple(val.shape)
    if len(shape) > len(out_shape):
        return None
    for s, o in zip(reversed(shape), reversed(out_shape), strict=False):
        if not (isinstance(s, int) and s == 1) and not _same(s, o):
            return None
    d = len(group.domain)
    trail = not group.over_rows and len(out_shape) == d - 1  # an op on S[:-1]-shaped per-row values
    return (d - len(shape) - (1 if trail else 0), trail)


def _try_join(group: FxGroup, node: fx.Node, low: Lowered) -> bool:
    val = node.meta["val"]
    shape = tuple(val.shape)
    operands = [a for a in low.args if isinstance(a, fx.Node)]
    if low.reduce:
        if low.over_rows != group.over_rows:
            return False  # a group reduces over its rows or over its columns, not both
        src = operands[0]
        if src in group.kinds and group.kinds[src] != FULL:
            return False
        src_shape = tuple(src.meta["val"].shape)
        if not _same_shape(src_shape, group.domain):
            return False
        kind: str = COL if low.over_rows else ROW
    else:
        maybe = group.kind_of(shape)
        if maybe is None:
            return False
        kind = maybe
    pads = {}
    for a in operands:
        if a in group.kinds:
            if kind in (ROW, COL) and group.kinds[a] == FULL and not low.reduce:
                return False  # a row (column) value computed from a full one is a reduction's job
            if group.over_rows and kind == FULL and group.kinds[a] == COL:
                return False  # would need the walk over the rows finished: a second pass
            continue
        if group.over_rows and any(a in group.lowered[u].args and
                                   (FULL if group.lowered[u].reduce else group.kinds[u]) != (
                                       FULL if low.reduce else kind) for u in group.nodes):
            return False  # read both in the walk and after it
        pad = _pad_for(group, a, group.domain if low.reduce else shape)
        if pad is None or group.pads.get(a, pad) != pad:
            return False  # not broadcastable, or lined up differently by another consumer
        pads[a] = pad
    if low.reduce:
        group.reduces = True
    for a, pad in pads.items():
        if a not in group.inputs:
            group.inputs.append(a)
            group.pads[a] = pad
    group.nodes.append(node)
    group.kinds[node] = kind
    group.lowered[node] = low
    return True


def _new_group(node: fx.Node, low: Lowered) -> FxGroup | None:
    operands = [a for a in low.args if isinstance(a, fx.Node)]
    if low.reduce:
        domain = tuple(operands[0].meta["val"].shape)
        if not domain:
            return None
    else:
        domain = tuple(node.meta["val"].shape)
    g = FxGroup(domain, over_rows=low.over_rows)
    return g if _try_join(g, node, low) else None


def _absorb(group: FxGroup, producer: FxGroup, order: dict[fx.Node, int]) -> bool:
    """Move an open group that feeds `group` into it, if all of it fits `group`'s domain: an
    elementwise one (e.g. the per-row scale computed from a saved statistic before the row reduction
    that uses it), or one reducing the same rows (a layer norm's backward: the sum of the gradient
    times the weight, and the sum of that times the normalized input, each started in its own group).
    An open group's values are read by no node outside it, so it can run wherever `group` runs."""
    if producer.closed or producer.over_rows or group.over_rows:
        return False
    if producer.reduces and not _same_shape(producer.domain, group.domain):
        return False
    trial = replace(group, nodes=list(group.nodes), inputs=list(group.inputs), kinds=dict(group.kinds),
                    pads=dict(group.pads), lowered=dict(group.lowered))
    for p in producer.nodes:
        if not _try_join(trial, p, producer.lowered[p]):
            return False
    moved = set(producer.nodes)
    for u in trial.nodes:
        low = trial.lowered[u]
        if trial.kinds[u] == ROW and not low.reduce and any(
                isinstance(a, fx.Node) and a in moved and trial.kinds[a] == FULL for a in low.args):
            return False
    trial.inputs = [n for n in trial.inputs if n not in trial.kinds]
    trial.nodes.sort(key=order.__getitem__)
    group.nodes, group.inputs, group.kinds, group.lowered = trial.nodes, trial.inputs, trial.kinds, trial.lowered
    group.reduces = trial.reduces
    group.pads = {n: p for n, p in trial.pads.items() if n in trial.inputs}
    producer.nodes = []
    return True


def partition(gm: fx.GraphModule, *, column_sums: bool = True) -> list[FxGroup]:
    """The fusion groups of `gm`, in the order they close. `column_sums`: fuse reductions over every
    dim but the last (else torch computes them)."""
    owner: dict[fx.Node, FxGroup] = {}
    groups: list[FxGroup] = []
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        low = convert(node)
        if low is not None and low.over_rows and not column_sums:
            low = None
        joined = False
        if low is not None:
            operands = [a for a in low.args if isinstance(a, fx.Node)]
            candidates = [owner[a] for a in reversed(operands) if a in owner]
            # siblings: open groups that load one of the same tensors (a norm's two statistics)
            candidates += [g for g in reversed(groups) if any(a in g.inputs for a in operands)]
            if low.over_rows:  # sums over the same rows of other tensors (a layer's bias and weight gradients)
                candidates += [g for g in reversed(groups) if g.over_rows and not g.closed]
            for g in candidates:
                if not g.closed and _try_join(g, node, low):
                    owner[node] = g
                    joined = True
                    break
            if not joined and not low.view:
                g2 = _new_group(node, low)
                if g2 is not None:
                    owner[node] = g2
                    groups.append(g2)
                    joined = True
        mine = owner.get(node)
        if mine is not None:
            for a in node.all_input_nodes:
                producer = owner.get(a)
                if producer is not None and producer is not mine and _absorb(mine, producer, order):
                    for n in mine.nodes:
                        owner[n] = mine
        # a node outside a group that reads its values closes it
        for a in node.all_input_nodes:
            reader = owner.get(a)
            if reader is not None and owner.get(node) is not reader:
                reader.closed = True
    # groups that would only copy what torch leaves as views (expand, alias, views) are not kernels
    return [g for g in groups if any(g.lowered[n].name != "copy" for n in g.nodes)]
