"""Translated ops -> one fusion group: its kind, its domain, each input's layout, the checks that
the whole expression is one kernel's work.

- `matmul`: one product of two arguments and elementwise work on its result.
- `rows`: reductions over the last dim of a domain S (rows x C), and elementwise work on full values
  (shape S, broadcast as torch broadcasts) and on per-row values (one per row of S).
- `pointwise`: elementwise work on S.

Inputs line up with S as torch broadcasting lines them up (trailing dims), except the arguments of
ops on per-row values computed without keepdim (shape S[:-1]), which line up with the rows. Each
argument is read through one view (its own strides, or those of .t(), .reshape(), ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from compiler.fusion.emit import MAX_ROW
from compiler.fusion.graph import FULL, ROW, Group, Layout, Op, Ref
from compiler.torch.runner import layout_of
from tools.errors import ToolInputError
from tools.generate.translate import Translator
from tools.generate.values import InputRef, OpRef, ParamRef, PreOp, Val

__all__ = ["Fused", "build_group"]


@dataclass
class Fused:
    """One kernel's work, ready to emit."""

    group: Group
    layouts: list[Layout]
    domain: tuple[int, ...]  # S (matmul: the product's shape)
    inputs: list[str]  # the arguments the kernel loads, in the group's order
    scalars: list[str]  # the scalar arguments it takes, in order of use
    outputs: list[tuple[str, torch.Tensor]]  # (name, shape and dtype as torch computes it)
    sizes: dict[str, int]  # n | R, C | M, N, K
    wide: bool  # 64-bit indexing
    ops: list[PreOp]  # the live ops, in the group's order


def _fail(what: str, hint: str = "") -> ToolInputError:
    return ToolInputError(f"expression: {what}" + (f"\n{hint}" if hint else ""))


def _drop_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def _shape(op: PreOp) -> tuple[int, ...]:
    assert op.meta is not None
    return tuple(int(s) for s in op.meta.shape)


def _outputs(tr: Translator, values: dict[str, Val]) -> list[tuple[str, int, torch.Tensor]]:
    """(name, op index, meta) of each output: an op of its own (a copy where it is an argument or
    another output's op)."""
    out: list[tuple[str, int, torch.Tensor]] = []
    taken: set[int] = set()
    for name, v in values.items():
        ref = v.operand
        if not isinstance(ref, OpRef) or ref.index in taken or tr.ops[ref.index].meta is None:
            v = tr.ew("copy", v)
            ref = v.operand
        assert isinstance(ref, OpRef) and v.meta is not None
        op = tr.ops[ref.index]
        if op.dtype != str(v.meta.dtype).removeprefix("torch."):
            v = tr.convert(Val(ref, op.meta, row=v.row), v.meta.dtype)
            ref = v.operand
            assert isinstance(ref, OpRef) and v.meta is not None
        taken.add(ref.index)
        meta = v.meta
        assert meta is not None
        out.append((name, ref.index, meta))
    return out


def _live(ops: list[PreOp], roots: list[int]) -> list[int]:
    live: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(a.index for a in ops[i].args if isinstance(a, OpRef))
    return sorted(live)


def _broadcast(shapes: list[tuple[int, ...]], what: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in torch.broadcast_shapes(*shapes))
    except RuntimeError:
        raise _fail(f"the {what} have shapes {sorted(set(shapes))}, which do not broadcast to one domain",
                    "A generated kernel computes values of one shape (and one value per row of it).") from None


def build_group(tr: Translator, values: dict[str, Val]) -> Fused:
    """The group computing `values` (output name -> value), or a ToolInputError saying why the
    expression is not one kernel."""
    outs = _outputs(tr, values)
    order = _live(tr.ops, [i for _, i, _ in outs])
    ops = [tr.ops[i] for i in order]
    new = {old: k for k, old in enumerate(order)}
    dots = [op for op in ops if op.name == "dot"]
    reductions = [op for op in ops if op.reduce]
    if len(dots) > 1:
        raise _fail("more than one matmul", "Generate one kernel per product.")
    if dots and reductions:
        raise _fail(f"a matmul and a reduction ({reductions[0].source}) in one kernel",
                    "Generated matmul kernels fuse elementwise work after the product; reduce in a second kernel.")
    kind = "matmul" if dots else "rows" if reductions else "pointwise"
    uses = [(name, view, new[i]) for name, view, i in tr.uses if i in new]
    full_shapes = [_shape(op) for op in ops if op.meta is not None and not op.row]
    for _, view, i in uses:
        if not ops[i].row or ops[i].reduce:
            full_shapes.append(tuple(int(s) for s in view.shape))
    if kind == "matmul":
        domain = _shape(dots[0])
    else:
        domain = _broadcast(full_shapes, "values") if full_shapes else _shape(ops[0])
    numel = math.prod(domain)
    if numel == 0:
        raise _fail(f"the kernel's domain {list(domain)} is empty", "Give every argument at least one element.")
    if kind == "rows":
        _check_rows(ops, domain)
        _check_reduced(tr, ops, uses, domain[-1])
    for name, i, meta in outs:
        shape = tuple(int(s) for s in meta.shape)
        row = tr.ops[i].row
        want = math.prod(domain[:-1]) if row else numel
        if math.prod(shape) != want or (not row and _drop_ones(shape) != _drop_ones(domain)):
            raise _fail(f"the output {name} has shape {list(shape)}, which does not cover the domain {list(domain)}",
                        "Every output of a generated kernel has the shape of the whole computation (or one value "
                        "per row of it).")
    inputs, layouts = _layouts(kind, ops, uses, domain, dots[0] if dots else None)
    index = {name: k for k, name in enumerate(inputs)}
    scalars: list[str] = []
    group = Group(kind, inputs=[(_input_dtype(tr, name), FULL) for name in inputs])  # type: ignore[arg-type]
    for op in ops:
        args: list[Ref | bool | int | float | str | None] = []
        for a in op.args:
            if isinstance(a, OpRef):
                args.append(Ref(new[a.index]))
            elif isinstance(a, InputRef):
                args.append(Ref(index[a.name], input=True))
            elif isinstance(a, ParamRef):
                if a.name not in scalars:
                    scalars.append(a.name)
                args.append(a.name)
            else:
                args.append(a)
        group.ops.append(Op(op.name, tuple(args), op.dtype, ROW if op.row else FULL))
    group.outputs = [new[i] for _, i, _ in outs]
    if kind == "matmul":
        a_view = next(v for n, v, i in uses if ops[i].name == "dot" and n == inputs[0])
        sizes = {"M": math.prod(domain[:-1]), "N": domain[-1], "K": int(a_view.shape[-1])}
    elif kind == "rows":
        sizes = {"R": math.prod(domain[:-1]), "C": domain[-1]}
    else:
        sizes = {"n": numel}
    reach = max([numel] + [int(v.numel()) for _, v, _ in uses])
    return Fused(group, layouts, domain, inputs, scalars, [(n, m) for n, _, m in outs], sizes,
                 wide=reach >= 2**31 - 1, ops=ops)


def _input_dtype(tr: Translator, name: str) -> str:
    value = tr.env[name]
    assert isinstance(value, Val) and value.view is not None
    return str(value.view.dtype).removeprefix("torch.")


def _check_rows(ops: list[PreOp], domain: tuple[int, ...]) -> None:
    """Per-row values are one per row of the domain (translate.py checks that full values meet them
    only with keepdim's trailing 1)."""
    d, C = len(domain), domain[-1]
    if C > MAX_ROW:
        raise _fail(f"rows of {C} values; a generated rows kernel holds at most {MAX_ROW} in registers",
                    "Write a kernel that walks each row in blocks (a loop over C).")
    row_shape = _drop_ones(domain[:-1])
    for op in ops:
        if op.meta is None:
            continue
        shape = _shape(op)
        if op.row and (_drop_ones(shape) != row_shape or len(shape) not in (d - 1, d) or
                       (len(shape) == d and shape[-1] != 1)):
            raise _fail(f"{op.source} has shape {list(shape)}, not one value per row of {list(domain)}",
                        "Keep per-row values as (rows..., 1) with keepdim=True, and reduce only full rows.")


def _check_reduced(tr: Translator, ops: list[PreOp], uses: list[tuple[str, torch.Tensor, int]], C: int) -> None:
    """Each reduction runs over C values: its operand's last dim is the domain's (a value broadcast
    along it would be counted C times in the kernel but once by torch)."""
    views = {(name, i): view for name, view, i in uses}
    for i, op in enumerate(ops):
        if not op.reduce:
            continue
        a = op.args[0]
        src = tr.ops[a.index].meta if isinstance(a, OpRef) else views.get((a.name, i)) if isinstance(
            a, InputRef) else None
        if src is not None and (src.dim() == 0 or int(src.shape[-1]) != C):
            last = int(src.shape[-1]) if src.dim() else 1
            raise _fail(f"{op.source} reduces a last dim of {last} values, and the rows of this kernel have {C}",
                        "Reduce values that vary along the last dim, or reduce in a kernel of their own.")


def _layouts(kind: str, ops: list[PreOp], uses: list[tuple[str, torch.Tensor, int]], domain: tuple[int, ...],
             dot: PreOp | None) -> tuple[list[str], list[Layout]]:
    """The arguments the kernel loads (a matmul's operands first) and how each is addressed."""
    d = len(domain)
    seen: dict[str, tuple[object, ...]] = {}
    views: dict[str, tuple[torch.Tensor, tuple[int, bool], tuple[int, ...]]] = {}
    per_row: set[str] = set()
    for name, view, i in uses:
        op = ops[i]
        shape = tuple(int(s) for s in view.shape)
        if op.name == "dot":
            if op.args[0] == op.args[1]:
                raise _fail(f"{name} is both operands of a matmul", "Pass it twice, as two arguments.")
            pad, dom = (0, False), shape
        else:
            trail = op.row and not op.reduce and len(_shape(op)) == d - 1
            pad, dom = (d - len(shape) - int(trail), trail), domain
            if op.row and not op.reduce:
                per_row.add(name)
        if pad[0] < 0:
            raise _fail(f"{name} (shape {list(shape)}) has more dims than the kernel's domain {list(domain)}")
        entry = (shape, tuple(view.stride()), pad, dom)
        if seen.setdefault(name, entry) != entry:
            raise _fail(f"{name} is read in two ways (as a matmul operand and elsewhere, or through two views)",
                        "Pass it twice, as two arguments, one for each use.")
        views[name] = (view, pad, dom)
    names = list(views)
    if dot is not None:
        a, b = (x.name for x in dot.args if isinstance(x, InputRef))
        names = [a, b] + [n for n in names if n not in (a, b)]
    layouts = [layout_of(views[n][0], views[n][1], views[n][2], rows=kind != "pointwise") for n in names]
    for n, lay in zip(names, layouts, strict=True):
        if n in per_row and lay.col_stride != 0:
            raise _fail(f"{n} meets per-row values but varies along the rows' last dim",
                        "Give it one value per row (shape (rows..., 1)), or combine it with full values.")
    return names, layouts
