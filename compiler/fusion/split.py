"""A cols group split over its rows: two kernels where one program per column block is too few.

A cols kernel gives each program BLOCK_C columns and walks every row: with a few hundred columns
and thousands of rows (a linear layer's bias gradient) that is a dozen programs on a GPU of 132
multiprocessors. Split, the rows are cut into S chunks of RSPLIT rows:

- `partial` (a cols group emitted with `split=True`, grid (column blocks, S)): each program walks
  its chunk, writes the group's full values as the whole group would, and one partial result per
  reduction into row `s` of an (S, C) workspace, in the accumulator's dtype (float32, int64 for
  integers, float64 stays). A mean's partial is its chunk's sum divided by the whole R, so the
  partials sum to the mean.
- `finish` (a plain cols group over the (S, C) workspace): each reduction of the partials (sum for
  sum and mean, amax, amin), then the group's per-column work on them, and the per-column outputs.

The results differ from the single kernel's only in the order of the float additions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import COL, FULL, Group, Op, Ref

__all__ = ["ColsSplit", "COL_REDUCTIONS", "acc_dtype", "split_cols"]

COL_REDUCTIONS = ("sum", "mean", "amax", "amin")
_INTS = ("bool", "uint8", "int8", "int16", "int32", "int64")


def acc_dtype(dtype: str) -> str:
    """The dtype a cols kernel accumulates values of `dtype` in."""
    return "int64" if dtype in _INTS else "float64" if dtype == "float64" else "float32"


@dataclass(frozen=True)
class ColsSplit:
    partial: Group
    finish: Group
    walk_inputs: tuple[int, ...]  # the group's inputs `partial` loads, in its order
    col_inputs: tuple[int, ...]  # the group's inputs `finish` loads after the partials, in its order
    full_outputs: tuple[int, ...]  # positions in the group's outputs that `partial` writes
    col_outputs: tuple[int, ...]  # positions in the group's outputs that `finish` writes
    partial_dtypes: tuple[str, ...]  # one workspace per reduction: its dtype


def _dtype_of(g: Group, a: Ref) -> str:
    return g.inputs[a.index][0] if a.input else g.ops[a.index].dtype


def split_cols(g: Group) -> ColsSplit:
    """The two groups computing cols group `g` (see the module's docstring)."""
    assert g.kind == "cols"
    walk = tuple(k for k, (_, kind) in enumerate(g.inputs) if kind != COL)
    cols = tuple(k for k, (_, kind) in enumerate(g.inputs) if kind == COL)
    reductions = [i for i, op in enumerate(g.ops) if op.name in COL_REDUCTIONS]

    a = Group("cols", inputs=[g.inputs[k] for k in walk])
    a_ref: dict[Ref, Ref] = {Ref(k, input=True): Ref(j, input=True) for j, k in enumerate(walk)}
    dtypes: list[str] = []
    for i, op in enumerate(g.ops):
        if op.kind == FULL or i in reductions:
            args = tuple(a_ref[x] if isinstance(x, Ref) else x for x in op.args)
            if i in reductions:
                src = op.args[0]
                assert isinstance(src, Ref)
                dtypes.append(acc_dtype(_dtype_of(g, src)))
                op = Op(op.name, args, dtypes[-1], COL)
            else:
                op = Op(op.name, args, op.dtype, op.kind)
            a_ref[Ref(i)] = Ref(len(a.ops))
            a.ops.append(op)
    full_outputs = tuple(j for j, i in enumerate(g.outputs) if g.ops[i].kind == FULL)
    a.outputs = [a_ref[Ref(g.outputs[j])].index for j in full_outputs] + [a_ref[Ref(i)].index for i in reductions]

    b = Group("cols", inputs=[(d, FULL) for d in dtypes] + [g.inputs[k] for k in cols])
    b_ref: dict[Ref, Ref] = {Ref(k, input=True): Ref(len(dtypes) + j, input=True) for j, k in enumerate(cols)}
    for r, i in enumerate(reductions):
        op = g.ops[i]
        name = "sum" if op.name in ("sum", "mean") else op.name
        b_ref[Ref(i)] = Ref(len(b.ops))
        b.ops.append(Op(name, (Ref(r, input=True),), op.dtype, COL))
    for i, op in enumerate(g.ops):
        if op.kind != FULL and i not in reductions:
            b_ref[Ref(i)] = Ref(len(b.ops))
            b.ops.append(Op(op.name, tuple(b_ref[x] if isinstance(x, Ref) else x for x in op.args), op.dtype, op.kind))
    col_outputs = tuple(j for j, i in enumerate(g.outputs) if g.ops[i].kind != FULL)
    b.outputs = [b_ref[Ref(g.outputs[j])].index for j in col_outputs]
    return ColsSplit(a, b, walk, cols, full_outputs, col_outputs, tuple(dtypes))
