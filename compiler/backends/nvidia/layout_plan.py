"""Layout assignment for the NVIDIA backend: every tile value's register layout, chosen before
code generation.

The lowering (lower.py and its op modules) holds each tile as a linear layout and one LLVM value
per register. Which layout a value lives in is decided here, once for the whole function, by one
rule per op, walking the function in the order the lowering does:

- *chosen* layouts: `make_range`, `splat`, a histogram and the fallback of a reshape take the
  canonical blocked layout of their shape (vectorised as wide as the loads and stores of that
  shape allow, `NvLowering.canonical`); an elementwise result keeps its operands' layout when they
  agree, else that of the first operand that cannot be recomputed cheaply (a dot's accumulator, a
  loaded tile, a loop-carried value), so only the cheap operands move; a broadcast lands in the
  layout of the expensive tile it is combined with further down (`acc * alpha[:, None]`); a loop
  carries a dot's accumulator (and what is computed from it elementwise) in the dot's layout, the
  addresses of a pipelined copy in the layout the copy wants, and attention's row statistics in
  the dot layout sliced, so the loop body moves no data; inline assembly packs its operands.
- *derived* layouts follow from the operands': a load is in its pointers' layout, a reduction in
  its operand's sliced along the axis, expand_dims/trans/reshape/join/split/cat relabel the
  operand's bases, a dot's result is in its tensor-core plan's accumulator layout
  (mma.sync/wgmma/tcgen05, compiler/backends/nvidia/mma.py).

The lowering reads the chosen layouts from the plan (`NvLowering.layouts`) instead of deciding,
and produces the derived ones from its operands; with `ANVIL_VERIFY_IR=1` (tests and CI) every
register tile it produced is checked against the plan (`check_plan`). The plan is printed in the
Tile IR of the `tir.assign_layouts` stage (`kernel.asm["tir"]`, `print_layouts`), each tile value
annotated with its layout. Pipelined shared-memory operands (the slots a wgmma reads) are `SHARED`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Block, Function, Op, Value
from ...ir.ops import ELEMENTWISE, ELEMENTWISE_COMPUTE
from ...ir.printer import print_function
from ...layouts import LinearLayout, dim_names, slice_layout
from ...layouts import shape as L
from .async_copy import carried_copy_layouts, pipe_buffer
from .dot import dot_layout
from .inline_asm import packed_layout
from .remat import consumer_layout, is_cheap
from .tiles import GPUTile, SharedOperand

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["SHARED", "Layout", "plan_layouts", "check_plan", "print_layouts", "layout_text",
           "expanded_layout", "permuted_layout"]

SHARED: Final = "shared"  # a pipelined shared-memory operand (async_copy.py), read in place by its dot
Layout = LinearLayout | str


def expanded_layout(layout: LinearLayout, axis: int, shape: tuple[int, ...]) -> LinearLayout:
    """expand_dims: a size-1 dim inserted at `axis` (every basis 0 along it)."""
    bases = {name: [(*b[:axis], 0, *b[axis:]) for b in rows] for name, rows in layout.in_dims}
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))


def permuted_layout(layout: LinearLayout, perm: tuple[int, ...], shape: tuple[int, ...]) -> LinearLayout:
    """trans: the output dims permuted (the registers stay where they are)."""
    bases = {name: [tuple(b[p] for p in perm) for b in rows] for name, rows in layout.in_dims}
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))


class _Planner:
    def __init__(self, lw: NvLowering) -> None:
        self.lw = lw
        self.layouts: dict[Value, Layout] = {}
        self.carried: dict[Value, LinearLayout] | None = None

    # ------------------------------------------------------------------ queries
    def tile(self, v: Value) -> LinearLayout | None:
        """The register layout of `v`, or None for a scalar (or a shared-memory operand)."""
        lay = self.layouts.get(v)
        return lay if isinstance(lay, LinearLayout) else None

    def own(self, v: Value) -> LinearLayout:
        """`v` as the lowering's `tile(v)` takes it: its layout, the canonical one for a scalar."""
        lay = self.tile(v)
        return lay if lay is not None else self.lw.canonical(T.shape_of(v.type))

    def set(self, v: Value, lay: Layout | None) -> None:
        if lay is not None and isinstance(v.type, T.TileType):
            self.layouts[v] = lay

    # ------------------------------------------------------------------ walk
    def block(self, block: Block) -> None:
        for op in block.ops:
            if op.opcode in ("yield", "condition"):
                continue
            rule = _RULES.get(op.opcode)
            if rule is not None:
                rule(self, op)
            elif op.opcode in ELEMENTWISE_COMPUTE:
                self.set(op.results[0], self.elementwise(op))

    def elementwise(self, op: Op) -> LinearLayout | None:
        r = op.results[0]
        if not isinstance(r.type, T.TileType):
            return None
        shape = T.shape_of(r.type)
        tiles = [(o, lay) for o in op.operands if (lay := self.tile(o)) is not None]
        distinct = {lay for _, lay in tiles}
        if len(distinct) == 1:
            lay = distinct.pop()
            if lay.out_shape == shape:
                return lay
        for o, lay in tiles:
            if lay.out_shape == shape and not is_cheap(o):
                return lay
        return self.lw.canonical(shape)

    def loop_carried(self, arg: Value) -> LinearLayout | None:
        """The layout a loop carries `arg` in when the body wants one (see the module's docstring)."""
        if self.carried is None:
            self.carried = _carried_layouts(self.lw)
        return self.carried.get(arg)


# ---------------------------------------------------------------------- rules
def _canonical(p: _Planner, op: Op) -> None:
    p.set(op.result, p.lw.canonical(T.shape_of(op.result.type)))


def _expand_dims(p: _Planner, op: Op) -> None:
    x, shape = p.tile(op.operands[0]), T.shape_of(op.result.type)
    p.set(op.result, p.lw.canonical(shape) if x is None else expanded_layout(x, op.attrs["axis"], shape))


def _trans(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.result.type)
    p.set(op.result, permuted_layout(p.own(op.operands[0]), tuple(op.attrs["perm"]), shape))


def _broadcast(p: _Planner, op: Op) -> None:
    p.set(op.result, consumer_layout(op, p.tile) or p.lw.canonical(T.shape_of(op.result.type)))


def _reshape(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.result.type)
    x = p.tile(op.operands[0])
    lay = L.reshaped_layout(x, shape) if x is not None else None
    p.set(op.result, lay or p.lw.canonical(shape))


def _like_operand(index: int) -> Callable[[_Planner, Op], None]:
    """Results in the layout of operand `index` (loads in their pointers', scans, atomics, gather
    in its index's)."""
    def rule(p: _Planner, op: Op) -> None:
        if op.results and isinstance(op.results[0].type, T.TileType):
            lay = p.own(op.operands[index])
            for r in op.results:
                p.set(r, lay)

    return rule


def _async_drain(p: _Planner, op: Op) -> None:
    """The dot results passed through, each in its own layout."""
    for v, r in zip(op.operands, op.results, strict=True):
        p.set(r, p.own(v) if isinstance(v.type, T.TileType) else None)


def _reduce(p: _Planner, op: Op) -> None:
    if T.shape_of(op.results[0].type):
        lay = slice_layout(p.own(op.operands[0]), op.attrs["axis"])
        for r in op.results:
            p.set(r, lay)


def _dot(p: _Planner, op: Op) -> None:
    p.set(op.result, dot_layout(p.lw, op))


def _join(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.result.type)
    base = None if len(shape) == 1 else p.own(op.operands[0])
    p.set(op.result, L.pair_layout(base, shape, 32, p.lw.num_warps))


def _split(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.operands[0].type)
    if len(shape) == 1:
        return
    x = p.own(op.operands[0])
    k = L.pair_bit(x)
    if k is None:
        x, k = L.pair_layout(p.lw.canonical(shape[:-1]), shape, 32, p.lw.num_warps), 0
    for r in op.results:
        p.set(r, L.split_layout(x, k))


def _cat(p: _Planner, op: Op) -> None:
    p.set(op.result, L.cat_layout(p.own(op.operands[0])))


def _sort(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.operands[0].type)
    x = p.own(op.operands[0])
    axis = op.attrs["axis"]
    p.set(op.result, x if L.sortable(x, axis, shape[axis]) else p.lw.canonical(shape))


def _histogram(p: _Planner, op: Op) -> None:
    p.set(op.result, p.lw.canonical(T.shape_of(op.result.type)))


def _inline_asm(p: _Planner, op: Op) -> None:
    shape = T.shape_of(op.results[0].type)
    if shape:
        lay = packed_layout(p.lw, shape, int(op.attrs["pack"]))
        for r in op.results:
            p.set(r, lay)


def _async_wait(p: _Planner, op: Op) -> None:
    buf = pipe_buffer(p.lw, op)
    p.set(op.result, SHARED if buf.smem is not None else buf.layout)


def _for(p: _Planner, op: Op) -> None:
    body = op.regions[0]
    like = [(p.loop_carried(a) or p.own(v)) if isinstance(v.type, T.TileType) else None
            for a, v in zip(body.args[1:], op.operands[3:], strict=True)]
    for a, lay in zip(body.args[1:], like, strict=True):
        p.set(a, lay)
    p.block(body)
    for r, lay in zip(op.results, like, strict=True):
        p.set(r, lay)


def _if(p: _Planner, op: Op) -> None:
    likes: list[LinearLayout | None] | None = None
    for region in op.regions:
        p.block(region)
        if likes is None:
            likes = [p.own(y) if isinstance(y.type, T.TileType) else None for y in region.ops[-1].operands]
    for r, lay in zip(op.results, likes or [], strict=True):
        p.set(r, lay)


def _while(p: _Planner, op: Op) -> None:
    before, after = op.regions
    for a, v in zip(before.args, op.operands, strict=True):
        p.set(a, p.own(v) if isinstance(v.type, T.TileType) else None)
    p.block(before)
    fwd = [p.own(v) if isinstance(v.type, T.TileType) else None for v in before.ops[-1].operands[1:]]
    for a, lay in zip(after.args, fwd, strict=True):
        p.set(a, lay)
    p.block(after)
    for r, lay in zip(op.results, fwd, strict=True):
        p.set(r, lay)


def _none(p: _Planner, op: Op) -> None:
    return None


_RULES: dict[str, Callable[[_Planner, Op], None]] = {
    "constant": _none, "program_id": _none, "num_programs": _none, "shared_alloc": _none,
    "assume": _none, "barrier": _none, "store": _none, "print": _none, "assert": _none,
    "async_copy": _none,
    "make_range": _canonical, "splat": _canonical, "histogram": _histogram,
    "expand_dims": _expand_dims, "trans": _trans, "broadcast": _broadcast, "reshape": _reshape,
    "load": _like_operand(0), "atomic_rmw": _like_operand(0), "atomic_cas": _like_operand(0),
    "scan": _like_operand(0), "gather": _like_operand(1), "async_drain": _async_drain,
    "reduce": _reduce, "dot": _dot, "join": _join, "split": _split, "cat": _cat, "sort": _sort,
    "inline_asm": _inline_asm, "async_wait": _async_wait,
    "for": _for, "if": _if, "while": _while,
}


def _carried_layouts(lw: NvLowering) -> dict[Value, LinearLayout]:
    """Loop-carried values the body wants in a particular layout: pipelined copies' addresses,
    dot accumulators (and what they are computed from elementwise, e.g. acc * alpha), and row
    statistics reduced from a dot's result."""
    out = carried_copy_layouts(lw)
    for op in lw.fn.walk():
        if op.opcode == "dot":
            lay = dot_layout(lw, op)
            todo, seen = [op.operands[2]], set()
            while todo:
                v = todo.pop()
                if v in seen or T.shape_of(v.type) != lay.out_shape:
                    continue
                seen.add(v)
                out.setdefault(v, lay)
                d = v.op
                if d is not None and d.opcode in ELEMENTWISE and d.opcode not in ("load", "broadcast"):
                    todo.extend(d.operands)
    for op in lw.fn.walk():
        if op.opcode == "for":
            _row_statistics(lw, op, out)
    return out


def _row_statistics(lw: NvLowering, loop: Op, out: dict[Value, LinearLayout]) -> None:
    """Loop-carried vectors updated from reductions of a dot result in the body (attention's
    running max and sum): carried in the reduction's layout (the dot layout, sliced), so the
    body neither converts them nor broadcasts them back through shared memory."""
    body = loop.regions[0]
    y = body.terminator
    if y is None or not any(op.opcode == "dot" for op in body.ops):
        return

    def source_dot(v: Value, depth: int = 0) -> Op | None:
        d = v.op
        if d is None or d.parent is not body or depth > 12:
            return None
        if d.opcode == "dot":
            return d
        if d.opcode not in ELEMENTWISE or d.opcode in ("load", "make_range", "constant"):
            return None
        for o in d.operands:
            if len(T.shape_of(o.type)) == len(T.shape_of(v.type)):
                found = source_dot(o, depth + 1)
                if found is not None:
                    return found
        return None

    def reduction(v: Value, depth: int = 0) -> tuple[Op, int] | None:
        d = v.op
        if d is None or d.parent is not body or depth > 6:
            return None
        if d.opcode == "reduce":
            dot = source_dot(d.operands[0])
            return (dot, d.attrs["axis"]) if dot is not None else None
        if d.opcode not in ELEMENTWISE:
            return None
        for o in d.operands:
            found = reduction(o, depth + 1)
            if found is not None:
                return found
        return None

    for arg, v in zip(body.args[1:], y.operands, strict=False):
        if len(T.shape_of(arg.type)) != 1 or arg in out:
            continue
        found = reduction(v)
        if found is not None:
            dot, axis = found
            lay = dot_layout(lw, dot)
            if len(lay.out_dims) == 2:
                out[arg] = slice_layout(lay, axis)


def plan_layouts(lw: NvLowering) -> dict[Value, Layout]:
    """The layout of every tile value of `lw.fn` (see the module's docstring)."""
    p = _Planner(lw)
    p.block(lw.fn.body)
    return p.layouts


def check_plan(lw: NvLowering, plan: Mapping[Value, Layout]) -> None:
    """After lowering: every register tile the lowering holds is in its planned layout (a
    compiler bug otherwise, named with the value's op)."""
    bad = []
    for v, x in lw.vals.items():
        if isinstance(x, GPUTile):
            want = plan.get(v)
        elif isinstance(x, SharedOperand):
            want, x = plan.get(v), None
            if want == SHARED:
                continue
        else:
            continue
        got = x.layout if x is not None else SHARED
        if want != got:
            where = f"{v.op.opcode} at {v.op.loc}" if v.op is not None else "a block argument"
            bad.append(f"{where}: planned {_short(want)}, lowered {_short(got)}")
    if bad:
        raise UnsupportedError(f"internal: the NVIDIA lowering of {lw.name} left {len(bad)} tile(s) outside the "
                            "layouts planned for them:\n  " + "\n  ".join(bad[:8]))


def _short(lay: Layout | None) -> str:
    return "nothing" if lay is None else layout_text(lay)


def layout_text(lay: Layout) -> str:
    """One line: each hardware dimension's basis vectors (docs/layouts.md), then the shape."""
    if isinstance(lay, str):
        return lay

    def fmt(b: tuple[int, ...]) -> str:
        return "(" + ",".join(str(c) for c in b) + ")"

    dims = " ".join(f"{name}=[{','.join(fmt(b) for b in rows)}]" for name, rows in lay.in_dims)
    return f"{dims} -> {list(lay.out_shape)}"


def print_layouts(fn: Function, plan: Mapping[Value, Layout]) -> str:
    """The Tile IR with each tile value's layout: `#L<n>` after its type, the layouts listed once
    at the top."""
    names: dict[Layout, str] = {}
    for lay in plan.values():
        names.setdefault(lay, SHARED if lay == SHARED else f"#L{len(names)}")
    header = [f"{n} = {layout_text(lay)}" for lay, n in names.items() if lay != SHARED]
    body = print_function(fn, lambda v: names.get(plan[v]) if v in plan else None)
    return "\n".join(header) + ("\n" if header else "") + body
